// The deterministic step's cost against the number of microbatches (issue: a point with 1,024
// microbatches must cost at most twice one with 16): GPT-3 175B, tp 8, pp 32, dp 1 on 256
// A100s, microbatch 1, global batch = the microbatches (16 .. 1024). One core.
//  * BM_DeterministicStep/m: the whole deterministic evaluation (kernel times, memory, the
//    schedule's makespan through PeriodicPipeline), as a sweep runs it;
//  * BM_PipelineMakespan/m: the schedule alone (PeriodicPipeline::makespan, per-class durations);
//  * BM_PipelineMakespanOpByOp/m: the same makespan op by op (FlatPipeline, per-op durations):
//    what the deterministic step cost before, for comparison.
// Counter `skipped`: the steady rounds PeriodicPipeline skipped.
//
//   build/bench/pipeline_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "explorer/design_space.hpp"
#include "io/experiment_loader.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/step_profile.hpp"
#include "src/timing/flat_pipeline.hpp"
#include "src/timing/periodic_pipeline.hpp"

namespace {

prism::Experiment experiment(int microbatches) {
    return prism::io::parse_experiment(R"(
[experiment]
name = "bench-pipeline"

[model]
preset = "gpt3-175b"

[training]
global_batch = )" + std::to_string(microbatches) +
                                           R"(

[hardware.a100]
preset = "a100-80gb"

[defaults]
tp = 8
pp = 32
dp = 1
microbatch = 1
sequence_parallel = true
recompute = "selective"
)",
                                       "bench.toml");
}

prism::DesignPoint the_point(const prism::Experiment& e) {
    const prism::explorer::DesignSpace space(e);
    return space.decode(0).point;
}

void BM_DeterministicStep(benchmark::State& state) {
    const auto e = experiment(static_cast<int>(state.range(0)));
    const auto point = the_point(e);
    for (auto _ : state) benchmark::DoNotOptimize(prism::evaluate_deterministic(e, point));
    state.counters["skipped"] =
        static_cast<double>(prism::timing::PeriodicPipeline::last_skipped_rounds());
}

/// Per-class durations of the point's schedule.
struct Schedule {
    prism::StepProfile profile;
    std::shared_ptr<const prism::timing::PeriodicPipeline> pipe;
    std::vector<double> op_s;
};

Schedule schedule(int microbatches) {
    const auto e = experiment(microbatches);
    Schedule s;
    s.profile = prism::evaluate_deterministic(e, the_point(e)).profile;
    const auto& p = s.profile;
    s.pipe = prism::timing::cached_periodic_pipeline({p.stages, p.chunks, p.microbatches});
    s.op_s.resize(static_cast<size_t>(s.pipe->classes()));
    for (int st = 0; st < p.stages; ++st) {
        for (int c = 0; c < p.chunks; ++c) {
            s.op_s[s.pipe->class_of(st, c, false)] = p.chunk_forward_s(st, c);
            s.op_s[s.pipe->class_of(st, c, true)] = p.chunk_backward_s(st, c);
        }
    }
    return s;
}

void BM_PipelineMakespan(benchmark::State& state) {
    const auto s = schedule(static_cast<int>(state.range(0)));
    for (auto _ : state) {
        benchmark::DoNotOptimize(s.pipe->makespan(s.op_s.data(), s.profile.p2p.time_s, 0.0));
    }
    state.counters["skipped"] =
        static_cast<double>(prism::timing::PeriodicPipeline::last_skipped_rounds());
}

void BM_PipelineMakespanOpByOp(benchmark::State& state) {
    const auto s = schedule(static_cast<int>(state.range(0)));
    const auto& p = s.profile;
    const auto flat = prism::timing::cached_flat_pipeline({p.stages, p.chunks, p.microbatches});
    std::vector<double> op(flat->size()), tr(flat->size()), fin(flat->size());
    for (auto _ : state) {
        // as the deterministic step filled them: per op, from the per-class durations
        for (size_t i = 0; i < flat->size(); ++i) {
            const auto& o = flat->ops()[i];
            op[i] = s.op_s[s.pipe->class_of(o.stage, o.chunk, o.backward)];
            tr[i] = p.p2p.time_s;
        }
        benchmark::DoNotOptimize(flat->makespan(op.data(), tr.data(), 0.0, fin.data()));
    }
}

BENCHMARK(BM_DeterministicStep)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PipelineMakespan)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PipelineMakespanOpByOp)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
