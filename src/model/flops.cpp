#include "src/model/flops.hpp"

namespace prism {

namespace {

double mlp_matrices(const ModelSpec& m) { return m.gated_mlp ? 3.0 : 2.0; }

/// Attention weight matrices (without biases and norms).
double attention_matrix_params(const ModelSpec& m) {
    const double h = m.hidden;
    if (!m.is_mla()) return h * (m.q_width() + 2 * m.kv_width()) + m.q_width() * h;
    const double a = m.heads, qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    const double q = m.q_lora_rank > 0 ? h * m.q_lora_rank + m.q_lora_rank * a * qk : h * a * qk;
    const double kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) +
                      double(m.kv_lora_rank) * a * (m.qk_nope_head_dim + m.v_head_dim);
    return q + kv + a * m.v_head_dim * h;
}

LayerFlops attention_flops(const ModelSpec& m, int b) {
    const double bs = double(b) * m.seq;
    const double h = m.hidden;
    LayerFlops f;
    if (m.is_mla()) {
        const double a = m.heads;
        const double out = a * m.v_head_dim * h;
        f.qkv = 2.0 * bs * (attention_matrix_params(m) - out);
        f.attention =
            2.0 * bs * m.seq * a * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim);
        f.projection = 2.0 * bs * out;
    } else {
        f.qkv = 2.0 * bs * h * (m.q_width() + 2.0 * m.kv_width());
        f.attention = 4.0 * bs * m.seq * m.q_width();
        f.projection = 2.0 * bs * m.q_width() * h;
    }
    return f;
}

double norms(const ModelSpec& m) { return 4.0 * m.hidden; }

}  // namespace

LayerFlops layer_forward_flops(const ModelSpec& m, int b) {
    LayerFlops f = attention_flops(m, b);
    f.mlp = 2.0 * double(b) * m.seq * m.hidden * m.ffn * mlp_matrices(m);
    return f;
}

LayerFlops moe_layer_forward_flops(const ModelSpec& m, int b) {
    if (!m.is_moe()) return layer_forward_flops(m, b);
    LayerFlops f = attention_flops(m, b);
    const double bs = double(b) * m.seq;
    f.mlp = 2.0 * bs * m.hidden * double(m.expert_ffn) * mlp_matrices(m) *
            double(m.top_k + m.shared_experts);
    f.router = 2.0 * bs * m.hidden * double(m.experts);
    return f;
}

double layers_forward_flops(const ModelSpec& m, int b, bool causal) {
    const int moe = m.moe_layers();
    const LayerFlops d = layer_forward_flops(m, b);
    const LayerFlops e = moe_layer_forward_flops(m, b);
    const double scale = causal ? 0.5 : 1.0;
    return (m.layers - moe) * (d.total() - (1 - scale) * d.attention) +
           moe * (e.total() - (1 - scale) * e.attention);
}

double logits_forward_flops(const ModelSpec& m, int b) {
    return 2.0 * double(b) * m.seq * m.hidden * double(m.vocab);
}

double megatron_flops_per_step(const ModelSpec& m, std::int64_t batch) {
    const double s = m.seq, h = m.hidden, l = m.layers, v = m.vocab;
    return 96.0 * double(batch) * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
}

double model_flops_per_step(const ModelSpec& m, std::int64_t batch) {
    const double fwd = layers_forward_flops(m, 1, true) + logits_forward_flops(m, 1);
    return 3.0 * fwd * double(batch);
}

double hardware_flops_per_step(const ModelSpec& m, const TrainingSpec& tr, Recompute recompute,
                               std::int64_t batch, bool wo_output_saved) {
    const TrainingSpec::RecomputeModules& rm = tr.recompute_modules;
    auto layer = [&](const LayerFlops& f, bool moe_layer) {
        const double gemms = f.total() - f.attention;
        const double attention_fwd = tr.flash_attention ? 0.5 * f.attention : f.attention;
        const double attention_bwd = (tr.flash_attention ? 2.5 : 2.0) * attention_fwd;
        double t = 3.0 * gemms + attention_fwd + attention_bwd;
        if (recompute == Recompute::selective && tr.torchtitan_op_sac()) {
            // torchtitan's op-level SAC: wk and w3 again, and wo unless its output is kept
            const double s = m.seq, h = m.hidden, hk = m.kv_width(), hv = m.q_width();
            t += 2.0 * s * h * hk + 2.0 * s * h * double(m.ffn);
            if (!wo_output_saved) t += 2.0 * s * hv * h;
        } else if (recompute == Recompute::selective) {
            // the recompute_modules' forward GEMMs (docs/recompute_modules.md)
            if (rm.core_attn) t += attention_fwd;
            if (rm.mla_up_proj && m.is_mla()) {
                const double bs = double(m.seq);
                t += 2.0 * bs * m.heads *
                     ((m.q_lora_rank > 0 ? double(m.q_lora_rank) : double(m.hidden)) *
                          (m.qk_nope_head_dim + m.qk_rope_head_dim) +
                      double(m.kv_lora_rank) * (m.qk_nope_head_dim + m.v_head_dim));
            }
            if (moe_layer && rm.moe) {
                t += f.mlp + f.router;
            } else if (moe_layer && rm.shared_experts) {
                t += f.mlp * double(m.shared_experts) / double(m.top_k + m.shared_experts);
            } else if (!moe_layer && rm.mlp) {
                t += f.mlp;
            }
        }
        if (recompute == Recompute::full) t += gemms + attention_fwd;
        return t;
    };
    const int moe = m.moe_layers();
    const double layers = (m.layers - moe) * layer(layer_forward_flops(m, 1), false) +
                          moe * layer(moe_layer_forward_flops(m, 1), m.is_moe());
    return (layers + 3.0 * logits_forward_flops(m, 1)) * double(batch);
}

double attention_params(const ModelSpec& m) {
    if (m.is_mla()) return attention_matrix_params(m) + m.q_lora_rank + m.kv_lora_rank;
    const double h = m.hidden, hq = m.q_width(), hk = m.kv_width();
    return attention_matrix_params(m) + (hq + 2 * hk) + h;
}

double dense_layer_params(const ModelSpec& m) {
    const double h = m.hidden, f = m.ffn;
    const double mlp = m.gated_mlp ? 3 * h * f + 2 * f + h : 2 * h * f + f + h;
    return attention_params(m) + mlp + norms(m);
}

double moe_layer_params(const ModelSpec& m) {
    if (!m.is_moe()) return dense_layer_params(m);
    const double h = m.hidden;
    const double experts =
        double(m.experts + m.shared_experts) * h * m.expert_ffn * mlp_matrices(m);
    return attention_params(m) + double(m.experts) * h + experts + norms(m);
}

double layer_expert_params(const ModelSpec& m) {
    if (!m.is_moe() || m.layers <= 0) return 0;
    return double(m.moe_layers()) * m.experts * m.hidden * double(m.expert_ffn) * mlp_matrices(m) /
           m.layers;
}

double layer_params(const ModelSpec& m) {
    if (!m.is_moe() || m.layers <= 0) return dense_layer_params(m);
    const int moe = m.moe_layers();
    return ((m.layers - moe) * dense_layer_params(m) + moe * moe_layer_params(m)) / m.layers;
}

double layer_matrix_params(const ModelSpec& m) {
    const double h = m.hidden;
    const double dense = attention_matrix_params(m) + mlp_matrices(m) * h * m.ffn;
    if (!m.is_moe() || m.layers <= 0) return dense;
    const double moe = attention_matrix_params(m) + double(m.experts) * h +
                       double(m.experts + m.shared_experts) * h * m.expert_ffn * mlp_matrices(m);
    const int n = m.moe_layers();
    return ((m.layers - n) * dense + n * moe) / m.layers;
}

double embedding_params(const ModelSpec& m) { return double(m.vocab) * m.hidden; }

double total_params(const ModelSpec& m) {
    return m.layers * layer_params(m) + (m.tied_embeddings ? 1 : 2) * embedding_params(m);
}

double active_params(const ModelSpec& m) {
    const double embeddings = (m.tied_embeddings ? 1 : 2) * embedding_params(m);
    if (!m.is_moe()) return total_params(m);
    const int moe = m.moe_layers();
    const double h = m.hidden;
    const double active_moe =
        attention_params(m) + norms(m) + double(m.experts) * h +
        double(m.top_k + m.shared_experts) * h * m.expert_ffn * mlp_matrices(m);
    return (m.layers - moe) * dense_layer_params(m) + moe * active_moe + embeddings;
}

}  // namespace prism
