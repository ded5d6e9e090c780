#pragma once

// The deterministic step-time and memory model (DESIGN.md section 1): per-layer kernels from a
// roofline, collectives from alpha-beta costs over the links their groups cross, assembled into
// a StepProfile whose pipeline schedule gives the step time.
//
// Per layer and microbatch, on one GPU of a TP x CP group (GEMMs divided by t, sequence by c):
// layer norms, QKV (GQA), attention core, output projection, MLP (gated or not), bias-dropout-
// residual; backward = 2x forward work; recompute selective adds the attention core forward,
// full the whole forward (with its TP communication) to the backward. TP communication is
// exposed: 2 AllReduce per pass, or 2 AllGather + 2 ReduceScatter with sequence parallelism.
// CP exchanges K/V chunks in a ring concurrently with attention. FSDP (ZeRO-3) gathers each
// layer's weights concurrently with the layer's compute and reduce-scatters its gradients in
// the backward. A layer pass lasts at least (kernels x HardwareSpec::kernel_launch_s): the
// host-bound floor of small models.

#include <cstdint>
#include <string>

#include "src/model/memory.hpp"
#include "src/model/spec.hpp"
#include "src/model/step_profile.hpp"

namespace prism {

/// Where the time of one step goes, on pipeline stage 0 (for `prism eval`).
struct Breakdown {
    double layer_forward_s = 0;    ///< one layer, one microbatch (incl. its exposed comm)
    double layer_backward_s = 0;   ///< incl. recompute
    double compute_s = 0;          ///< busy compute of stage 0 over the step, comm excluded
    double tp_comm_exposed_s = 0;  ///< over the step, stage 0
    double cp_comm_exposed_s = 0;
    double pp_comm_s = 0;          ///< P2P transfers of stage 0 (send + receive, not all exposed)
    double dp_comm_exposed_s = 0;  ///< DP sync not hidden behind backward (+ FSDP exposed)
    double bubble_s = 0;           ///< pipeline idle time of stage 0
    double optimizer_s = 0;
    double host_bound_s = 0;  ///< stretch of layer passes by the kernel-launch floor
    MemoryBreakdown memory;
};

struct DeterministicResult {
    bool feasible = true;
    std::string reason;  ///< why infeasible, e.g. "memory 91.2 GiB > 80.0 GiB capacity"
    StepProfile profile;
    double step_time_s = 0;              ///< deterministic_step_time(profile)
    double megatron_flops_per_step = 0;  ///< 96 B s L h^2 (1 + s/6h + V/16Lh)
    double model_flops_per_step = 0;     ///< exact per-op count, 3 x forward
    double tokens_per_step = 0;
    MemoryBreakdown memory;  ///< per GPU, pipeline stage 0
    Breakdown breakdown;
};

/// Evaluates `point` of `experiment` without variability. The point is assumed to have passed
/// filter_reason(); throws ModelError for anything else impossible (no hardware, zero sizes).
DeterministicResult evaluate_deterministic(const Experiment& experiment, const DesignPoint& point);

/// Aligned two-column text table of a result's breakdown (times in ms, memory in GiB).
std::string format_breakdown(const DeterministicResult& result);

}  // namespace prism
