#pragma once

// Memory per GPU (DESIGN.md section 1, "Memory per GPU").
// Model state: Megatron-LM's mixed-precision Adam keeps bf16 weights (2 bytes/param), an fp32
// gradient buffer (4) and fp32 master weights + Adam m + v (12): 18 bytes/param (Megatron-LM
// docs, distributed optimizer table; Korthikanti et al. 2022 Figure 1 is 18 x params / (t p)).
// ZeRO stage 1 (Megatron's distributed optimizer) shards the optimizer over d c, 2 also the
// gradients, 3 also the weights: context-parallel ranks hold the same weights, so Megatron-Core
// builds its data-parallel groups "with context parallelism" (d c ranks) for the optimizer
// shards and the gradient reduction (parallel_state.get_data_parallel_group(
// with_context_parallel=True)).
// Per stage: the first holds the word embedding, the last (pp > 1) the output layer (a tied
// copy of the embedding or its own weights: V h either way) and the fp32 logits.
// Activations: Korthikanti et al. 2022, section 4: per layer s b h (34 + 5 a s / h) bytes without
// parallelism, split as 10 s b h replicated over TP + (24 s b h + 5 a s^2 b) divided by t, all of
// it divided by t with sequence parallelism; selective recompute drops the 5 a s^2 b score
// term, full recompute keeps only the layer input (2 s b h). Generalized here to GQA (K, V of
// width h g / a) and gated MLPs (three f-wide tensors instead of two).

#include <vector>

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

/// Microbatches (in layer-equivalents of one stage) whose activations `stage` holds at its peak
/// under Megatron's schedule: the warm-up forwards plus one. 1F1B: min(m, p - stage).
/// Interleaved: min(m v, 2 (p - stage - 1) + (v - 1) p + 1) chunks (all m v when m = p, which
/// Megatron runs as all warm-up), / v; at stage 0 and m > p that is p (1 + (p - 1) / (p v)),
/// Korthikanti et al. 2022, section 4.2.3.
double inflight_microbatches(int pp, int interleave, int microbatches, int stage = 0);

/// Memory of the GPU of pipeline stage `stage` holding `layers` transformer layers, for
/// `microbatches` per replica per step.
MemoryBreakdown memory_of_stage(const ModelSpec& model, const TrainingSpec& training,
                                const DesignPoint& point, int microbatches, int stage, int layers);

/// memory_of_stage of every stage, stage s holding stage_layers[s] layers.
std::vector<MemoryBreakdown> memory_of_stages(const ModelSpec& model, const TrainingSpec& training,
                                              const DesignPoint& point, int microbatches,
                                              const std::vector<int>& stage_layers);

/// Memory of the first pipeline stage's GPU on an even split (L / p layers).
MemoryBreakdown memory_per_gpu(const ModelSpec& model, const TrainingSpec& training,
                               const DesignPoint& point, int microbatches);

/// Model state (weights + grads + optimizer) averaged over the t p model-parallel GPUs:
/// 18 x total params / (t p), ZeRO-sharded over d c. Korthikanti et al.'s Figure 1 convention.
double model_state_bytes_average(const ModelSpec& model, const DesignPoint& point);

}  // namespace prism
