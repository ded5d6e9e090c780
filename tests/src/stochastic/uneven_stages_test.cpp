// Both evaluators on an uneven pipeline split (issue #25 item 2): the first and last stage hold
// fewer layers, so their chunk costs differ from the middle stages'.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "src/stochastic/step_distribution.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace prism {
namespace {

TEST(UnevenStages, VanishingVarianceConvergesToTheDeterministicTime) {
    testing::ProfileShape s;
    s.stages = 4;
    s.microbatches = 8;
    s.dp = 4;
    s.layers_per_chunk = 4;
    StepProfile profile = testing::make_profile(s);
    profile.uneven_chunk_layers = {3, 4, 4, 3};
    StepProfile even = profile;
    even.uneven_chunk_layers.clear();
    const double det = deterministic_step_time(profile);
    VariabilitySpec tiny;
    for (auto& t : tiny.transient) t = testing::dist(DistKind::normal, 1e-7);
    tiny.persistent.spatial = testing::dist(DistKind::normal, 1e-7);
    tiny.comm_regime = testing::dist(DistKind::lognormal, 1e-7);
    EvaluationSpec eval;
    eval.samples = 200;

    for (const auto m : {Method::analytic, Method::montecarlo}) {
        eval.method = m;
        const auto d = step_distribution(profile, testing::design_point(s),
                                         testing::test_hardware(), {}, tiny, eval, 1, 2);

        EXPECT_EQ(d.deterministic_s, det);
        // 1e-5: the analytic evaluator's linearization around near-tied paths of unequal
        // stages puts its centre 6e-6 below the exact makespan here (2e-7 on the even split)
        EXPECT_NEAR(d.p50_s / det, 1.0, 1e-5);
        EXPECT_NEAR(d.p99_s / det, 1.0, 1e-5);
    }
    // two layers fewer on the ends shorten the step (the check that the split is used)
    EXPECT_LT(det, deterministic_step_time(even));
}

TEST(UnevenStages, AnalyticFollowsMonteCarlo) {
    testing::ProfileShape s;
    s.stages = 4;
    s.microbatches = 8;
    s.dp = 16;
    StepProfile profile = testing::make_profile(s);
    profile.uneven_chunk_layers = {3, 4, 4, 3};
    const auto hw = testing::test_hardware();
    const DesignPoint point = testing::design_point(s);
    const VariabilitySpec var = testing::prism_like();
    constexpr int kSamples = 4000;

    auto x = stochastic::monte_carlo_samples(profile, point, hw, {}, var, kSamples, 42, 7);
    std::sort(x.begin(), x.end());
    const auto f = stochastic::analytic_cdf(profile, point, hw, {}, var, x);
    const auto a = step_distribution(profile, point, hw, {}, var, EvaluationSpec{}, 42, 7);

    double ks = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        ks = std::max({ks, std::fabs(f[i] - double(i) / kSamples),
                       std::fabs(f[i] - double(i + 1) / kSamples)});
    }
    const double mc_p50 = x[x.size() / 2], mc_p99 = x[std::size_t(0.99 * (kSamples - 1))];
    std::printf("  uneven 3-4-4-3: KS %.4f, p50 %.5f / %.5f, p99 %.5f / %.5f (analytic / MC)\n", ks,
                a.p50_s, mc_p50, a.p99_s, mc_p99);
    // 4,000 samples: the empirical CDF's own KS exceeds 0.0215 with probability 5%
    // (Kolmogorov). The analytic is less accurate here than on even splits (README, Known
    // limitations): with 10,000 samples KS 0.046 for 3-4-4-3 layers, 0.021 for 4-4-4-3, 0.008
    // for 3-4-4-4 and 0.010 for the even 4-4-4-4 (its location within 0.15% in every case)
    EXPECT_LE(ks, 0.07);
    EXPECT_NEAR(a.p50_s / mc_p50, 1.0, 0.005);
    EXPECT_NEAR(a.p99_s / mc_p99, 1.0, 0.01);
}

}  // namespace
}  // namespace prism
