#pragma once

// The deterministic step-time and memory model (DESIGN.md section 1): per-layer kernels from a
// roofline, collectives from alpha-beta costs over the links their groups cross, assembled into
// a StepProfile whose pipeline schedule gives the step time.
//
// Per layer and microbatch, on one GPU of a TP x CP group (GEMMs divided by t, sequence by c):
// layer norms, QKV (GQA), attention core, output projection, MLP (gated or not), bias-dropout-
// residual; backward = 2x forward work; recompute selective adds the attention core forward,
// full the whole forward (with its TP communication) to the backward. TP communication is
// exposed (2 AllReduce per pass, or 2 AllGather + 2 ReduceScatter with sequence parallelism)
// unless --tp-comm-overlap runs it beside the GEMMs (detail/layer_passes.hpp); the backward's
// column-parallel collectives run beside the other gradient GEMM. CP exchanges K/V chunks in a
// ring concurrently with attention. FSDP (ZeRO-3) gathers each layer's weights concurrently with
// the layer's compute (prefetch) and reduce-scatters its gradients in the backward. A layer pass
// lasts at least (kernels x HardwareSpec::kernel_launch_s): the host-bound floor of small models.
// Data parallelism with CP: Megatron-Core reduces gradients and shards the distributed optimizer
// over the d c ranks that hold the same weights.

#include <cstdint>
#include <string>
#include <vector>

#include "src/model/memory.hpp"
#include "src/model/spec.hpp"
#include "src/model/step_profile.hpp"

namespace prism {

/// Where the time of one step goes on one pipeline stage, and the memory of every stage (for
/// `prism eval`). The time lines from compute_s to optimizer_s add up to the step time.
struct Breakdown {
    int stage = 0;                ///< the stage the time lines describe: the busiest one
    double layer_forward_s = 0;   ///< one layer, one microbatch (incl. its exposed comm)
    double layer_backward_s = 0;  ///< incl. recompute
    // ---- lines that add up to the step time ----
    double compute_s = 0;            ///< transformer layers' busy compute on `stage`
    double tp_comm_exposed_s = 0;    ///< in the layers of `stage`, over the step
    double cp_comm_exposed_s = 0;    ///< likewise
    double fsdp_comm_exposed_s = 0;  ///< FSDP / ZeRO-3 collectives not hidden (layers, tables)
    double ep_comm_exposed_s = 0;    ///< MoE dispatch / combine (and expert TP) not hidden
    double pp_comm_exposed_s = 0;    ///< pipeline transfers on the compute stream (blocking_p2p)
    double host_bound_s = 0;         ///< stretch of layer passes by the kernel-launch floor
    double embedding_s = 0;          ///< word embedding forward + backward (first stage)
    double head_s = 0;    ///< LM head and loss: final norm, logits GEMM, cross entropy (last stage)
    double bubble_s = 0;  ///< idle time of `stage` in the pipeline (fill, drain, waits, transfers)
    double dp_sync_exposed_s = 0;  ///< gradient reduction / parameter gather not hidden
    double optimizer_s = 0;
    // ---- not part of the sum ----
    double pp_comm_s =
        0;  ///< P2P transfers of a stage on their own stream (mostly hidden; 0 with blocking_p2p)
    double dp_comm_exposed_s = 0;  ///< fsdp_comm_exposed_s + dp_sync_exposed_s
    // MoE lines of `stage` over the step (docs/moe.md): router and experts are parts of
    // compute_s; dispatch and combine are the communication before overlap, of which
    // ep_comm_exposed_s stays exposed
    double moe_router_s = 0;
    double moe_expert_compute_s = 0;
    double moe_dispatch_s = 0;
    double moe_combine_s = 0;
    std::vector<MemoryBreakdown> stage_memory;  ///< per GPU of every pipeline stage
    int memory_stage = 0;                       ///< the stage with the most memory
    MemoryBreakdown memory;                     ///< stage_memory[memory_stage]

    /// Sum of the lines that add up to the step time.
    double lines_sum_s() const;
};

struct DeterministicResult {
    bool feasible = true;
    std::string reason;  ///< why infeasible, e.g. "memory 91.2 GiB > 80.0 GiB capacity"
    StepProfile profile;
    double step_time_s = 0;              ///< deterministic_step_time(profile)
    double megatron_flops_per_step = 0;  ///< 96 B s L h^2 (1 + s/6h + V/16Lh)
    double model_flops_per_step = 0;     ///< the MFU numerator: 3 x forward, causal attention
    double hardware_flops_per_step = 0;  ///< executed, recomputation included
    double tokens_per_step = 0;
    bool moe = false;        ///< an MoE model (the breakdown shows its lines)
    MemoryBreakdown memory;  ///< per GPU of the most loaded pipeline stage (decides feasibility)
    Breakdown breakdown;
};

/// Evaluates `point` of `experiment` without variability. The point is assumed to have passed
/// filter_reason(); throws ModelError for anything else impossible (no hardware, zero sizes).
DeterministicResult evaluate_deterministic(const Experiment& experiment, const DesignPoint& point);

/// Aligned two-column text table of a result's breakdown (times in ms, memory in GiB).
std::string format_breakdown(const DeterministicResult& result);

}  // namespace prism
