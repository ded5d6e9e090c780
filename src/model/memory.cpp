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

/// One layer's terms; `moe` = an MoE layer's MLP part (docs/moe.md, "Memory"). With
/// recompute = "selective", the [training] recompute_modules' activations are not stored
/// (docs/recompute_modules.md): a module checkpointed whole keeps only its input.
ActivationTerms activation_terms_of(const ModelSpec& m, const TrainingSpec& tr,
                                    const DesignPoint& p, bool moe) {
    const bool selective = p.recompute == Recompute::selective;
    const TrainingSpec::RecomputeModules none_recomputed{.core_attn = false};
    const TrainingSpec::RecomputeModules& rm = selective ? tr.recompute_modules : none_recomputed;
    const double tokens = double(p.microbatch) * m.seq / p.cp;
    const double h = m.hidden;
    double hq = m.q_width(), hv = hq;
    double hk = m.kv_width();
    double latents = 0;
    if (m.is_mla()) {
        hq = double(m.heads) * (m.qk_nope_head_dim + m.qk_rope_head_dim);
        hv = double(m.heads) * m.v_head_dim;
        hk = 0.5 * (hq + hv);
        latents = double(m.q_lora_rank) + m.kv_lora_rank + m.qk_rope_head_dim;
    }
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
    const double mask = tr.dropout ? 1.0 : 0.0;    // 1-byte dropout mask; none at p = 0
    const double gates = m.gated_mlp ? 4.0 : 2.0;  // FC1 output bytes per inner unit
    ActivationTerms a;
    // two layer-norm inputs (4), QKV input, attention dropout mask, MLP input, MLP dropout mask;
    // MLA: the latent Q and KV (inputs of the up projections)
    // layernorm recompute: the norms' outputs (the QKV and the MLP inputs) are discarded and
    // rebuilt (the linear layers save that original input instead of an FP8 copy); a whole
    // recomputed MLP / MoE block keeps its input in bf16 (the checkpoint's input) instead
    const bool whole_mlp = moe && m.is_moe() ? rm.moe : rm.mlp;
    const double qkv_input = rm.layernorm ? 0.0 : gemm_input;
    const double mlp_input = rm.layernorm ? 0.0 : whole_mlp ? 2.0 : gemm_input;
    a.replicated =
        (4.0 + 2.0 * mask + qkv_input + mlp_input) * tokens * h + gemm_input * tokens * latents;
    // Q (2 s b a d), projection input (s b a d, the attention output), K and V (4 s b h_kv);
    // mla_up_proj discards Q, K and V (the up projections' outputs after RoPE) and rebuilds
    // them before the attention's backward
    a.sharded = tokens * ((rm.mla_up_proj ? 0.0 : 2.0 * hq + 4.0 * hk) + gemm_input * hv);
    if (whole_mlp) {
        // the whole MLP / MoE block recomputed: nothing inside it stored
    } else if (moe && m.is_moe()) {
        // routed experts per dispatched copy (T k of them, x the capacity factor; with etp the
        // gathered tokens over f_e / etp): FC1 input, FC1 output, FC2 input, and the copy's
        // fp32 routing probability (4): Megatron-Core applies it in the activation
        // (TEGroupedMLP.bias_act_func, weighted_bias_swiglu_impl, since 2025-04), so the
        // combine is a plain sum and keeps no expert output; the router's fp32 probabilities
        // (4 E); the shared experts as a dense MLP of shared x f_e. All on the sequence-parallel
        // shard (tokens / t): "sharded".
        const double cf = tr.moe_capacity_factor > 0 ? tr.moe_capacity_factor : 1.0;
        const double fe = m.expert_ffn;
        const double copies = double(m.top_k) * cf;
        // moe_act: the activation's output (the FC2 input) discarded and rebuilt
        const double fc2_input = rm.moe_act ? 0.0 : gemm_input;
        a.sharded += tokens * (copies * (gemm_input * h * p.etp + (gates + fc2_input) * fe) +
                               copies * 4.0 + 4.0 * m.experts);
        if (!rm.shared_experts) {
            a.sharded += tokens * (gates + gemm_input) * double(m.shared_experts) * fe;
        }
    } else {
        // the FC1 output (2 f, x2 gated) and the FC2 input (f wide)
        a.sharded += tokens * (gates + gemm_input) * m.ffn;
    }
    // softmax output (2), and with dropout its mask (1) and output (2), per score
    a.scores = (tr.dropout ? 5.0 : 2.0) * m.heads * tokens * m.seq;
    return a;
}

/// The mean layer's terms: dense and MoE layers by their share of the layers.
ActivationTerms activation_terms(const ModelSpec& m, const TrainingSpec& tr, const DesignPoint& p) {
    const int moe = m.moe_layers();
    if (moe == 0) return activation_terms_of(m, tr, p, false);
    if (moe == m.layers) return activation_terms_of(m, tr, p, true);
    const double w = double(moe) / m.layers;
    const ActivationTerms d = activation_terms_of(m, tr, p, false);
    const ActivationTerms e = activation_terms_of(m, tr, p, true);
    return {(1 - w) * d.replicated + w * e.replicated, (1 - w) * d.sharded + w * e.sharded,
            (1 - w) * d.scores + w * e.scores};
}

/// torchtitan's op-level SAC under torch.compile (docs/torchtitan_sac.md), bytes per token of
/// one layer: what the policy saves that the backward reads. The block's input x (2 h, the
/// checkpoint's input; on the SP shard with TP), the outputs of wq (Q before RoPE, 2 a d), wv
/// (V, 2 g d), SDPA (its output 2 a d; its fp32 logsumexp, 4 a, is not counted, as elsewhere)
/// and w1 (2 f), and with TP and SP the reduce-scatter output of wo (2 h / t); the bf16 mm
/// outputs whatever the precision (torchao's FP8 GEMMs output bf16, their casts are
/// recomputed). Not stored: the norms' outputs, wk's and w3's outputs, RoPE, SiLU * mul, the
/// residual sum h, dropout (none: its random op is replayed), the FP8 copies.
double op_sac_bytes_per_token(const ModelSpec& m, const DesignPoint& p) {
    const double t = p.tp, h = m.hidden;
    const double hq = m.q_width(), hk = m.kv_width();
    const double replicated = 2.0 * h;
    const double sharded =
        2.0 * hq + 2.0 * hk + 2.0 * hq + 2.0 * m.ffn + (op_sac_saves_wo_output(p) ? 2.0 * h : 0.0);
    return (p.sequence_parallel ? replicated / t : replicated) + sharded / t;
}

/// The tensors op-level SAC rebuilds for one layer's backward, the larger of its two parts
/// (bytes per token): the MLP's (the residual sum h, ffn_norm's gathered output, w3's output
/// and SiLU * mul, 2 h + 2 h + 4 f / t) and the attention's (attention_norm's gathered output,
/// Q and K after RoPE, GQA's repeated K and V: 2 h + (2 a d + 2 g d + 4 a d) / t).
double op_sac_rebuilt_bytes_per_token(const ModelSpec& m, const DesignPoint& p) {
    const double t = p.tp, h = m.hidden;
    const double hq = m.q_width(), hk = m.kv_width();
    const double mlp = (p.sequence_parallel ? 2.0 * h / t : 2.0 * h) + 2.0 * h + 4.0 * m.ffn / t;
    const double attention = 2.0 * h + (2.0 * hq + 2.0 * hk + 4.0 * hq) / t;
    return std::max(mlp, attention);
}

bool op_sac(const TrainingSpec& tr, const DesignPoint& p) {
    return p.recompute == Recompute::selective && tr.torchtitan_op_sac();
}

}  // namespace

double weight_bytes(const ModelSpec& m, const TrainingSpec& tr, double layers, double embeddings) {
    const double params = layers * layer_params(m) + embeddings * embedding_params(m);
    const double fp8_matrices = tr.fp8_params ? layers * layer_matrix_params(m) : 0.0;
    return kWeightBytesPerParam * params - (kWeightBytesPerParam - 1.0) * fp8_matrices;
}

double expert_weight_bytes(const ModelSpec& m, const TrainingSpec& tr, double layers) {
    return layers * layer_expert_params(m) * (tr.fp8_params ? 1.0 : kWeightBytesPerParam);
}

double activation_bytes_per_layer(const ModelSpec& m, const TrainingSpec& tr,
                                  const DesignPoint& p) {
    const double t = p.tp;
    if (op_sac(tr, p)) return op_sac_bytes_per_token(m, p) * p.microbatch * double(m.seq) / p.cp;
    const ActivationTerms a = activation_terms(m, tr, p);
    if (p.recompute == Recompute::full) {
        const double input = 2.0 * p.microbatch * double(m.seq) / p.cp * m.hidden;
        return p.sequence_parallel ? input / t : input;
    }
    const bool keep_scores =
        !tr.flash_attention &&
        (p.recompute == Recompute::none ||
         (p.recompute == Recompute::selective && !tr.recompute_modules.core_attn));
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
    double expert_params = 0;        ///< the routed experts' part of layer_params
    double expert_weight_bytes = 0;  ///< the routed experts' part of layer_weight_bytes
    double layer_weight_bytes = 0;   ///< one layer's stored weights (fp8_params: matrices 1 byte)
    double grad_bytes_per_param = kGradBytesPerParam;            ///< 2 without grad_reduce_in_fp32
    double optimizer_bytes_per_param = kOptimizerBytesPerParam;  ///< 4 with pure_bf16
    double logit_bytes = 4;  ///< the logits and their gradient: fp32 (amp's loss), bf16 if pure
    double activations_per_layer = 0;
    double recompute_temporary = 0;
    /// DeepSpeed's ZeRO-1/2 gradient bucket(s), allocated whole in each backward
    /// (TrainingSpec::reduce_bucket_elements)
    double grad_bucket_bytes = 0;
    /// the ZeRO stage of the memory (sharding_stage: FSDP under PP may hold 1's)
    int sharding = 0;
};

StageTerms stage_terms(const ModelSpec& m, const TrainingSpec& tr, const DesignPoint& p) {
    StageTerms t;
    t.layer_params = layer_params(m);
    t.embedding_params = embedding_params(m);
    t.layer_weight_bytes = weight_bytes(m, tr, 1, 0);
    t.grad_bytes_per_param = grad_bytes_per_param(tr);
    t.optimizer_bytes_per_param = optimizer_bytes_per_param(tr);
    t.logit_bytes = tr.pure_bf16 ? 2.0 : 4.0;
    t.expert_params = layer_expert_params(m);
    t.expert_weight_bytes = expert_weight_bytes(m, tr, 1);
    t.sharding = sharding_stage(tr, p);
    // DeepSpeed's ZeRO-1/2 optimizer, not its BF16_Optimizer (bf16 with fp32 gradients at
    // ZeRO 0-1): its contiguous gradient bucket(s) in the 16-bit parameters' dtype, a second one
    // with overlap_comm (stage_1_and_2.py, setup_buckets); ZeRO-3's optimizer one, held from its
    // start (stage3.py: the IPG bucket's buffer, whatever overlap_comm)
    if (tr.reduce_bucket_elements > 0 && (t.sharding == 1 || t.sharding == 2) &&
        !takes_bf16_optimizer(tr, t.sharding)) {
        t.grad_bucket_bytes = 2.0 * tr.reduce_bucket_elements * (tr.overlap_grad_reduce ? 2 : 1);
    } else if (tr.reduce_bucket_elements > 0 && t.sharding >= 3) {
        t.grad_bucket_bytes = 2.0 * tr.reduce_bucket_elements;
    }
    t.activations_per_layer = activation_bytes_per_layer(m, tr, p);
    if (p.recompute == Recompute::full) {
        // recomputing a layer rebuilds its activations
        DesignPoint none = p;
        none.recompute = Recompute::none;
        t.recompute_temporary = activation_bytes_per_layer(m, tr, none);
    } else if (op_sac(tr, p)) {
        t.recompute_temporary =
            op_sac_rebuilt_bytes_per_token(m, p) * p.microbatch * double(m.seq) / p.cp;
    } else if (p.recompute == Recompute::selective) {
        // one recomputed module's activations at a time, rebuilt just before its backward:
        // the largest module's
        const TrainingSpec::RecomputeModules& rm = tr.recompute_modules;
        TrainingSpec nothing = tr;
        nothing.recompute_modules = TrainingSpec::RecomputeModules{.core_attn = false};
        const double kept_all = activation_bytes_per_layer(m, nothing, p);
        const auto one = [&](bool TrainingSpec::RecomputeModules::*module) {
            if (!(rm.*module)) return 0.0;
            TrainingSpec only = nothing;
            only.recompute_modules.*module = true;
            return kept_all - activation_bytes_per_layer(m, only, p);
        };
        using R = TrainingSpec::RecomputeModules;
        for (bool R::*module : {&R::core_attn, &R::moe_act, &R::layernorm, &R::mla_up_proj, &R::mlp,
                                &R::moe, &R::shared_experts}) {
            t.recompute_temporary = std::max(t.recompute_temporary, one(module));
        }
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
    const double params = (layers * (terms.layer_params - terms.expert_params) +
                           word_embeddings * terms.embedding_params) /
                          t;
    const double weights = (layers * (terms.layer_weight_bytes - terms.expert_weight_bytes) +
                            word_embeddings * kWeightBytesPerParam * terms.embedding_params) /
                           t;
    // MoE: the routed experts over etp x ep, their ZeRO shards over the expert-DP group
    const double expert_ranks = double(p.ep) * p.etp;
    const double edp = std::max(1, p.edp());
    const double expert_params = layers * terms.expert_params / expert_ranks;
    const double expert_weights = layers * terms.expert_weight_bytes / expert_ranks;
    const int z = terms.sharding;
    mem.weights_bytes = weights / (z >= 3 ? shards : 1.0) + expert_weights / (z >= 3 ? edp : 1.0);
    mem.grads_bytes = terms.grad_bytes_per_param *
                      (params / (z >= 2 ? shards : 1.0) + expert_params / (z >= 2 ? edp : 1.0));
    mem.optimizer_bytes = terms.optimizer_bytes_per_param *
                          (params / (z >= 1 ? shards : 1.0) + expert_params / (z >= 1 ? edp : 1.0));

    mem.activations_bytes = terms.activations_per_layer * layers *
                            inflight_microbatches(p.pp, p.interleave, microbatches, stage);

    double temporary = terms.recompute_temporary + terms.grad_bucket_bytes;
    if (last) {
        // the logits and their gradient (vocab-parallel over t): fp32 under amp, bf16 if pure
        temporary += 2.0 * terms.logit_bytes * p.microbatch * double(m.seq) / p.cp * m.vocab / t;
    }
    if (z >= 3) {
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
    // MoE: the expert-parallel, expert-TP and expert-DP groups
    if (p.ep > 1) ++groups;
    if (p.etp > 1) ++groups;
    if ((p.ep > 1 || p.etp > 1) && p.edp() > 1) ++groups;
    return groups;
}

double reserved_bytes(const MemoryReserveSpec& reserve, const DesignPoint& p) {
    return reserve.cuda_context_bytes + reserve.workspace_bytes +
           reserve.nccl_bytes_per_communicator * nccl_communicators(p);
}

double model_state_bytes_average(const ModelSpec& m, const TrainingSpec& tr, const DesignPoint& p) {
    const double params = total_params(m) / (double(p.tp) * p.pp);
    const double d = double(p.dp) * p.cp;
    const int z = sharding_stage(tr, p);
    return kWeightBytesPerParam * params / (z >= 3 ? d : 1.0) +
           grad_bytes_per_param(tr) * params / (z >= 2 ? d : 1.0) +
           optimizer_bytes_per_param(tr) * params / (z >= 1 ? d : 1.0);
}

}  // namespace prism
