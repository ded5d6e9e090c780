#pragma once

// The 405B-class points of the stochastic benchmarks (stochastic_bench) and of the accuracy
// check (accuracy_405b): Llama 3 405B with L = 128 (so that pp = 16 divides it) on 16,384 H100s,
// PRISM-paper variability (configs/presets/variability/prism-paper.toml, in code).

#include <array>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "src/model/deterministic.hpp"
#include "src/stochastic/step_distribution.hpp"

namespace prism::bench {

inline DistributionSpec lognormal(double cv, double mean = 1.0) {
    DistributionSpec d;
    d.kind = DistKind::lognormal;
    d.cv = cv;
    d.mean = mean;
    return d;
}

/// configs/presets/variability/prism-paper.toml, in code
inline VariabilitySpec prism_paper(bool heavy_tail) {
    VariabilitySpec v;
    auto set = [&](KernelClass c, DistributionSpec d) { v.transient[static_cast<int>(c)] = d; };
    DistributionSpec coll = lognormal(0.15);
    if (heavy_tail) {
        coll = DistributionSpec{};
        coll.kind = DistKind::mixture;
        DistributionSpec spike;
        spike.mean = 10.0;
        coll.components = {{0.999, lognormal(0.15, 0.99099)}, {0.001, spike}};
    }
    set(KernelClass::gemm, lognormal(0.04));
    set(KernelClass::attention, lognormal(0.04));
    set(KernelClass::elementwise, lognormal(0.02));
    for (auto c : {KernelClass::allreduce, KernelClass::allgather, KernelClass::reducescatter,
                   KernelClass::alltoall}) {
        set(c, coll);
    }
    set(KernelClass::p2p, lognormal(0.10));
    set(KernelClass::optimizer, lognormal(0.02));
    set(KernelClass::dataloader, lognormal(0.10));
    v.comm_regime = lognormal(0.05);
    v.persistent.spatial.kind = DistKind::normal;
    v.persistent.spatial.cv = 0.03;
    v.persistent.slow_probability = 0.01;
    v.persistent.slow_factor = 1.14;
    return v;
}

struct Point405B {
    Experiment experiment;
    DesignPoint point;
    StepProfile profile;

    Point405B() {
        auto& m = experiment.model;
        m.name = "llama3-405b (L=128)";
        m.layers = 128;
        m.hidden = 16384;
        m.heads = 128;
        m.kv_heads = 8;
        m.ffn = 53248;
        m.gated_mlp = true;
        m.vocab = 128256;
        m.seq = 8192;
        experiment.training.global_batch_seqs = 2048;
        HardwareSpec hw;
        hw.name = "h100";
        hw.gpu.name = "H100 SXM";
        hw.gpu.peak_bf16_flop_per_s = 989e12;
        hw.gpu.hbm_bytes = 80e9;
        hw.gpu.hbm_bytes_per_s = 3.35e12;
        hw.gpus_per_node = 8;
        hw.nvlink_bytes_per_s = 450e9;
        hw.nvlink_latency_s = 3.4e-6;
        hw.nic_bytes_per_s = 50e9;
        hw.nic_latency_s = 9.6e-6;
        experiment.hardware.push_back(hw);
        point.tp = 8;
        point.pp = 16;
        point.dp = 128;
        point.microbatch = 1;
        point.recompute = Recompute::full;
        point.sequence_parallel = true;
        profile = evaluate_deterministic(experiment, point).profile;
    }
};

/// The row label of a sweep point in the measurement tools: "tp8 pp16 dp128 mb1 full v1".
inline std::string label(const DesignPoint& pt) {
    char name[64];
    std::snprintf(name, sizeof name, "tp%d pp%d dp%d mb%d %s v%d", pt.tp, pt.pp, pt.dp,
                  pt.microbatch, pt.recompute == Recompute::full ? "full" : "sel", pt.interleave);
    return name;
}

/// A sweep's worth of distinct 405B-class points on 16,384 GPUs: tp x pp x dp splits,
/// microbatch sizes, recompute and interleaving; each profile differs, so only what a real sweep
/// shares (tabulated laws, schedules, layouts) is reused from one point to the next.
struct Sweep405B {
    Point405B base;
    std::vector<DesignPoint> points;
    std::vector<StepProfile> profiles;

    Sweep405B() {
        const std::array<std::array<int, 3>, 5> splits{
            {{8, 16, 128}, {8, 8, 256}, {8, 32, 64}, {4, 16, 256}, {4, 32, 128}}};
        for (const auto& [tp, pp, dp] : splits) {
            for (const int mb : {1, 2}) {
                for (const auto rc : {Recompute::full, Recompute::selective}) {
                    for (const int v : {1, 2}) {
                        DesignPoint pt = base.point;
                        pt.tp = tp;
                        pt.pp = pp;
                        pt.dp = dp;
                        pt.microbatch = mb;
                        pt.recompute = rc;
                        pt.interleave = v;
                        try {
                            profiles.push_back(evaluate_deterministic(base.experiment, pt).profile);
                            points.push_back(pt);
                        } catch (const std::exception&) {
                            // a split the schedule rejects (m not a multiple of p when v > 1)
                        }
                    }
                }
            }
        }
    }
};

}  // namespace prism::bench
