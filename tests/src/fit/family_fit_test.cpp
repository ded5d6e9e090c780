#include "src/fit/family_fit.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "src/common/error.hpp"
#include "src/fit/detail/special.hpp"

namespace prism::fit {
namespace {

constexpr double kEuler = 0.57721566490153286061;

// Groups of 3 to 6 invocations whose own locations spread over a decade, each invocation the
// location times a factor drawn by `draw` (mean 1).
template <class Draw>
std::vector<KernelGroup> synthetic_groups(int groups, std::uint64_t seed, Draw draw) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> location(-9.2, -6.9);  // 100 us to 1 ms, log-uniform
    std::uniform_int_distribution<int> size(3, 6);
    std::vector<KernelGroup> out;
    for (int g = 0; g < groups; ++g) {
        KernelGroup kg;
        const double base = std::exp(location(rng));
        const int n = size(rng);
        for (int i = 0; i < n; ++i) kg.durations_s.push_back(base * draw(rng));
        out.push_back(kg);
    }
    return out;
}

std::lognormal_distribution<double> lognormal_with_cv(double cv) {
    const double s2 = std::log1p(cv * cv);
    return std::lognormal_distribution<double>(-0.5 * s2, std::sqrt(s2));
}

TEST(Digamma, MatchesClosedFormsAndTheRecurrence) {
    EXPECT_NEAR(detail::digamma(1.0), -kEuler, 1e-13);
    EXPECT_NEAR(detail::digamma(0.5), -kEuler - 2 * std::log(2.0), 1e-13);
    for (double x : {0.3, 2.5, 7.0, 1e3, 1e7}) {
        EXPECT_NEAR(detail::digamma(x + 1) - detail::digamma(x), 1 / x, 1e-14) << x;
    }
}

TEST(IncompleteBeta, MatchesClosedForms) {
    for (double x : {0.01, 0.2, 0.5, 0.77, 0.999}) {
        EXPECT_NEAR(detail::incomplete_beta(1, 1, x), x, 1e-13) << x;
        EXPECT_NEAR(detail::incomplete_beta(3.5, 1, x), std::pow(x, 3.5), 1e-13) << x;
        EXPECT_NEAR(detail::incomplete_beta(1, 4, x), 1 - std::pow(1 - x, 4), 1e-13) << x;
    }
    // Symmetric: I_0.5(a, a) = 1/2, also for the large shapes of a narrow gamma fit.
    for (double a : {0.7, 30.0, 2.5e3, 1e5}) {
        EXPECT_NEAR(detail::incomplete_beta(a, a, 0.5), 0.5, 1e-9) << a;
    }
}

TEST(KsUniform, IsHalfTheGapOfAnEvenGridAndGrowsWithAnAtom) {
    std::vector<double> grid, weight;
    for (int i = 0; i < 10; ++i) {
        grid.push_back((i + 0.5) / 10);
        weight.push_back(1);
    }

    EXPECT_NEAR(ks_uniform(grid, weight), 0.05, 1e-15);
    EXPECT_NEAR(ks_uniform({0.5}, {1.0}), 0.5, 1e-15);
    // weights count: an atom at 0.9 of weight 3 beside 0.1 of weight 1 -> F jumps 0.25 -> 1
    EXPECT_NEAR(ks_uniform({0.1, 0.9}, {1.0, 3.0}), 0.65, 1e-15);
}

// 3000 groups of 3 to 6 (~10,500 invocations, 7,500 degrees of freedom): the relative standard
// error of a fitted cv is about 1 / sqrt(2 dof) = 0.8%; 4% is 5 standard errors.
TEST(FitTransient, RecoversALognormalCvAroundEachKernelsOwnLocation) {
    for (double cv : {0.02, 0.1, 0.4}) {
        auto x = lognormal_with_cv(cv);

        const TransientFit fit =
            fit_transient(synthetic_groups(3000, 7, [&](std::mt19937_64& r) { return x(r); }));

        EXPECT_NEAR(fit.families[1].cv / cv, 1.0, 0.04) << cv;
        EXPECT_LT(fit.families[1].ks, 0.02) << cv;
        EXPECT_EQ(fit.groups, 3000u);
    }
}

TEST(FitTransient, PicksTheFamilyTheDataCameFromWhenTheSpreadShowsItsShape) {
    // At cv 0.4 the three families differ in skewness (normal 0, gamma 0.8, lognormal 1.3).
    const double cv = 0.4;
    auto ln = lognormal_with_cv(cv);
    std::gamma_distribution<double> ga(1 / (cv * cv), cv * cv);

    const TransientFit from_lognormal =
        fit_transient(synthetic_groups(3000, 11, [&](std::mt19937_64& r) { return ln(r); }));
    const TransientFit from_gamma =
        fit_transient(synthetic_groups(3000, 13, [&](std::mt19937_64& r) { return ga(r); }));

    EXPECT_EQ(from_lognormal.best.kind, DistKind::lognormal);
    EXPECT_EQ(from_gamma.best.kind, DistKind::gamma);
    EXPECT_NEAR(from_gamma.best.cv / cv, 1.0, 0.04);
    EXPECT_LT(from_gamma.best.ks, 0.02);
    EXPECT_GT(from_gamma.families[0].ks, 1.5 * from_gamma.best.ks);
    EXPECT_GT(from_lognormal.families[0].ks, 1.5 * from_lognormal.best.ks);
}

TEST(FitTransient, RemovesTheTimersRoundingFromTheSpread) {
    // 1 us rounding of ~40 us kernels adds (1/40)^2 / 12 = 5.2e-5 to a cv^2 of 4e-4 (13%).
    const double cv = 0.02;
    auto x = lognormal_with_cv(cv);
    std::vector<KernelGroup> groups =
        synthetic_groups(3000, 17, [&](std::mt19937_64& r) { return x(r); });
    for (KernelGroup& g : groups) {
        const double scale = 40e-6 / g.durations_s.front();
        for (double& d : g.durations_s) d = std::round(d * scale * 1e6) * 1e-6;
    }

    const TransientFit raw = fit_transient(groups);
    TransientFitOptions options;
    options.resolution_s = 1e-6;
    const TransientFit corrected = fit_transient(groups, options);

    EXPECT_GT(raw.families[1].cv / cv, 1.04);
    EXPECT_NEAR(corrected.families[1].cv / cv, 1.0, 0.04);
    EXPECT_NEAR(corrected.resolution_share, 5.2e-5 / (4e-4 + 5.2e-5), 0.03);
}

TEST(FitTransient, QqPairsLieOnTheDiagonalForTheTrueFamily) {
    auto x = lognormal_with_cv(0.1);

    const TransientFit fit =
        fit_transient(synthetic_groups(3000, 19, [&](std::mt19937_64& r) { return x(r); }));

    ASSERT_EQ(fit.qq.size(), 99u);
    for (const auto& [fitted, empirical] : fit.qq) EXPECT_NEAR(empirical / fitted, 1.0, 0.02);
}

TEST(FitTransient, NeedsTwoInvocationsOfOneKernel) {
    const std::vector<KernelGroup> groups{{{1e-3}}, {{2e-3, -1.0}}};

    EXPECT_THROW(
        {
            try {
                fit_transient(groups);
            } catch (const ModelError& e) {
                EXPECT_STREQ(
                    e.what(),
                    "transient fit: 0 invocations in groups of 2 or more; need at least 2");
                throw;
            }
        },
        ModelError);
}

}  // namespace
}  // namespace prism::fit
