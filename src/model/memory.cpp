#include "src/model/memory.hpp"

#include <algorithm>

#include "src/model/flops.hpp"

namespace prism {

namespace {

struct ActivationTerms {
    double replicated = 0;  ///< bytes replicated over TP unless sequence parallel
    double sharded = 0;     ///< bytes divided by t
    double scores = 0;      ///< the materialized attention scores (divided by t)
};

ActivationTerms activation_terms(const ModelSpec& m, const TrainingSpec& tr, int b, int cp) {
    const double tokens = double(b) * m.seq / cp;
    const double h = m.hidden;
    const double hk = h * (m.kv_heads > 0 ? m.kv_heads : m.heads) / m.heads;
    // FP8 training (TransformerEngine): the inputs of the FP8 GEMMs are kept for the weight
    // gradient in their FP8 copy, 1 byte instead of 2 (te.Linear, LayerNormLinear and
    // LayerNormMLP save the quantized input, column-wise data only: TransformerEngine
    // pytorch/module/linear.py "Discard row-wise data", layernorm_mlp.py saves ln_out and
    // act_out): the QKV, projection, FC1 and FC2 inputs
    const bool fp8 = tr.precision == Precision::fp8;
    const double gemm_input = fp8 ? 1.0 : 2.0;
    // Not counted (docs/hardware.md, "Memory terms"): with FP8 and fused attention the attention
    // output is also kept in bf16 by the attention (TransformerEngine FusedAttnFunc saves q, k,
    // v and out_f16) besides the projection's FP8 copy; counting it puts published H100 runs
    // above the default usable fraction, so some other term here over-states them
    const double mask = tr.dropout ? 1.0 : 0.0;  // 1-byte dropout mask; none at p = 0
    ActivationTerms a;
    // two layer-norm inputs (4), QKV input, attention dropout mask, MLP input, MLP dropout mask
    a.replicated = (4.0 + 2.0 * mask + 2.0 * gemm_input) * tokens * h;
    // Q (2 s b h), the projection input (the attention output), K and V (4 s b h_kv), MLP: the FC1
    // output (2 f, x2 gated) and the FC2 input (f wide)
    a.sharded = tokens * ((2.0 + gemm_input) * h + 4.0 * hk +
                          ((m.gated_mlp ? 4.0 : 2.0) + gemm_input) * m.ffn);
    // softmax output (2), and with dropout its mask (1) and output (2), per score
    a.scores = (tr.dropout ? 5.0 : 2.0) * m.heads * tokens * m.seq;
    return a;
}

}  // namespace

double weight_bytes(const ModelSpec& m, const TrainingSpec& tr, double layers, double embeddings) {
    const double params = layers * layer_params(m) + embeddings * embedding_params(m);
    const double fp8_matrices = tr.fp8_params ? layers * layer_matrix_params(m) : 0.0;
    return kWeightBytesPerParam * params - (kWeightBytesPerParam - 1.0) * fp8_matrices;
}

double activation_bytes_per_layer(const ModelSpec& m, const TrainingSpec& tr,
                                  const DesignPoint& p) {
    const double t = p.tp;
    const ActivationTerms a = activation_terms(m, tr, p.microbatch, p.cp);
    if (p.recompute == Recompute::full) {
        const double input = 2.0 * p.microbatch * double(m.seq) / p.cp * m.hidden;
        return p.sequence_parallel ? input / t : input;
    }
    const bool keep_scores = p.recompute == Recompute::none && !tr.flash_attention;
    const double replicated = p.sequence_parallel ? a.replicated / t : a.replicated;
    return replicated + a.sharded / t + (keep_scores ? a.scores / t : 0.0);
}

double inflight_microbatches(int pp, int v, int m, int stage) {
    if (v <= 1 || pp <= 1) return std::min(m, pp - stage);
    const int total = m * v;
    const int warmup = m == pp ? total : 2 * (pp - stage - 1) + (v - 1) * pp;
    return double(std::min(total, warmup + 1)) / v;
}

namespace {

/// What every stage's memory shares: per-layer parameters, activations and recompute buffer.
struct StageTerms {
    double layer_params = 0, embedding_params = 0;
    double layer_weight_bytes = 0;  ///< one layer's stored weights (fp8_params: matrices 1 byte)
    double grad_bytes_per_param = kGradBytesPerParam;  ///< 2 without grad_reduce_in_fp32
    double activations_per_layer = 0;
    double recompute_temporary = 0;
};

StageTerms stage_terms(const ModelSpec& m, const TrainingSpec& tr, const DesignPoint& p) {
    StageTerms t;
    t.layer_params = layer_params(m);
    t.embedding_params = embedding_params(m);
    t.layer_weight_bytes = weight_bytes(m, tr, 1, 0);
    t.grad_bytes_per_param = tr.grad_reduce_in_fp32 ? kGradBytesPerParam : kWeightBytesPerParam;
    t.activations_per_layer = activation_bytes_per_layer(m, tr, p);
    if (p.recompute != Recompute::none) {
        // recomputing a layer rebuilds its activations (full) or its attention core (selective)
        DesignPoint none = p;
        none.recompute = Recompute::none;
        DesignPoint sel = p;
        sel.recompute = Recompute::selective;
        const double whole = activation_bytes_per_layer(m, tr, none);
        t.recompute_temporary =
            p.recompute == Recompute::full ? whole : whole - activation_bytes_per_layer(m, tr, sel);
    }
    return t;
}

MemoryBreakdown stage_memory(const StageTerms& terms, const ModelSpec& m, const DesignPoint& p,
                             int microbatches, int stage, int layers) {
    MemoryBreakdown mem;
    const double t = p.tp;
    const double shards = double(p.dp) * p.cp;  // Megatron's data-parallel group with CP
    const bool first = stage == 0;
    const bool last = stage == p.pp - 1;
    // the first stage's embedding; the last stage's output layer (a copy when tied and pp > 1)
    const double word_embeddings =
        (first ? 1 : 0) + (last && (p.pp > 1 || !m.tied_embeddings) ? 1 : 0);
    const double params =
        (layers * terms.layer_params + word_embeddings * terms.embedding_params) / t;
    const double weights = (layers * terms.layer_weight_bytes +
                            word_embeddings * kWeightBytesPerParam * terms.embedding_params) /
                           t;
    mem.weights_bytes = weights / (p.zero_stage >= 3 ? shards : 1.0);
    mem.grads_bytes = terms.grad_bytes_per_param * params / (p.zero_stage >= 2 ? shards : 1.0);
    mem.optimizer_bytes = kOptimizerBytesPerParam * params / (p.zero_stage >= 1 ? shards : 1.0);

    mem.activations_bytes = terms.activations_per_layer * layers *
                            inflight_microbatches(p.pp, p.interleave, microbatches, stage);

    double temporary = terms.recompute_temporary;
    if (last) {
        // fp32 logits and their gradient (vocab-parallel over t)
        temporary += 2.0 * 4.0 * p.microbatch * double(m.seq) / p.cp * m.vocab / t;
    }
    if (p.zero_stage >= 3) {
        // the gathered weights of the current and the prefetched layer
        temporary += 2.0 * terms.layer_weight_bytes / t;
    }
    mem.temporary_bytes = temporary;
    return mem;
}

}  // namespace

MemoryBreakdown memory_of_stage(const ModelSpec& m, const TrainingSpec& tr, const DesignPoint& p,
                                int microbatches, int stage, int layers) {
    return stage_memory(stage_terms(m, tr, p), m, p, microbatches, stage, layers);
}

std::vector<MemoryBreakdown> memory_of_stages(const ModelSpec& m, const TrainingSpec& tr,
                                              const DesignPoint& p, int microbatches,
                                              const std::vector<int>& stage_layers) {
    const StageTerms terms = stage_terms(m, tr, p);
    std::vector<MemoryBreakdown> out;
    out.reserve(stage_layers.size());
    for (std::size_t s = 0; s < stage_layers.size(); ++s) {
        out.push_back(stage_memory(terms, m, p, microbatches, int(s), stage_layers[s]));
    }
    return out;
}

MemoryBreakdown memory_per_gpu(const ModelSpec& m, const TrainingSpec& tr, const DesignPoint& p,
                               int microbatches) {
    return memory_of_stage(m, tr, p, microbatches, 0, m.layers / p.pp);
}

MemoryReserveSpec default_memory_reserve() {
    constexpr double kMiB = 1024.0 * 1024.0;
    MemoryReserveSpec r;
    r.cuda_context_bytes = 512 * kMiB;
    r.workspace_bytes = 32 * kMiB + 2 * 32 * kMiB;
    r.nccl_bytes_per_communicator = kNcclConnectionsPerCommunicator * kNcclConnectionBytes;
    return r;
}

int nccl_communicators(const DesignPoint& p) {
    int groups = 0;
    for (const int size : {p.tp, p.cp, p.pp, p.dp}) groups += size > 1 ? 1 : 0;
    if (p.cp > 1 && p.dp > 1) ++groups;  // the d c group besides the d and c ones
    return groups;
}

double reserved_bytes(const MemoryReserveSpec& reserve, const DesignPoint& p) {
    return reserve.cuda_context_bytes + reserve.workspace_bytes +
           reserve.nccl_bytes_per_communicator * nccl_communicators(p);
}

double model_state_bytes_average(const ModelSpec& m, const DesignPoint& p) {
    const double params = total_params(m) / (double(p.tp) * p.pp);
    const double d = double(p.dp) * p.cp;
    return kWeightBytesPerParam * params / (p.zero_stage >= 3 ? d : 1.0) +
           kGradBytesPerParam * params / (p.zero_stage >= 2 ? d : 1.0) +
           kOptimizerBytesPerParam * params / (p.zero_stage >= 1 ? d : 1.0);
}

}  // namespace prism
