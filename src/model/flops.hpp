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
struct LayerFlops {
    double qkv = 0;         ///< 2 b s h (h + 2 h g / a)   (GQA: g KV heads)
    double attention = 0;   ///< 4 b s^2 h                 (QK^T and scores x V)
    double projection = 0;  ///< 2 b s h^2
    double mlp = 0;         ///< 2 b s h f x 3 (gated) or x 2
    double total() const { return qkv + attention + projection + mlp; }
};

LayerFlops layer_forward_flops(const ModelSpec& model, int microbatch);

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
/// 3 x forward.
double hardware_flops_per_step(const ModelSpec& model, const TrainingSpec& training,
                               Recompute recompute, std::int64_t global_batch_seqs);

/// The weight matrices of one layer (QKV, output projection, MLP), without biases and norms.
double layer_matrix_params(const ModelSpec& model);

/// Parameters of one transformer layer: attention h(h + 2 h_kv) + h^2 with biases, MLP
/// h f (x3 gated, x2 not) with biases, two layer norms. 12 h^2 + 13 h for MHA and f = 4h.
double layer_params(const ModelSpec& model);
/// Word-embedding parameters V h (the output layer has as many, tied or not).
double embedding_params(const ModelSpec& model);
/// Whole model: L layer_params + V h, + V h more for an untied output layer.
double total_params(const ModelSpec& model);

}  // namespace prism
