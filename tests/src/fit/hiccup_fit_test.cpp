#include "src/fit/hiccup_fit.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "src/common/error.hpp"
#include "src/stochastic/step_distribution.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace prism::fit {
namespace {

using prism::testing::ProfileShape;

struct Job {
    StepProfile profile;
    DesignPoint point;
    HardwareSpec hardware = prism::testing::test_hardware();
    ClusterSpec cluster;
};

// A 4-stage pipeline (tp 8, 8 microbatches) of `dp` replicas: 4 x dp nodes of 8 GPUs.
Job job(int dp) {
    ProfileShape shape;
    shape.stages = 4;
    shape.microbatches = 8;
    shape.dp = dp;
    Job j;
    j.profile = prism::testing::make_profile(shape);
    j.point = prism::testing::design_point(shape);
    return j;
}

// A narrow body (the PRISM-like transient cvs x 0.1: a step sd of ~0.2%, as measured runs)
// with hiccups.
VariabilitySpec truth_with(const HiccupSpec& h) {
    VariabilitySpec v = prism::testing::prism_like();
    v.persistent.spatial = DistributionSpec{};
    v.comm_regime = DistributionSpec{};
    for (auto& d : v.transient) d.cv *= 0.1;
    v.hiccup = h;
    return v;
}

std::vector<MeasuredSteps> runs_of(const Job& j, const VariabilitySpec& v, int runs, int steps,
                                   std::uint64_t seed) {
    const std::vector<double> draws = stochastic::monte_carlo_samples(
        j.profile, j.point, j.hardware, j.cluster, v, runs * steps, seed, 0);
    std::vector<MeasuredSteps> out(static_cast<std::size_t>(runs));
    for (int i = 0; i < runs * steps; ++i) {
        out[static_cast<std::size_t>(i / steps)].step_time_s.push_back(draws[std::size_t(i)]);
    }
    return out;
}

// Monte Carlo steps (the reference evaluator's exact draws of every factor and of each step's
// largest delay) from known q, median and sigma: 3 runs of 1,000 steps on 16 nodes with q =
// 0.005 (7.7% of the steps hit, ~230 hits). Standard errors of the maximum-likelihood estimates
// at these counts: q ~7% (binomial on the hit count), the median's log ~sigma / sqrt(hits) =
// 4%, sigma ~sigma / sqrt(2 hits) = 5%. Tolerances 25% (q), 15% (median), 20% (sigma): about 3
// standard errors, plus the body's noise on each hit's excess (~0.2% of the step against a
// median delay of 5%).
TEST(HiccupFit, RecoversTheProbabilityAndDelayLawFromMonteCarloSteps) {
    const Job j = job(4);
    HiccupSpec h;
    h.probability = 0.005;
    h.delay_median_s = 0.05 * deterministic_step_time(j.profile);
    h.delay_sigma = 0.6;

    for (std::uint64_t seed : {41, 42}) {
        const std::vector<MeasuredSteps> runs = runs_of(j, truth_with(h), 3, 1000, seed);

        const HiccupFit fit = fit_hiccups({{runs, 16.0}});

        EXPECT_NEAR(fit.hiccup.probability / h.probability, 1.0, 0.25) << seed;
        EXPECT_NEAR(fit.hiccup.delay_median_s / h.delay_median_s, 1.0, 0.15) << seed;
        EXPECT_NEAR(fit.hiccup.delay_sigma / h.delay_sigma, 1.0, 0.2) << seed;
        EXPECT_TRUE(fit.sigma_fitted);
        EXPECT_GT(fit.hits, 150u);
        // lognormal delays: the Pareto tail fits worse and the lognormal is kept
        EXPECT_EQ(fit.hiccup.family, HiccupFamily::lognormal) << seed;
        EXPECT_LT(fit.pareto_log_likelihood, fit.lognormal_log_likelihood) << seed;
    }
}

// Pareto delays (alpha 2.5, median 5% of the step; q = 0.005 on 16 nodes, ~230 hits): the
// family is told by the likelihood and alpha comes back within 25% (the Hill estimator's
// standard error at ~230 hits is alpha / sqrt(hits) ~ 7%, plus the body's noise on each excess),
// q within 25%, the median within 15%.
TEST(HiccupFit, RecoversAParetoTailAndTellsItFromALognormal) {
    const Job j = job(4);
    HiccupSpec h;
    h.probability = 0.005;
    h.delay_median_s = 0.05 * deterministic_step_time(j.profile);
    h.family = HiccupFamily::pareto;
    h.delay_tail = 2.5;

    for (std::uint64_t seed : {43, 44}) {
        const std::vector<MeasuredSteps> runs = runs_of(j, truth_with(h), 3, 1000, seed);

        const HiccupFit fit = fit_hiccups({{runs, 16.0}});

        EXPECT_EQ(fit.hiccup.family, HiccupFamily::pareto) << seed;
        EXPECT_GT(fit.pareto_log_likelihood, fit.lognormal_log_likelihood) << seed;
        EXPECT_NEAR(fit.hiccup.delay_tail / 2.5, 1.0, 0.25) << seed;
        EXPECT_NEAR(fit.hiccup.probability / h.probability, 1.0, 0.25) << seed;
        EXPECT_NEAR(fit.hiccup.delay_median_s / h.delay_median_s, 1.0, 0.15) << seed;
    }
}

// Two scales of one platform: the same q per node on 16 and 64 nodes (7.7% and 27% of steps
// hit). Fitted on both groups with their node counts, q comes back as one per-node value
// (the hit fractions differ 3.5x; a per-scale constant would not fit both).
TEST(HiccupFit, TwoScalesPinOneProbabilityPerNode) {
    const Job small = job(4), large = job(16);
    HiccupSpec h;
    h.probability = 0.005;
    h.delay_median_s = 0.05 * deterministic_step_time(small.profile);
    h.delay_sigma = 0.5;

    const HiccupFit fit = fit_hiccups({{runs_of(small, truth_with(h), 2, 800, 7), 16.0},
                                       {runs_of(large, truth_with(h), 2, 800, 8), 64.0}});

    EXPECT_NEAR(fit.hiccup.probability / h.probability, 1.0, 0.2);
    EXPECT_NEAR(fit.hiccup.delay_median_s / h.delay_median_s, 1.0, 0.15);
}

// Without a step above the threshold there is no hiccup to fit: q = 0, and the rule of three
// bounds it over the node-steps seen.
TEST(HiccupFit, NoHitGivesZeroAndTheRuleOfThreeBound) {
    const Job j = job(4);
    const std::vector<MeasuredSteps> runs = runs_of(j, truth_with(HiccupSpec{}), 2, 500, 3);

    const HiccupFit fit = fit_hiccups({{runs, 16.0}});

    EXPECT_EQ(fit.hits, 0u);
    EXPECT_EQ(fit.hiccup.probability, 0.0);
    EXPECT_NEAR(fit.probability_upper_95, 3.0 / (1000 * 16), 1e-15);
}

// Few hits just above the threshold on many nodes, as the Oracle GPT-3 1,536-GPU runs
// (tests/data/steps: 3 of 527 steps on 192 nodes, all in one run, 1.04-1.51x its threshold of 6
// robust sd): the fitted share of steps hit, 1 - (1 - q)^n, stays near the share seen (before
// the delay's median was held at the threshold: 89%, a median of 11 ms against a 39 ms
// threshold: ever more frequent, ever smaller delays hidden in the body), and the median delay
// is not below the threshold.
TEST(HiccupFit, FewHitsDoNotHideHiccupsInTheBody) {
    std::mt19937_64 rng(1536);
    std::normal_distribution<double> body(5.17, 0.0065);
    std::vector<MeasuredSteps> runs(3);
    for (std::size_t r = 0; r < runs.size(); ++r) {
        runs[r].name = "run" + std::to_string(r);
        for (int k = 0; k < 176; ++k) runs[r].step_time_s.push_back(body(rng));
    }
    // a run of 176 steps: its median, and its threshold as the fit defines it (6 x 1.4826 x MAD
    // above the median)
    const auto median_of_176 = [](std::vector<double> t) {
        std::sort(t.begin(), t.end());
        return 0.5 * (t[87] + t[88]);
    };
    const auto threshold_of = [&](const std::vector<double>& t) {
        const double median = median_of_176(t);
        std::vector<double> deviation;
        for (double x : t) deviation.push_back(std::fabs(x - median));
        return 6 * 1.4826 * median_of_176(deviation);
    };
    const double median = median_of_176(runs[1].step_time_s);
    const double threshold = threshold_of(runs[1].step_time_s);
    {  // two hits replace two body steps on either side of the median: median and MAD stay
        std::vector<double>& t = runs[1].step_time_s;
        const double smallest = *std::min_element(t.begin(), t.end());
        *std::min_element(t.begin(), t.end()) = median + 1.04 * threshold;
        t.push_back(median + 1.22 * threshold);
        t.push_back(median + 1.51 * threshold);
        t.push_back(smallest);
    }

    const HiccupFit fit = fit_hiccups({{runs, 192.0}});

    ASSERT_EQ(fit.hits, 3u);
    const double seen = 3.0 / static_cast<double>(fit.steps);
    const double share = 1 - std::pow(1 - fit.hiccup.probability, 192.0);
    EXPECT_LT(share, 3 * seen);
    EXPECT_GT(share, seen / 3);
    // the smallest of the runs' thresholds (the bound; run 1's is the one above)
    const double smallest =
        std::min({threshold, threshold_of(runs[0].step_time_s), threshold_of(runs[2].step_time_s)});
    EXPECT_NEAR(fit.hiccup.delay_median_s, smallest, 1e-9);  // held at the bound here
    EXPECT_GT(smallest, 0.8 * threshold);
}

TEST(HiccupFit, NeedsTwoStepsPerRun) {
    EXPECT_THROW(
        {
            try {
                fit_hiccups({{{{"run.csv", {1.0}}}, 4.0}});
            } catch (const ModelError& e) {
                EXPECT_STREQ(e.what(), "hiccup fit: run.csv: 1 steps; need at least 2");
                throw;
            }
        },
        ModelError);
}

}  // namespace
}  // namespace prism::fit
