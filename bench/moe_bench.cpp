// Issue 36 must-show 4: a Mixture-of-Experts point costs at most 2x a dense point of the same
// active size to evaluate. DeepSeek-V3 (37B active: 8 routed + 1 shared expert of 2,048 = one
// dense MLP of 18,432) on 1,024 H100 against the same shape with a dense 18,432-wide MLP; the
// three points of the sweep s40-36a / s41-36k measured (pp 8, tp 2 / 4 / 8, microbatch 1, full
// recompute; ep 16 for the MoE model), each iteration a new design-space index (no step
// cache), the whole per-point evaluation (deterministic model, step-time distribution,
// sensitivity, the MoE metrics) as a sweep runs it. MoE variants: the router forced to balance
// (NVIDIA's tables), the aux-loss routing law without and with a per-step drift of 0.05 (the
// routing share of p50 / p95 then needs the forced-balance quantiles too; *NoShare: with
// [evaluation] routing_share = false, as before the share existed). One core;
// points/s = items_per_second.
//
//   build/bench/moe_bench --benchmark_repetitions=6 --benchmark_enable_random_interleaving=true
//       --benchmark_min_time=0.5 --benchmark_report_aggregates_only=true
// Instructions per point, which a loaded machine does not disturb (docs/moe_outputs.md):
//   MOE_BENCH_ITERATIONS=30 (and 60) valgrind --tool=callgrind --callgrind-out-file=/dev/null
//       build/bench/moe_bench --benchmark_filter='BM_Dense$'   -> (Ir(60) - Ir(30)) / 30

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "explorer/design_space.hpp"
#include "io/experiment_loader.hpp"
#include "src/model/evaluate.hpp"

namespace {

std::string experiment_text(bool moe, const std::string& routing, const std::string& method,
                            bool share) {
    const std::string model = moe ? "preset = \"deepseek-v3\"\n" : R"(layers = 61
hidden = 7168
heads = 128
ffn = 18432
gated_mlp = true
vocab = 129280
tied_embeddings = false
seq = 4096
attention = "mla"
q_lora_rank = 1536
kv_lora_rank = 512
qk_nope_head_dim = 128
qk_rope_head_dim = 64
v_head_dim = 128
)";
    std::string training = R"(global_batch = 8192
precision = "fp8"
flash_attention = true
first_stage_layers = 5
last_stage_layers = 8
)";
    std::string routing_table;
    if (moe) {
        training += "moe_dispatcher = \"deepep\"\nmoe_a2a_overlap = true\n";
        if (!routing.empty()) {
            training += "moe_force_balance = false\n";
            routing_table = "\n[variability.routing]\n" + routing + "\n";
        }
    }
    return "[experiment]\nname = \"moe-bench\"\nseed = 36\n\n[model]\n" + model + "\n[training]\n" +
           training + R"(
[hardware.h100]
preset = "h100-sxm"

[cluster]
nodes_per_rack = 32
racks_per_pod = 8
total_gpus = 1024

[defaults]
gpus = 1024
cp = 1
zero_stage = 1
interleave = 1
placement = "tp-cp-dp-pp"
pp = 8
microbatch = 1
recompute = "full"
)" + (moe ? "ep = 16\n" : "") +
           R"(
[space]
tp = [2, 4, 8]

[variability]
preset = "prism-paper"
)" + routing_table +
           "\n[evaluation]\nmethod = \"" + method +
           "\"\nsamples = 1000\nrouting_share = " + (share ? "true" : "false") + "\n";
}

void run(benchmark::State& state, bool moe, const std::string& routing,
         const std::string& method = "analytic", bool share = true) {
    const prism::Experiment e =
        prism::io::parse_experiment(experiment_text(moe, routing, method, share), "moe_bench.toml");
    const prism::explorer::DesignSpace space(e);
    const prism::Evaluator evaluator(e);
    std::uint64_t index = 0;
    for (auto _ : state) {
        const auto p = space.decode(index % space.size()).point;
        const prism::PointResult r = evaluator.evaluate(p, index);
        if (r.status != prism::PointStatus::ok) state.SkipWithError("point not ok");
        benchmark::DoNotOptimize(r.values.data());
        ++index;
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_Dense(benchmark::State& s) { run(s, false, ""); }
void BM_MoeForcedBalance(benchmark::State& s) { run(s, true, ""); }
void BM_MoeAuxLoss(benchmark::State& s) { run(s, true, "balance = \"aux-loss\""); }
void BM_MoeAuxLossDrift(benchmark::State& s) {
    run(s, true, "balance = \"aux-loss\"\ndrift = 0.05");
}
void BM_MoeAuxLossNoShare(benchmark::State& s) {
    run(s, true, "balance = \"aux-loss\"", "analytic", false);
}
void BM_MoeAuxLossDriftNoShare(benchmark::State& s) {
    run(s, true, "balance = \"aux-loss\"\ndrift = 0.05", "analytic", false);
}
void BM_DenseMc1000(benchmark::State& s) { run(s, false, "", "montecarlo"); }
void BM_MoeAuxLossDriftMc1000(benchmark::State& s) {
    run(s, true, "balance = \"aux-loss\"\ndrift = 0.05", "montecarlo");
}
void BM_MoeAuxLossDriftMc1000NoShare(benchmark::State& s) {
    run(s, true, "balance = \"aux-loss\"\ndrift = 0.05", "montecarlo", false);
}

}  // namespace

/// With MOE_BENCH_ITERATIONS=N every benchmark runs exactly N points (for instruction counts
/// under valgrind, which a loaded machine does not disturb: the difference of two counts over
/// the difference of their N is the cost of a point, set-up excluded).
int main(int argc, char** argv) {
    const char* fixed = std::getenv("MOE_BENCH_ITERATIONS");
    const struct {
        const char* name;
        void (*fn)(benchmark::State&);
        bool mc;
    } benches[] = {{"BM_Dense", BM_Dense, false},
                   {"BM_MoeForcedBalance", BM_MoeForcedBalance, false},
                   {"BM_MoeAuxLoss", BM_MoeAuxLoss, false},
                   {"BM_MoeAuxLossDrift", BM_MoeAuxLossDrift, false},
                   {"BM_MoeAuxLossNoShare", BM_MoeAuxLossNoShare, false},
                   {"BM_MoeAuxLossDriftNoShare", BM_MoeAuxLossDriftNoShare, false},
                   {"BM_DenseMc1000", BM_DenseMc1000, true},
                   {"BM_MoeAuxLossDriftMc1000", BM_MoeAuxLossDriftMc1000, true},
                   {"BM_MoeAuxLossDriftMc1000NoShare", BM_MoeAuxLossDriftMc1000NoShare, true}};
    for (const auto& b : benches) {
        auto* r = benchmark::RegisterBenchmark(b.name, b.fn)->Unit(benchmark::kMillisecond);
        if (fixed != nullptr) {
            r->Iterations(std::atoi(fixed));
        } else if (b.mc) {
            r->Iterations(3);
        } else {
            r->MinTime(2.0);
        }
    }
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    return 0;
}
