#include "src/fit/periodic_fit.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "src/stochastic/step_distribution.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace prism::fit {
namespace {

using prism::testing::ProfileShape;

// Runs of Monte Carlo steps (a narrow body: the PRISM-like transient cvs x 0.1, a step sd of
// ~0.2%) indexed 6, 7, ... (the warm-up dropped), with known events added at their indices:
// `every` steps `duration` longer, and one step at `same_index` (+-2 by run) `spike` longer.
std::vector<MeasuredSteps> runs_with_events(int runs, int steps, std::int64_t every,
                                            double duration, std::int64_t same_index,
                                            double spike) {
    ProfileShape shape;
    shape.stages = 4;
    shape.microbatches = 8;
    shape.dp = 4;
    const StepProfile profile = prism::testing::make_profile(shape);
    VariabilitySpec v = prism::testing::prism_like();
    v.persistent.spatial = DistributionSpec{};
    v.comm_regime = DistributionSpec{};
    for (auto& d : v.transient) d.cv *= 0.1;
    const std::vector<double> draws = stochastic::monte_carlo_samples(
        profile, prism::testing::design_point(shape), prism::testing::test_hardware(),
        ClusterSpec{}, v, runs * steps, 17, 0);
    std::vector<MeasuredSteps> out(static_cast<std::size_t>(runs));
    for (int r = 0; r < runs; ++r) {
        out[r].name = "run" + std::to_string(r);
        for (int k = 0; k < steps; ++k) {
            const std::int64_t index = 6 + k;
            double t = draws[static_cast<std::size_t>(r * steps + k)];
            if (every > 0 && index % every == 0) t += duration;
            if (spike > 0 && index == same_index + (r % 3) - 1) t += spike;
            out[r].step_time_s.push_back(t);
            out[r].step_index.push_back(index);
        }
    }
    return out;
}

// An event every 25 steps of 20 ms (~9% of the step) and one slow step at index 57 +- 1 in
// every run (the Eos-dfw pattern): both found, the period exactly, the durations within 3% (the
// body's sd of ~0.5 ms on a 20 ms excess), nothing else reported.
TEST(PeriodicFit, FindsAFixedPeriodAndTheSameIndexInEveryRun) {
    const std::vector<MeasuredSteps> runs = runs_with_events(3, 230, 25, 0.020, 57, 0.040);

    const PeriodicFit fit = fit_periodic(runs);

    ASSERT_EQ(fit.events.size(), 2u);
    EXPECT_EQ(fit.events[0].name, "every_25");
    EXPECT_EQ(fit.events[0].every, 25);
    EXPECT_NEAR(fit.events[0].duration_s / 0.020, 1.0, 0.03);
    EXPECT_EQ(fit.events[1].name, "same_index_56");
    EXPECT_EQ(fit.events[1].every, 230);  // once per run: its share of the steps
    EXPECT_NEAR(fit.events[1].duration_s / 0.040, 1.0, 0.03);
    // the event steps leave the runs: 1 + 9 per run
    const std::vector<MeasuredSteps> body = without_periodic(runs, fit);
    for (const MeasuredSteps& r : body) EXPECT_EQ(r.step_time_s.size(), 220u);
}

// A slow step in one run only is not periodic (a hiccup, for the hiccup fit).
TEST(PeriodicFit, ASlowStepInOneRunOnlyIsNotAnEvent) {
    std::vector<MeasuredSteps> runs = runs_with_events(3, 200, 0, 0, 0, 0);
    runs[1].step_time_s[40] *= 1.2;

    const PeriodicFit fit = fit_periodic(runs);

    EXPECT_TRUE(fit.events.empty());
}

// Slow steps scattered over a run are not a period, however many: the steps above the
// threshold of one University of Florida B200 405B run (tests/data/steps, result_1: indices 12,
// 125-129, 131, 144, 267, 268, 409, 413), whose gaps of 1-2 steps read as "every 2" before the
// lattice had to be mostly hit (a +-1 lattice of period 2 holds every index).
TEST(PeriodicFit, ScatteredSlowStepsAreNotAPeriod) {
    std::vector<MeasuredSteps> runs = runs_with_events(1, 500, 0, 0, 0, 0);
    for (const std::int64_t at : {12, 125, 126, 127, 128, 129, 131, 144, 267, 268, 409, 413}) {
        runs[0].step_time_s[static_cast<std::size_t>(at - 6)] *= 1.1;
    }

    const PeriodicFit fit = fit_periodic(runs);

    EXPECT_TRUE(fit.events.empty()) << fit.events.front().name;
}

}  // namespace
}  // namespace prism::fit
