// Points/s of the whole per-point evaluation (deterministic model + step-time distribution +
// run model) on Llama-3-405B-class points on 16,384 H100s, as a sweep evaluates them: the
// analytic and the Monte Carlo (1,000 samples) evaluators, with and without the sensitivity
// ranking (10 more distributions per point). One core; points/s = items_per_second.
// The *CoTuning variants sweep the same points over 4 learning rates x 2 checkpoint intervals
// through the sweep's ChunkEvaluator: the 8 points of each configuration run the same steps and
// share one step-time distribution (StepCache); counter `distributions` = those computed.
// BM_AnalyticCotune8Lr sweeps 8 learning rates per configuration with a [cotune] study (its
// time-to-target metrics through the run model), BM_AnalyticLr8 the same space without it.
//
//   build/bench/evaluate_bench --benchmark_min_time=2

#include <benchmark/benchmark.h>

#include <algorithm>
#include <optional>
#include <string>

#include "explorer/chunk_evaluator.hpp"
#include "explorer/design_space.hpp"
#include "io/experiment_loader.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/evaluate.hpp"

namespace {

std::string experiment_text(const std::string& method, bool sensitivity,
                            const std::string& extra_space = "",
                            const std::string& extra_tables = "") {
    return R"(
[experiment]
name = "bench-405b-16k"
seed = 1

[model]
preset = "llama3-405b"
layers = 128   # balanced 16-stage split (see configs/examples/run_405b_16k.toml)

[training]
global_batch = 2048
total_tokens = 15.6e12

[hardware.h100]
preset = "h100-sxm"

[defaults]
sequence_parallel = true
recompute = "full"
zero_stage = 1

[space]
tp = [8]
pp = [8, 16]
gpus = [16384]
microbatch = [1]
placement = ["tp-cp-pp-dp", "random", "aware"]
)" + extra_space +
           R"(

[evaluation]
method = ")" +
           method + R"("
samples = 1000
sensitivity = )" +
           (sensitivity ? "true" : "false") + R"(

[variability]
gemm = {dist = "lognormal", cv = 0.05}
attention = {dist = "lognormal", cv = 0.05}
elementwise = {dist = "lognormal", cv = 0.03}
allreduce = {dist = "lognormal", cv = 0.15}
allgather = {dist = "lognormal", cv = 0.15}
reducescatter = {dist = "lognormal", cv = 0.15}
p2p = {dist = "lognormal", cv = 0.2}
optimizer = {dist = "lognormal", cv = 0.02}
comm_regime = {dist = "lognormal", cv = 0.1}

[variability.persistent]
spatial = {dist = "normal", cv = 0.03}
slow_probability = 0.002
slow_factor = 1.5

[failures]
enabled = true
checkpoint_bandwidth = "1 TB/s"
detection = "2 min"
restart = "10 min"

[[failures.cause]]
name = "gpu"
mtbf = "79229 h"
)" + extra_tables;
}

void run(benchmark::State& state, const std::string& method, bool sensitivity, bool full) {
    const prism::Experiment e =
        prism::io::parse_experiment(experiment_text(method, sensitivity), "bench.toml");
    const prism::explorer::DesignSpace space(e);
    const prism::Evaluator evaluator(e);
    std::uint64_t index = 0;
    for (auto _ : state) {
        const auto p = space.decode(index % space.size()).point;
        if (full) {
            benchmark::DoNotOptimize(evaluator.evaluate(p, index));
        } else {
            benchmark::DoNotOptimize(prism::evaluate_deterministic(e, p));
        }
        ++index;
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

/// The whole space in index order, one chunk of 8 points at a time, as a worker gets them; each
/// pass over the space starts with an empty step cache (a new worker), so that every
/// configuration's distribution is computed once per pass, never taken from an earlier pass.
void run_chunks(benchmark::State& state, const std::string& text) {
    const prism::Experiment e = prism::io::parse_experiment(text, "bench.toml");
    const prism::explorer::DesignSpace space(e);
    const prism::Evaluator evaluator(e);
    std::optional<prism::explorer::ChunkEvaluator> chunks;
    std::uint64_t begin = 0, points = 0;
    std::size_t computed = 0, shared = 0;
    for (auto _ : state) {
        if (begin == 0) {
            if (chunks) {
                computed += chunks->step_cache().misses();
                shared += chunks->step_cache().hits();
            }
            chunks.emplace(space, evaluator);
        }
        const std::uint64_t end = std::min<std::uint64_t>(begin + 8, space.size());
        const auto r = (*chunks)(prism::explorer::WorkOrder{0, begin, end});
        benchmark::DoNotOptimize(r.rows.data());
        points += r.rows.size();
        begin = end == space.size() ? 0 : end;
    }
    computed += chunks->step_cache().misses();
    shared += chunks->step_cache().hits();
    state.SetItemsProcessed(static_cast<std::int64_t>(points));
    state.counters["distributions"] = static_cast<double>(computed);
    state.counters["shared"] = static_cast<double>(shared);
}

void BM_Deterministic(benchmark::State& s) { run(s, "analytic", false, false); }
void BM_Analytic(benchmark::State& s) { run(s, "analytic", false, true); }
void BM_AnalyticWithSensitivity(benchmark::State& s) { run(s, "analytic", true, true); }
void BM_MonteCarlo1000(benchmark::State& s) { run(s, "montecarlo", false, true); }

void run_cotuning(benchmark::State& state, const std::string& method, bool sensitivity) {
    run_chunks(state, experiment_text(method, sensitivity,
                                      "learning_rate = [1e-4, 2e-4, 4e-4, 8e-4]\n"
                                      "checkpoint_interval = [1800, 3600]\n"));
}

const char* const kEightLearningRates =
    "learning_rate = [2e-5, 3e-5, 4e-5, 6e-5, 8e-5, 1.2e-4, 1.6e-4, 2.4e-4]\n";

void BM_AnalyticLr8(benchmark::State& s) {
    run_chunks(s, experiment_text("analytic", false, kEightLearningRates));
}
void BM_AnalyticCotune8Lr(benchmark::State& s) {
    run_chunks(s,
               experiment_text("analytic", false, kEightLearningRates,
                               "\n[cotune]\ntarget_tokens = 1.5e13\nb_noise = 8e6\n"
                               "lr_rule = \"sqrt\"\nlr_reference = 8e-5\nwarmup_steps = 8000\n"));
}

void BM_AnalyticCoTuning(benchmark::State& s) { run_cotuning(s, "analytic", false); }
void BM_AnalyticWithSensitivityCoTuning(benchmark::State& s) { run_cotuning(s, "analytic", true); }
void BM_MonteCarlo1000CoTuning(benchmark::State& s) { run_cotuning(s, "montecarlo", false); }

BENCHMARK(BM_Deterministic)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Analytic)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AnalyticWithSensitivity)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MonteCarlo1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AnalyticCoTuning)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AnalyticWithSensitivityCoTuning)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MonteCarlo1000CoTuning)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AnalyticLr8)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AnalyticCotune8Lr)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
