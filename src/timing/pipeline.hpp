#pragma once

// Megatron-LM's pipeline schedules (1F1B, and interleaved 1F1B with v model chunks per rank) as
// per-stage op orders, and their evaluation as a timing DAG: an op starts when its stage is free
// and its input has arrived (finish of the producing op + transfer time).
// Source: megatron/core/pipeline_parallel/schedules.py
// (forward_backward_pipelining_without_interleaving / _with_interleaving).

#include <functional>
#include <vector>

namespace prism::timing {

struct PipeOp {
    int chunk = 0;       ///< model chunk on this stage (0..v-1)
    int microbatch = 0;  ///< 0..m-1
    bool backward = false;
};

struct PipelineShape {
    int stages = 1;        ///< p
    int chunks = 1;        ///< v
    int microbatches = 1;  ///< m; with v > 1 it must be a multiple of p (Megatron's rule)
};

/// Per-stage op order. Throws ModelError when the shape is invalid.
std::vector<std::vector<PipeOp>> build_schedule(const PipelineShape& shape);

/// Forward ops (virtual microbatches with v > 1) that `stage` runs before its first backward in
/// build_schedule's order, less one: the warm-up; then forward and backward alternate, then the
/// remaining backwards drain. The shape must be valid.
int warmup_forwards(const PipelineShape& shape, int stage);

/// Durations of a schedule's ops; called once per op. `virtual_stage` = chunk * p + stage.
struct PipelineDurations {
    std::function<double(int stage, const PipeOp& op)> op_s;
    /// transfer from virtual stage k to k+1 (forward) or k+1 to k (backward) of one microbatch
    std::function<double(int from_stage, int to_stage, const PipeOp& op)> transfer_s;
};

/// Finish time of the last op on each stage, starting at `start_s[stage]` (all 0 if empty).
std::vector<double> evaluate_pipeline(const PipelineShape& shape,
                                      const std::vector<std::vector<PipeOp>>& schedule,
                                      const PipelineDurations& durations,
                                      const std::vector<double>& start_s = {});

/// Bubble fraction of a uniform pipeline without transfers: (p - 1) / (v m) (Narayanan et al.
/// SC'21, section 2.2).
double bubble_fraction(const PipelineShape& shape);

}  // namespace prism::timing
