// Exponential loss-curve fitting (src/cotune/loss_fit.hpp) on synthetic curves of known a, b, c.
//
// Tolerances come from the noise: for Gaussian noise of sd sigma the least-squares estimates
// have covariance sigma^2 (J^T J)^-1, J the Jacobian of a e^(b x) + c at the true parameters
// (computed here, independently of the fit); the Huber fit has 95% efficiency under Gaussian
// noise, so its standard errors are at most 1/sqrt(0.95) times larger. Each estimate must lie
// within 4.5 of those standard errors (a two-sided 7e-6 event per estimate for an unbiased
// normal estimate; the seeds are fixed).

#include "src/cotune/loss_fit.hpp"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>
#include <Eigen/Dense>

namespace prism::cotune {
namespace {

struct Truth {
    double a = 2.0, b = -0.01, c = 2.5;
    double at(double x) const { return a * std::exp(b * x) + c; }
};

struct Curve {
    std::vector<double> steps, losses;
};

Curve make_curve(const Truth& t, int points, double spacing, double sigma, std::uint64_t seed,
                 double outlier_fraction = 0, double outlier_size = 0) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(0.0, sigma);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    Curve c;
    for (int i = 0; i < points; ++i) {
        const double x = i * spacing;
        double y = t.at(x) + noise(rng);
        if (u(rng) < outlier_fraction) y += outlier_size;  // loss spikes: one-sided
        c.steps.push_back(x);
        c.losses.push_back(y);
    }
    return c;
}

/// Asymptotic standard errors of (a, b, c) and of the prediction at `tau` for Gaussian noise.
struct Errors {
    double a, b, c, prediction;
};

Errors standard_errors(const Truth& t, const Curve& curve, double sigma, double tau) {
    const auto n = static_cast<Eigen::Index>(curve.steps.size());
    Eigen::MatrixXd j(n, 3);
    for (Eigen::Index i = 0; i < n; ++i) {
        const double x = curve.steps[static_cast<std::size_t>(i)];
        const double e = std::exp(t.b * x);
        j(i, 0) = e;
        j(i, 1) = t.a * x * e;
        j(i, 2) = 1.0;
    }
    const Eigen::Matrix3d cov = sigma * sigma * (j.transpose() * j).inverse() / 0.95;
    Eigen::Vector3d g(std::exp(t.b * tau), t.a * tau * std::exp(t.b * tau), 1.0);
    return {std::sqrt(cov(0, 0)), std::sqrt(cov(1, 1)), std::sqrt(cov(2, 2)),
            std::sqrt(g.dot(cov * g))};
}

/// a, b, c and the prediction at `tau` within `k` standard errors of the truth.
void expect_within(const FitOutcome& out, const Truth& t, const Errors& se, double tau, double k,
                   std::uint64_t seed) {
    ASSERT_TRUE(out.fit.has_value()) << out.rejected;
    EXPECT_NEAR(out.fit->a, t.a, k * se.a) << seed;
    EXPECT_NEAR(out.fit->b, t.b, k * se.b) << seed;
    EXPECT_NEAR(out.fit->c, t.c, k * se.c) << seed;
    EXPECT_NEAR(out.fit->predict(tau), t.at(tau), k * se.prediction) << seed;
}

TEST(ExponentialFit, RecoversKnownParametersFromNoisyCurves) {
    // 100 points over 500 steps (the decay e^(b x) falls to e^-5), sigma = 0.01 (0.4% of the
    // final loss); 20 seeds
    const Truth t;
    const double sigma = 0.01, tau = 1000;
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        const Curve curve = make_curve(t, 100, 5.0, sigma, seed);
        const Errors se = standard_errors(t, curve, sigma, tau);

        const FitOutcome out = fit_exponential(curve.steps, curve.losses);

        expect_within(out, t, se, tau, 4.5, seed);
        ASSERT_TRUE(out.fit.has_value());
        EXPECT_NEAR(out.fit->rmse, sigma, 0.3 * sigma) << seed;  // 100 points: sd of s ~7%
        EXPECT_GT(out.fit->r_squared, 0.99);
    }
}

TEST(ExponentialFit, OutliersDoNotMoveTheFit) {
    // The same curves with 5% of the points spiked by +30 sigma. A plain least-squares fit
    // would lift c by about 0.05 x 0.3 = 0.015, ~20 of its standard errors; the Huber fit must
    // stay within 5 standard errors and flag the spikes.
    const Truth t;
    const double sigma = 0.01, tau = 1000;
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        const Curve curve = make_curve(t, 100, 5.0, sigma, seed, 0.05, 30 * sigma);
        const Errors se = standard_errors(t, curve, sigma, tau);
        std::size_t spikes = 0;
        for (std::size_t i = 0; i < curve.steps.size(); ++i) {
            spikes += curve.losses[i] - t.at(curve.steps[i]) > 20 * sigma;
        }

        const FitOutcome out = fit_exponential(curve.steps, curve.losses);

        expect_within(out, t, se, tau, 5.0, seed);
        ASSERT_TRUE(out.fit.has_value());
        EXPECT_GE(out.fit->downweighted, spikes) << seed;
    }
}

TEST(ExponentialFit, StepsNeedNotStartAtZero) {
    // x is counted from the first step: a curve measured from step 10000 fits the same shape
    const Truth t;
    Curve curve = make_curve(t, 60, 10.0, 0.005, 7);
    for (double& s : curve.steps) s += 10000;

    const FitOutcome out = fit_exponential(curve.steps, curve.losses);

    ASSERT_TRUE(out.fit.has_value());
    EXPECT_EQ(out.fit->first_step, 10000);
    EXPECT_NEAR(out.fit->predict(10000 + 300), t.at(300), 0.01);
}

TEST(ExponentialFit, RejectsACurveThatDoesNotDecrease) {
    // flat with noise, rising, and rising to a plateau (a < 0)
    Curve flat = make_curve({0.0, -0.01, 3.0}, 80, 5.0, 0.01, 3);
    Curve rising = make_curve({-1.0, -0.005, 4.0}, 80, 5.0, 0.01, 4);

    const FitOutcome a = fit_exponential(flat.steps, flat.losses);
    const FitOutcome b = fit_exponential(rising.steps, rising.losses);

    EXPECT_FALSE(a.fit.has_value());
    EXPECT_NE(a.rejected.find("the loss does not decrease"), std::string::npos) << a.rejected;
    EXPECT_FALSE(b.fit.has_value());
    EXPECT_NE(b.rejected.find("the loss does not decrease"), std::string::npos) << b.rejected;
}

TEST(ExponentialFit, PicksTheLearningRateWithTheLowestPredictionAtTau) {
    // three learning rates over 300 steps: fast but a high plateau, slower but a low plateau,
    // diverging. At tau = 100 the fast one is ahead (2.87 vs 3.61), at tau = 2000 the slower
    // one (2.40 vs 2.60).
    const Curve fast = make_curve({2.0, -0.02, 2.6}, 60, 5.0, 0.005, 11);
    const Curve slow = make_curve({2.0, -0.005, 2.4}, 60, 5.0, 0.005, 12);
    const Curve diverging = make_curve({-1.0, -0.01, 6.0}, 60, 5.0, 0.005, 13);
    std::vector<FitOutcome> outcomes{fit_exponential(fast.steps, fast.losses),
                                     fit_exponential(slow.steps, slow.losses),
                                     fit_exponential(diverging.steps, diverging.losses)};

    EXPECT_FALSE(outcomes[2].fit.has_value());
    EXPECT_EQ(best_learning_rate(outcomes, 100.0), 0u);
    EXPECT_EQ(best_learning_rate(outcomes, 2000.0), 1u);
    EXPECT_FALSE(best_learning_rate(std::vector<FitOutcome>{outcomes[2]}, 100.0).has_value());
}

}  // namespace
}  // namespace prism::cotune
