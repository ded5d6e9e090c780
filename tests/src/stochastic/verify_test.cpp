#include "src/stochastic/verify.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "tests/src/stochastic/test_profiles.hpp"

namespace prism::stochastic {
namespace {

TEST(Verify, KsIsTheLargestGapOfTheEmpiricalCdf) {
    // n = 10 samples at (k + 1) / 10 against the uniform CDF: the empirical CDF steps from k/10
    // to (k + 1)/10 at each sample, 1/10 from the CDF on one side of the step
    std::vector<double> x, f;
    for (int k = 0; k < 10; ++k) {
        x.push_back((k + 1) / 10.0);
        f.push_back((k + 1) / 10.0);
    }

    EXPECT_NEAR(ks_to_samples(x, f), 0.1, 1e-15);

    f[4] = 0.9;  // the CDF 0.5 above the empirical CDF just below the fifth sample (0.4)
    EXPECT_NEAR(ks_to_samples(x, f), 0.5, 1e-15);
}

TEST(Verify, AnalyticAndMonteCarloAgreeWhereBothAreAccurate) {
    // tp 8, pp 4, dp 8, 16 microbatches with the PRISM-like preset: the accuracy tests hold the
    // analytic within KS 0.02 of 10,000 Monte Carlo samples on such shapes; 2,000 samples add
    // a sampling KS of at most 1.36 / sqrt(2000) = 0.030 at 95%, and their p95 / p99 a
    // standard error below 0.2% of these narrow distributions
    const auto s = testing::pipeline_shape(8, 4, 8, 16);
    EvaluationSpec ev;
    ev.samples = 2000;

    const Verification v =
        verify_monte_carlo(testing::make_profile(s), testing::design_point(s),
                           testing::test_hardware(), {}, testing::prism_like(), ev, 5, 3);

    EXPECT_EQ(v.samples, 2000);
    EXPECT_LT(v.ks, 0.05);
    EXPECT_NEAR(v.analytic_mean_s / v.mc_mean_s, 1.0, 0.005);
    EXPECT_NEAR(v.analytic_p50_s / v.mc_p50_s, 1.0, 0.005);
    EXPECT_NEAR(v.analytic_p95_s / v.mc_p95_s, 1.0, 0.01);
    EXPECT_NEAR(v.analytic_p99_s / v.mc_p99_s, 1.0, 0.01);
}

}  // namespace
}  // namespace prism::stochastic
