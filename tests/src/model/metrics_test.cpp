#include "src/model/metrics.hpp"

#include <map>
#include <string>

#include <gtest/gtest.h>

#include "src/model/deterministic.hpp"
#include "src/model/evaluate.hpp"
#include "src/model/flops.hpp"
#include "tests/src/model/model_test_helpers.hpp"

namespace {

using prism::DesignPoint;
using prism::Experiment;

double value(const prism::Evaluator& ev, const prism::PointResult& r, const char* name) {
    const int k = prism::find_metric(ev.schema(), name);
    EXPECT_GE(k, 0) << name;
    return k >= 0 ? r.values[static_cast<std::size_t>(k)] : prism::kNaN;
}

/// The baseline at the experiment's batch of 16 sequences; the point at 32 on twice the GPUs.
Experiment with_baseline() {
    Experiment e = prism::test::small_experiment();
    DesignPoint base;
    base.dp = 2;
    e.baseline = base;
    return e;
}

TEST(Metrics, SpeedupIsTheRatioOfTokensPerSecondAcrossBatches) {
    const Experiment e = with_baseline();
    DesignPoint p;
    p.dp = 4;
    p.global_batch_seqs = 32;
    const prism::Evaluator ev(e);

    const prism::PointResult r = ev.evaluate(p, 0);

    const double base_s = prism::evaluate_deterministic(e, *e.baseline).step_time_s;
    const double point_s = prism::evaluate_deterministic(e, p).step_time_s;
    // tokens per second: 32 x 1024 / point_s against 16 x 1024 / base_s
    EXPECT_NEAR(value(ev, r, "speedup_vs_baseline"), (32.0 / point_s) / (16.0 / base_s), 1e-12);
    EXPECT_NEAR(value(ev, r, "step_speedup_vs_baseline"), base_s / point_s, 1e-12);
    // twice the batch on twice the GPUs: about as fast per step, about twice the throughput
    EXPECT_GT(value(ev, r, "speedup_vs_baseline"), 1.5);
    EXPECT_LT(value(ev, r, "step_speedup_vs_baseline"), 1.1);
}

TEST(Metrics, ModelHardwareAndMegatronTflopsFollowTheirCounts) {
    Experiment e = prism::test::small_experiment();
    DesignPoint p;
    p.dp = 2;
    p.recompute = prism::Recompute::full;
    const prism::Evaluator ev(e);

    const prism::PointResult r = ev.evaluate(p, 0);

    const double step = prism::evaluate_deterministic(e, p).step_time_s;
    // per sequence: 8 layers x (24 s h^2 + 4 s^2 h) forward, causal half for the model count
    const double s = 1024, h = 1024, layers = 8, logits = 2 * s * h * 32000;
    const double gemms = 24 * s * h * h, square = 4 * s * s * h;
    const double model = 16 * 3 * (layers * (gemms + square / 2) + logits);
    const double hardware = 16 * (layers * 4 * (gemms + square) + 3 * logits);  // recompute
    EXPECT_NEAR(value(ev, r, "model_tflops_per_gpu"), model / step / 2 / 1e12, 1e-9);
    EXPECT_NEAR(value(ev, r, "hardware_tflops_per_gpu"), hardware / step / 2 / 1e12, 1e-9);
    // MHA, 4h MLP, full recompute: Megatron's formula is exact here
    EXPECT_NEAR(value(ev, r, "megatron_tflops_per_gpu"), hardware / step / 2 / 1e12, 1e-9);
    EXPECT_NEAR(value(ev, r, "mfu"), model / step / 2 / 300e12, 1e-12);
}

// exposed_comm_s: the lines of communication not hidden (TP, CP, the DP sync and FSDP, and
// DeepSpeed's blocking pipeline transfers), as the breakdown gives them.
TEST(Metrics, ExposedCommunicationIsTheBreakdownsCommunicationLines) {
    Experiment e = prism::test::small_experiment();
    e.training.blocking_p2p = true;
    DesignPoint p;
    p.tp = 2;
    p.pp = 2;
    p.dp = 2;
    p.sequence_parallel = false;
    const prism::Evaluator ev(e);
    const prism::PointResult r = ev.evaluate(p, 0);
    const prism::Breakdown b = prism::evaluate_deterministic(e, p).breakdown;
    EXPECT_GT(b.pp_comm_exposed_s, 0.0);
    EXPECT_NEAR(value(ev, r, "exposed_comm_s"),
                b.tp_comm_exposed_s + b.cp_comm_exposed_s + b.fsdp_comm_exposed_s +
                    b.dp_sync_exposed_s + b.pp_comm_exposed_s,
                1e-12);
}

TEST(Metrics, RenamedMetricsNameTheirSuccessors) {
    EXPECT_EQ(prism::renamed_metric("tflops_per_gpu"), "megatron_tflops_per_gpu");
    EXPECT_EQ(prism::renamed_metric("time_to_target_p95_s"), "time_to_target_p95_days");
    EXPECT_EQ(prism::renamed_metric("mfu"), "");
}

TEST(Metrics, EveryMetricNameSaysItsUnit) {
    Experiment e = with_baseline();
    e.training.total_tokens = 1e9;
    e.cotune.enabled = true;

    const prism::MetricSchema schema = prism::metric_schema(e);

    // names end in their unit (_s, _days, _gib, ...) or are counts, ratios, rates named so
    for (const prism::MetricInfo& m : schema) {
        const auto ends = [&](const std::string& tail) {
            return m.name.size() >= tail.size() &&
                   m.name.compare(m.name.size() - tail.size(), tail.size(), tail) == 0;
        };
        const std::map<std::string, std::string> suffix{
            {"s", "_s"}, {"days", "_days"}, {"GiB", "_gib"}, {"TFLOP/s", "tflops_per_gpu"}};
        if (const auto it = suffix.find(m.unit); it != suffix.end()) {
            EXPECT_TRUE(ends(it->second)) << m.name;
        }
        EXPECT_NE(m.unit, "h") << m.name;
        EXPECT_FALSE(m.description.empty()) << m.name;
        EXPECT_EQ(m.description.find('\n'), std::string::npos) << m.name;
    }
}

}  // namespace
