#pragma once

// Memory per GPU (DESIGN.md section 1, "Memory per GPU").
// Model state: Megatron-LM's mixed-precision Adam keeps bf16 weights (2 bytes/param), an fp32
// gradient buffer (4) and fp32 master weights + Adam m + v (12): 18 bytes/param (Megatron-LM
// docs, distributed optimizer table; Korthikanti et al. 2022 Figure 1 is 18 x params / (t p)).
// ZeRO stage 1 shards the optimizer over d, 2 also the gradients, 3 also the weights.
// Activations: Korthikanti et al. 2022, section 4: per layer s b h (34 + 5 a s / h) bytes without
// parallelism, split as 10 s b h replicated over TP + (24 s b h + 5 a s^2 b) divided by t, all of
// it divided by t with sequence parallelism; selective recompute drops the 5 a s^2 b score
// term, full recompute keeps only the layer input (2 s b h). Generalized here to GQA (K, V of
// width h g / a) and gated MLPs (three f-wide tensors instead of two).

#include "src/model/spec.hpp"

namespace prism {

inline constexpr double kWeightBytesPerParam = 2;
inline constexpr double kGradBytesPerParam = 4;
inline constexpr double kOptimizerBytesPerParam = 12;

struct MemoryBreakdown {
    double weights_bytes = 0;
    double grads_bytes = 0;
    double optimizer_bytes = 0;
    double activations_bytes = 0;  ///< stored for backward, all microbatches in flight
    double temporary_bytes = 0;    ///< working buffers: recompute, logits, FSDP gathers
    double total_bytes() const {
        return weights_bytes + grads_bytes + optimizer_bytes + activations_bytes + temporary_bytes;
    }
};

/// Activation bytes one layer stores for backward, one microbatch, one GPU.
double activation_bytes_per_layer(const ModelSpec& model, const TrainingSpec& training,
                                  const DesignPoint& point);

/// Microbatches (in layer-equivalents of one stage) whose activations stage 0 holds under
/// 1F1B: min(m, p), times (1 + (p - 1) / (p v)) when interleaved (Korthikanti et al. 2022,
/// section 4.2.3).
double inflight_microbatches(int pp, int interleave, int microbatches);

/// Memory of the first pipeline stage's GPU (it holds the embedding and the most activations),
/// for `microbatches` per replica per step.
MemoryBreakdown memory_per_gpu(const ModelSpec& model, const TrainingSpec& training,
                               const DesignPoint& point, int microbatches);

/// Model state (weights + grads + optimizer) averaged over the t p model-parallel GPUs:
/// 18 x total params / (t p), ZeRO-sharded. Korthikanti et al.'s Figure 1 convention.
double model_state_bytes_average(const ModelSpec& model, const DesignPoint& point);

}  // namespace prism
