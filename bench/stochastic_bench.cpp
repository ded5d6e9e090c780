// Speed of the step-time distribution on 405B-class points on 16k GPUs (llama3-405b shape with
// L = 128 so that pp = 16 divides it; tp 8, pp 16, dp 128, microbatch 1, global batch 2048
// sequences: 16 microbatches per replica), PRISM-paper variability (preset numbers in code).
//   ./stochastic_bench --benchmark_filter=405B
// items_per_second = design points per second on one core. The *Sweep variants cycle through
// 40 distinct configurations (splits, microbatch, recompute, interleaving) of that model.

#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "src/model/deterministic.hpp"
#include "src/stochastic/step_distribution.hpp"

namespace {

using namespace prism;

DistributionSpec lognormal(double cv, double mean = 1.0) {
    DistributionSpec d;
    d.kind = DistKind::lognormal;
    d.cv = cv;
    d.mean = mean;
    return d;
}

/// configs/presets/variability/prism-paper.toml, in code
VariabilitySpec prism_paper(bool heavy_tail) {
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

void run(benchmark::State& state, Method method, int samples, bool heavy_tail) {
    static const Point405B p;
    const auto v = prism_paper(heavy_tail);
    EvaluationSpec eval;
    eval.method = method;
    eval.samples = samples;
    std::uint64_t index = 0;
    double p99 = 0;
    for (auto _ : state) {
        const auto d = step_distribution(p.profile, p.point, p.experiment.hardware[0],
                                         p.experiment.cluster, v, eval, 2026, index++);
        p99 = d.p99_s;
        benchmark::DoNotOptimize(d.p99_s);
    }
    state.SetItemsProcessed(state.iterations());
    state.counters["p99_s"] = p99;
    state.counters["det_s"] = deterministic_step_time(p.profile);
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

void run_sweep(benchmark::State& state, Method method, int samples) {
    static const Sweep405B sweep;
    const auto v = prism_paper(false);
    EvaluationSpec eval;
    eval.method = method;
    eval.samples = samples;
    std::uint64_t index = 0;
    for (auto _ : state) {
        const size_t i = index % sweep.points.size();
        const auto d =
            step_distribution(sweep.profiles[i], sweep.points[i], sweep.base.experiment.hardware[0],
                              sweep.base.experiment.cluster, v, eval, 2026, index);
        ++index;
        benchmark::DoNotOptimize(d.p99_s);
    }
    state.SetItemsProcessed(state.iterations());
    state.counters["points"] = static_cast<double>(sweep.points.size());
}

void BM_Analytic405B(benchmark::State& state) { run(state, Method::analytic, 0, false); }
void BM_Analytic405BSweep(benchmark::State& state) { run_sweep(state, Method::analytic, 0); }
void BM_MonteCarlo1000_405BSweep(benchmark::State& state) {
    run_sweep(state, Method::montecarlo, 1000);
}
void BM_Analytic405BHeavyTail(benchmark::State& state) { run(state, Method::analytic, 0, true); }
void BM_MonteCarlo1000_405B(benchmark::State& state) {
    run(state, Method::montecarlo, 1000, false);
}

BENCHMARK(BM_Analytic405B)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_Analytic405BSweep)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_Analytic405BHeavyTail)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_MonteCarlo1000_405B)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_MonteCarlo1000_405BSweep)->Unit(benchmark::kMillisecond)->Iterations(26);

/// One configuration of the sweep (state.range(0)), Monte Carlo with 1,000 samples, for
/// profiling: ./stochastic_bench --benchmark_filter=SweepPointMc
void BM_SweepPointMc1000_405B(benchmark::State& state) {
    static const Sweep405B sweep;
    const auto v = prism_paper(false);
    EvaluationSpec eval;
    eval.method = Method::montecarlo;
    eval.samples = 1000;
    const auto i = static_cast<size_t>(state.range(0));
    std::uint64_t index = 0;
    for (auto _ : state) {
        const auto d =
            step_distribution(sweep.profiles[i], sweep.points[i], sweep.base.experiment.hardware[0],
                              sweep.base.experiment.cluster, v, eval, 2026, index++);
        benchmark::DoNotOptimize(d.p99_s);
    }
    const auto& pt = sweep.points[i];
    state.SetLabel("tp" + std::to_string(pt.tp) + " pp" + std::to_string(pt.pp) + " dp" +
                   std::to_string(pt.dp) + " mb" + std::to_string(pt.microbatch) + " v" +
                   std::to_string(pt.interleave) +
                   (pt.recompute == Recompute::full ? " full" : " sel"));
}
BENCHMARK(BM_SweepPointMc1000_405B)
    ->DenseRange(0, 25)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
