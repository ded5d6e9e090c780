// Straggler draining end to end (issue 35 item 8): the quickstart's best point, whose
// PRISM-paper profile makes 1% of nodes 1.14x slow, with `[failures] straggler_detection`.
// Truth: the same experiment without slow units (slow_probability = 0), the cluster a drained
// run converges to, and the closed form of the run model's drain (tests/src/run).

#include <gtest/gtest.h>

#include <string>

#include "io/experiment_loader.hpp"
#include "src/model/design_space.hpp"
#include "src/model/evaluate.hpp"
#include "src/model/metrics.hpp"

namespace prism {
namespace {

double metric(const Evaluator& ev, const PointResult& r, const char* name) {
    return r.values.at(static_cast<std::size_t>(find_metric(ev.schema(), name)));
}

TEST(StragglerDraining, ADrainedRunLiesBetweenTheHealthyClusterAndTheUndrainedOne) {
    const Experiment base =
        io::load_experiment(std::string(PRISM_SOURCE_DIR) + "/configs/quickstart.toml");
    ASSERT_GT(base.variability.persistent.slow_probability, 0.0);
    DesignPoint p = base.defaults;
    p.tp = 2;
    p.pp = 1;
    p.dp = 512;  // 1024 GPUs: 128 nodes, most simulated clusters hold a slow one
    p.microbatch = 2;
    p.zero_stage = 3;
    p.recompute = Recompute::full;

    Experiment healthy = base;
    healthy.variability.persistent.slow_probability = 0;
    Experiment drained = base;
    drained.failures.straggler_detection_s = 1.0;  // detected at once
    drained.failures.straggler_threshold = 0.02;   // a slow node makes the step ~7% slower
    drained.failures.straggler_replacement_s = 600;
    Experiment late = drained;
    late.failures.straggler_detection_s = 30 * 86400.0;  // after a month

    const Evaluator e_base(base), e_healthy(healthy), e_drained(drained), e_late(late);
    const PointResult r_base = e_base.evaluate(p, 0);
    const PointResult r_healthy = e_healthy.evaluate(p, 0);
    const PointResult r_drained = e_drained.evaluate(p, 0);
    const PointResult r_late = e_late.evaluate(p, 0);
    ASSERT_EQ(r_base.status, PointStatus::ok);

    const char* hours = "gpu_hours_mean";
    const double gpus = 1024;
    // the blocking checkpoint and the replacement, per drained cluster, at most once
    const double cost_hours = gpus * (600.0 + 3600.0) / 3600.0;  // C well under an hour here
    EXPECT_LT(metric(e_drained, r_drained, hours), metric(e_base, r_base, hours));
    // a drained cluster runs at the healthy clusters' mean, not at its own spatial draw without
    // the slow units (run_model.hpp): no faster than the healthy cluster but for that, 0.1%
    EXPECT_GE(metric(e_drained, r_drained, hours), 0.999 * metric(e_healthy, r_healthy, hours));
    // and no slower than the clusters it keeps (at most the threshold above the healthy mean)
    // and the healthy one with the cost of one drain
    EXPECT_LE(metric(e_drained, r_drained, hours),
              1.02 * metric(e_healthy, r_healthy, hours) + cost_hours);
    // drained after a month: between the two
    EXPECT_LT(metric(e_late, r_late, hours), metric(e_base, r_base, hours));
    EXPECT_GT(metric(e_late, r_late, hours), metric(e_drained, r_drained, hours));
    for (const char* q : {"run_time_p50_days", "run_time_p95_days", "run_time_p99_days"}) {
        EXPECT_LT(metric(e_drained, r_drained, q), metric(e_base, r_base, q)) << q;
        EXPECT_LE(metric(e_late, r_late, q), metric(e_base, r_base, q)) << q;
    }
    // the step-time distribution itself does not change: draining is a run-level policy
    EXPECT_EQ(metric(e_drained, r_drained, "step_time_p95_s"),
              metric(e_base, r_base, "step_time_p95_s"));
}

}  // namespace
}  // namespace prism
