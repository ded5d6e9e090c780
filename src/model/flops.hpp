#pragma once

// FLOP counts of a decoder-only transformer (DESIGN.md section 1). A multiply-add is 2 FLOPs.
// Attention scores and their product with V count the full s x s square (4 b s^2 h): Megatron's
// count, and what the unfused (non-flash) kernels of the published A100 runs execute. A causal
// flash kernel skips the upper half; the time model applies that 0.5 itself, the counts here
// never do.

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

/// Model FLOPs per step from the per-op count (GQA, gated MLP, logits): 3 x forward
/// (backward = 2 x forward), no recomputation. The numerator of MFU.
double model_flops_per_step(const ModelSpec& model, std::int64_t global_batch_seqs);

/// Parameters of one transformer layer: attention h(h + 2 h_kv) + h^2 with biases, MLP
/// h f (x3 gated, x2 not) with biases, two layer norms. 12 h^2 + 13 h for MHA and f = 4h.
double layer_params(const ModelSpec& model);
/// Word-embedding parameters V h (the output layer has as many, tied or not).
double embedding_params(const ModelSpec& model);
/// Whole model: L layer_params + V h, + V h more for an untied output layer.
double total_params(const ModelSpec& model);

}  // namespace prism
