#include "src/model/flops.hpp"

namespace prism {

namespace {
double kv_hidden(const ModelSpec& m) {
    const int g = m.kv_heads > 0 ? m.kv_heads : m.heads;
    return double(m.hidden) * g / m.heads;
}
}  // namespace

LayerFlops layer_forward_flops(const ModelSpec& m, int b) {
    const double bs = double(b) * m.seq;
    const double h = m.hidden;
    LayerFlops f;
    f.qkv = 2.0 * bs * h * (h + 2.0 * kv_hidden(m));
    f.attention = 4.0 * bs * m.seq * h;
    f.projection = 2.0 * bs * h * h;
    f.mlp = 2.0 * bs * h * m.ffn * (m.gated_mlp ? 3.0 : 2.0);
    return f;
}

double logits_forward_flops(const ModelSpec& m, int b) {
    return 2.0 * double(b) * m.seq * m.hidden * double(m.vocab);
}

double megatron_flops_per_step(const ModelSpec& m, std::int64_t batch) {
    const double s = m.seq, h = m.hidden, l = m.layers, v = m.vocab;
    return 96.0 * double(batch) * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
}

double model_flops_per_step(const ModelSpec& m, std::int64_t batch) {
    const LayerFlops f = layer_forward_flops(m, 1);
    const double causal_attention = 0.5 * f.attention;
    const double fwd =
        m.layers * (f.total() - f.attention + causal_attention) + logits_forward_flops(m, 1);
    return 3.0 * fwd * double(batch);
}

double hardware_flops_per_step(const ModelSpec& m, const TrainingSpec& tr, Recompute recompute,
                               std::int64_t batch) {
    const LayerFlops f = layer_forward_flops(m, 1);
    const double gemms = f.total() - f.attention;
    const double attention_fwd = tr.flash_attention ? 0.5 * f.attention : f.attention;
    const double attention_bwd = (tr.flash_attention ? 2.5 : 2.0) * attention_fwd;
    double layer = 3.0 * gemms + attention_fwd + attention_bwd;
    if (recompute == Recompute::selective) layer += attention_fwd;
    if (recompute == Recompute::full) layer += gemms + attention_fwd;
    return (m.layers * layer + 3.0 * logits_forward_flops(m, 1)) * double(batch);
}

double layer_params(const ModelSpec& m) {
    const double h = m.hidden, hk = kv_hidden(m), f = m.ffn;
    const double attention = h * (h + 2 * hk) + (h + 2 * hk) + h * h + h;
    const double mlp = m.gated_mlp ? 3 * h * f + 2 * f + h : 2 * h * f + f + h;
    return attention + mlp + 4 * h;
}

double layer_matrix_params(const ModelSpec& m) {
    const double h = m.hidden, hk = kv_hidden(m), f = m.ffn;
    return h * (h + 2 * hk) + h * h + (m.gated_mlp ? 3 : 2) * h * f;
}

double embedding_params(const ModelSpec& m) { return double(m.vocab) * m.hidden; }

double total_params(const ModelSpec& m) {
    return m.layers * layer_params(m) + (m.tied_embeddings ? 1 : 2) * embedding_params(m);
}

}  // namespace prism
