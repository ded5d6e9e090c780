#pragma once

// FLOP counts of a decoder-only transformer (DESIGN.md section 1). A multiply-add is 2 FLOPs.
// layer_forward_flops counts the attention scores and their product with V over the full s x s
// square (4 b s^2 h): Megatron's count, and what the unfused (non-flash) kernels of the
// published A100 runs execute. A causal flash kernel skips the upper half; the time model
// applies that 0.5 itself. Three step totals answer three questions:
//  - model_flops_per_step: the model's FLOPs, the numerator of MFU (PaLM, Chowdhery et al. 2022,
//    appendix B, with causal attention counted as half the square);
//  - hardware_flops_per_step: what the GPUs execute, recomputation included (the numerator of
//    "hardware FLOPs utilization", ibid.);
//  - megatron_flops_per_step: Megatron's closed form (MHA, 4h MLP, full square, full recompute),
//    to compare with the papers that report it.

#include <cstdint>

#include "src/model/spec.hpp"

namespace prism {

/// Forward FLOPs of one transformer layer for a microbatch of b sequences, whole (unsharded).
/// Standard attention with a d-wide heads (d = hidden / a unless head_dim is given), g KV heads;
/// MLA (DeepSeek-V2/V3) with ranks r_q, r_kv and head dims d_nope, d_rope, d_v.
struct LayerFlops {
    /// standard: 2 b s h (a d + 2 g d); MLA: 2 b s (h r_q + r_q a (d_nope + d_rope) +
    /// h (r_kv + d_rope) + r_kv a (d_nope + d_v)) (h a (d_nope + d_rope) without r_q)
    double qkv = 0;
    double attention = 0;   ///< 4 b s^2 a d; MLA 2 b s^2 a (d_nope + d_rope + d_v)
    double projection = 0;  ///< 2 b s a d h; MLA 2 b s a d_v h
    /// dense layer: 2 b s h f x 3 (gated) or x 2; MoE layer: the shared and the k routed
    /// experts every token passes, 2 b s h f_e x 3 (gated) x (k + shared)
    double mlp = 0;
    double router = 0;  ///< MoE layer: 2 b s h E (the gate's logits)
    double total() const { return qkv + attention + projection + mlp + router; }
};

/// A dense layer (attention and the dense MLP of `ffn`).
LayerFlops layer_forward_flops(const ModelSpec& model, int microbatch);
/// An MoE layer (attention, router, shared and routed experts); a dense layer for dense models.
LayerFlops moe_layer_forward_flops(const ModelSpec& model, int microbatch);
/// Forward FLOPs of all layers of the model for one microbatch: dense layers and MoE layers
/// each counted with their own LayerFlops; `causal_attention` counts half the s x s square.
double layers_forward_flops(const ModelSpec& model, int microbatch, bool causal_attention);

/// Logits GEMM of one microbatch: 2 b s h V.
double logits_forward_flops(const ModelSpec& model, int microbatch);

/// Megatron's count per step (Narayanan et al. SC'21, Eq. 3, which includes the recomputed
/// forward of full activation recomputation): 96 B s L h^2 (1 + s/(6h) + V/(16 L h)).
double megatron_flops_per_step(const ModelSpec& model, std::int64_t global_batch_seqs);

/// Model FLOPs per step, the numerator of MFU: 3 x forward (backward = 2 x forward) of the
/// layers' weight GEMMs as they are (GQA's narrower K and V, the gated MLP's three GEMMs), the
/// logits GEMM, and causal attention (half the s x s square, 2 b s^2 h forward per layer); no
/// recomputation. Per token: 6 (L P_matrix + V h) + 6 L s h, P_matrix = layer_matrix_params.
double model_flops_per_step(const ModelSpec& model, std::int64_t global_batch_seqs);

/// FLOPs the GPUs execute per step, as the time model runs them: the layers' GEMMs 3 x forward;
/// attention forward over the full square (4 b s^2 h), backward 2 x that, or with
/// `training.flash_attention` half the square forward and a backward of 2.5 x the forward
/// (FlashAttention-2 recomputes the scores, Dao 2023, section 3.1.2); recomputation adds the
/// attention core's forward (selective) or the whole layer forward (full); the logits GEMM
/// 3 x forward. With torchtitan's op-level SAC (training.selective_recompute) a selective
/// layer re-runs the wk and w3 GEMMs, and wo unless `wo_output_saved`
/// (op_sac_saves_wo_output: TP with sequence parallelism; docs/torchtitan_sac.md).
double hardware_flops_per_step(const ModelSpec& model, const TrainingSpec& training,
                               Recompute recompute, std::int64_t global_batch_seqs,
                               bool wo_output_saved = false);

/// The weight matrices of one layer (QKV, output projection, MLP), without biases and norms;
/// for an MoE model the mean over its layers (all experts counted).
double layer_matrix_params(const ModelSpec& model);

/// Parameters of one transformer layer: attention h(h + 2 h_kv) + h^2 with biases, MLP
/// h f (x3 gated, x2 not) with biases, two layer norms. 12 h^2 + 13 h for MHA and f = 4h.
/// MLA: its five matrices and the two latent norms, no biases. For an MoE model the mean over
/// its layers of dense_layer_params and moe_layer_params (every expert counted).
double layer_params(const ModelSpec& model);
/// A dense layer's parameters (attention, the dense MLP of `ffn`, norms).
double dense_layer_params(const ModelSpec& model);
/// An MoE layer's parameters: attention, norms, the router (E h), shared and routed experts
/// (E + shared) x h f_e x 3 (gated) or x 2; no biases.
double moe_layer_params(const ModelSpec& model);
/// The routed experts' parameters of the mean layer (sharded over ep x etp): moe_layers x E x
/// h f_e x 3 / L. 0 for dense models.
double layer_expert_params(const ModelSpec& model);
/// Attention block parameters of one layer (projections, their biases or MLA's norms).
double attention_params(const ModelSpec& model);
/// Parameters one token passes through: embedding (and untied output layer), every layer's
/// attention, dense MLP or router + shared + top_k routed experts (the published "active").
double active_params(const ModelSpec& model);
/// Word-embedding parameters V h (the output layer has as many, tied or not).
double embedding_params(const ModelSpec& model);
/// Whole model: L layer_params + V h, + V h more for an untied output layer.
double total_params(const ModelSpec& model);

}  // namespace prism
