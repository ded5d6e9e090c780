#pragma once

// Hand-built step profiles and variability specs for the stochastic tests (independent of the
// deterministic model, which has its own tests).

#include "src/model/spec.hpp"
#include "src/model/step_profile.hpp"

namespace prism::testing {

struct ProfileShape {
    int stages = 1, chunks = 1, microbatches = 1, layers_per_chunk = 4;
    int dp = 1, tp = 8, cp = 1;
    bool fsdp = false;
    double gemm_s = 1e-3;       ///< per layer forward GEMM time
    double comm_s = 2e-4;       ///< per layer forward TP all-reduce
    double fsdp_comm_s = 3e-4;  ///< per layer FSDP all-gather / reduce-scatter
    /// FSDP with the gather (scatter) on its own stream: each layer's compute is one segment
    /// concurrent with its collective, so a comm-bound layer (fsdp_comm_s larger than the
    /// compute) leaves the stage with no compute on its critical path.
    bool fsdp_overlap = false;
};

/// A shape of tp x pp x dp with `microbatches` per replica (FSDP if `fsdp`), the rest default.
inline ProfileShape pipeline_shape(int tp, int pp, int dp, int microbatches, bool fsdp = false) {
    ProfileShape s;
    s.tp = tp;
    s.stages = pp;
    s.dp = dp;
    s.microbatches = microbatches;
    s.fsdp = fsdp;
    return s;
}

inline Op op(KernelClass c, double t, int sync = 1, LinkLevel link = LinkLevel::local) {
    return Op{c, t, sync, link};
}

inline StepProfile make_profile(const ProfileShape& s) {
    StepProfile p;
    p.stages = s.stages;
    p.chunks = s.chunks;
    p.microbatches = s.microbatches;
    p.layers_per_chunk = s.layers_per_chunk;
    p.dp = s.dp;
    p.tp = s.tp;
    p.cp = s.cp;
    p.dp_lockstep = s.fsdp;
    const int n = s.tp * s.cp;
    auto& f = p.layer_forward;
    auto& b = p.layer_backward;
    if (s.fsdp && s.fsdp_overlap) {
        f.push_back({{op(KernelClass::allgather, s.fsdp_comm_s, 1, LinkLevel::nic),
                      op(KernelClass::gemm, 1.4 * s.gemm_s, n)}});
        if (s.tp > 1) f.push_back({{op(KernelClass::allreduce, s.comm_s, 1, LinkLevel::nvlink)}});
        b.push_back({{op(KernelClass::reducescatter, 2 * s.fsdp_comm_s, 1, LinkLevel::nic),
                      op(KernelClass::gemm, 2.8 * s.gemm_s, n)}});
        if (s.tp > 1) b.push_back({{op(KernelClass::allreduce, s.comm_s, 1, LinkLevel::nvlink)}});
    } else {
        if (s.fsdp) f.push_back({{op(KernelClass::allgather, s.fsdp_comm_s, 1, LinkLevel::nic)}});
        f.push_back({{op(KernelClass::gemm, 0.4 * s.gemm_s, n)}});
        f.push_back({{op(KernelClass::attention, 0.3 * s.gemm_s, n)}});
        f.push_back({{op(KernelClass::gemm, 0.6 * s.gemm_s, n)}});
        f.push_back({{op(KernelClass::elementwise, 0.1 * s.gemm_s, n)}});
        if (s.tp > 1) f.push_back({{op(KernelClass::allreduce, s.comm_s, 1, LinkLevel::nvlink)}});
        if (s.fsdp) b.push_back({{op(KernelClass::allgather, s.fsdp_comm_s, 1, LinkLevel::nic)}});
        b.push_back({{op(KernelClass::gemm, 0.8 * s.gemm_s, n)}});
        b.push_back({{op(KernelClass::attention, 0.6 * s.gemm_s, n)}});
        b.push_back({{op(KernelClass::gemm, 1.2 * s.gemm_s, n)}});
        b.push_back({{op(KernelClass::elementwise, 0.2 * s.gemm_s, n)}});
        if (s.tp > 1) b.push_back({{op(KernelClass::allreduce, s.comm_s, 1, LinkLevel::nvlink)}});
        if (s.fsdp) {
            b.push_back({{op(KernelClass::reducescatter, s.fsdp_comm_s, 1, LinkLevel::nic)}});
        }
    }
    p.embedding_forward = {{{op(KernelClass::elementwise, 0.2 * s.gemm_s, n)}}};
    p.embedding_backward = {{{op(KernelClass::elementwise, 0.2 * s.gemm_s, n)}}};
    p.head_forward = {{{op(KernelClass::gemm, 0.5 * s.gemm_s, n)}}};
    p.head_backward = {{{op(KernelClass::gemm, 1.0 * s.gemm_s, n)}}};
    p.p2p = op(KernelClass::p2p, 0.1 * s.gemm_s, 1, LinkLevel::nic);
    if (!s.fsdp && s.dp > 1) {
        p.dp_sync = {{{op(KernelClass::allreduce, 2.0 * s.gemm_s * s.layers_per_chunk * s.chunks, 1,
                          LinkLevel::nic)}}};
        p.dp_overlap_s = 0.5 * s.gemm_s * s.layers_per_chunk * s.chunks;
    }
    p.optimizer = {{{op(KernelClass::optimizer, 0.5 * s.gemm_s, n)}}};
    p.dataloader = {{{op(KernelClass::dataloader, 0.05 * s.gemm_s, 1)}}};
    return p;
}

/// The design point of shape `s` (tp, pp, dp) with the given placement.
inline DesignPoint design_point(const ProfileShape& s,
                                PlacementKind placement = PlacementKind::ordered) {
    DesignPoint point;
    point.tp = s.tp;
    point.pp = s.stages;
    point.dp = s.dp;
    point.placement.kind = placement;
    return point;
}

inline DistributionSpec dist(DistKind k, double cv, double mean = 1.0) {
    DistributionSpec d;
    d.kind = k;
    d.cv = cv;
    d.mean = mean;
    return d;
}

/// The PRISM-paper-like preset (configs/presets/variability/prism-paper.toml) in code.
inline VariabilitySpec prism_like(double slow_probability = 0.0) {
    VariabilitySpec v;
    auto set = [&](KernelClass c, DistKind k, double cv) {
        v.transient[static_cast<int>(c)] = dist(k, cv);
    };
    set(KernelClass::gemm, DistKind::lognormal, 0.05);
    set(KernelClass::attention, DistKind::lognormal, 0.05);
    set(KernelClass::elementwise, DistKind::lognormal, 0.03);
    set(KernelClass::allreduce, DistKind::lognormal, 0.15);
    set(KernelClass::allgather, DistKind::lognormal, 0.15);
    set(KernelClass::reducescatter, DistKind::lognormal, 0.15);
    set(KernelClass::p2p, DistKind::lognormal, 0.10);
    set(KernelClass::alltoall, DistKind::lognormal, 0.15);
    set(KernelClass::optimizer, DistKind::lognormal, 0.02);
    set(KernelClass::dataloader, DistKind::lognormal, 0.10);
    v.comm_regime = dist(DistKind::lognormal, 0.10);
    v.persistent.spatial = dist(DistKind::normal, 0.03);
    v.persistent.slow_probability = slow_probability;
    v.persistent.slow_factor = 1.5;
    v.persistent.slow_per_node = true;
    return v;
}

inline HardwareSpec test_hardware() {
    HardwareSpec h;
    h.name = "test";
    h.gpus_per_node = 8;
    return h;
}

}  // namespace prism::testing
