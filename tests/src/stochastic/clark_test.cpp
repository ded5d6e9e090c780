#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "src/stochastic/detail/step_model.hpp"
#include "src/stochastic/distribution.hpp"

namespace prism::stochastic::detail {
namespace {

constexpr double kInvSqrt2Pi = 0.39894228040143267794;

TEST(NormalPair, WithinTheHermiteRemainderOfLibmOnTheTableAndExactOutside) {
    // truth: erfc and exp from libm; bound: h^4 / 384 max|f''''| at h = 1 / 128 with
    // max|Phi''''| = max|phi'''| = 0.55 and max|phi''''| = 1.2 (3 phi(0))
    const double h = 1.0 / kNormalTableDensity;
    const double bound = std::pow(h, 4) / 384.0 * 1.2;
    double worst_cdf = 0, worst_pdf = 0;
    for (double x = -9.5; x <= 9.5; x += 0.000713) {
        const NormalPair p = normal_pair(x);
        worst_cdf = std::max(worst_cdf, std::fabs(p.cdf - 0.5 * std::erfc(-x / std::sqrt(2.0))));
        worst_pdf = std::max(worst_pdf, std::fabs(p.pdf - kInvSqrt2Pi * std::exp(-0.5 * x * x)));
    }
    EXPECT_LE(worst_cdf, bound);
    EXPECT_LE(worst_pdf, bound);
    EXPECT_GT(bound, 1e-12);  // the bound is the remainder's, not a looser tolerance
    EXPECT_LT(bound, 2e-11);
    // the nodes and the table's ends hold libm's values
    for (double x : {-9.0, -1.0, 0.0, 1.0 / 128.0, 8.9921875, 9.0, 30.0, -30.0}) {
        const NormalPair p = normal_pair(x);
        EXPECT_NEAR(p.cdf, 0.5 * std::erfc(-x / std::sqrt(2.0)), 1e-16) << x;
        EXPECT_NEAR(p.pdf, kInvSqrt2Pi * std::exp(-0.5 * x * x), 1e-16) << x;
    }
}

/// Mean and variance of max(A, B), A ~ N(a), B ~ N(b) independent, by integrating the max's
/// density f_A F_B + f_B F_A (Simpson, centred on b's mean so that a small variance under a
/// large mean keeps its digits): independent of Clark's closed form.
Moments integrated_max(Moments a, Moments b) {
    const double sa = std::sqrt(a.var), sb = std::sqrt(b.var);
    const double c = b.mean;
    const double lo = std::min(a.mean - 14 * sa, b.mean - 14 * sb) - c;
    const double hi = std::max(a.mean + 14 * sa, b.mean + 14 * sb) - c;
    const int n = 400000;
    const double step = (hi - lo) / n;
    auto density = [&](double y) {
        const double x = y + c;
        const double za = (x - a.mean) / sa, zb = (x - b.mean) / sb;
        return kInvSqrt2Pi * std::exp(-0.5 * za * za) / sa * normal_cdf(zb) +
               kInvSqrt2Pi * std::exp(-0.5 * zb * zb) / sb * normal_cdf(za);
    };
    double m0 = 0, m1 = 0, m2 = 0;
    for (int i = 0; i <= n; ++i) {
        const double y = lo + i * step;
        const double w = (i == 0 || i == n) ? 1.0 : (i % 2 == 1 ? 4.0 : 2.0);
        const double f = w * density(y);
        m0 += f;
        m1 += f * y;
        m2 += f * y * y;
    }
    m0 *= step / 3;
    m1 *= step / 3;
    m2 *= step / 3;
    const double e = m1 / m0;
    return {c + e, m2 / m0 - e * e};
}

TEST(ClarkMax, MeanAndVarianceOfTwoNormalsAgainstIntegration) {
    struct Case {
        Moments a, b;
    };
    const std::vector<Case> cases = {
        {{1.0, 0.01}, {1.0, 0.01}},          // alpha 0
        {{1.0, 0.0025}, {0.9, 0.0004}},      // alpha 1.9
        {{0.7, 0.0025}, {1.0, 0.0004}},      // alpha -5.9
        {{3.0, 0.04}, {1.0, 0.0001}},        // alpha 9.98: the winner's moments
        {{1.0, 1e-4}, {1.125, 1e-4}},        // alpha -8.8: just inside the table
        {{1000.0, 1e-6}, {1000.001, 4e-6}},  // a small spread under a large mean
        {{2.0, 0.5}, {1.5, 0.02}},           // unequal spreads
    };
    for (const auto& k : cases) {
        const Moments got = clark_max(k.a, k.b);
        const Moments want = integrated_max(k.a, k.b);
        const double sd = std::sqrt(want.var);
        EXPECT_NEAR(got.mean, want.mean, 1e-9 * sd) << k.a.mean << " vs " << k.b.mean;
        EXPECT_NEAR(got.var, want.var, 1e-7 * want.var) << k.a.mean << " vs " << k.b.mean;
        // and symmetric in its arguments
        const Moments swapped = clark_max(k.b, k.a);
        EXPECT_NEAR(swapped.mean, got.mean, 1e-12 * sd);
        EXPECT_NEAR(swapped.var, got.var, 1e-9 * got.var);
    }
}

TEST(ClarkMax, MixedSegmentNeverFasterWhenEitherSideSlows) {
    // max(g A, R B) is nondecreasing in g and R (step_model.hpp): the table keeps it so on a
    // fine grid across the crossover, where both sides win with probability in (0, 1)
    const MixedSegment s{1.0, 0.0025, 1.1, 0.0009, 1};
    double last = 0;
    for (double g = 0.9; g <= 1.4; g += 1e-5) {
        const double m = ChunkCost::mixed_moments(s, g, 1.0).mean;
        EXPECT_GE(m, last) << g;
        last = m;
    }
    last = 0;
    for (double r = 0.8; r <= 1.3; r += 1e-5) {
        const double m = ChunkCost::mixed_moments(s, 1.0, r).mean;
        EXPECT_GE(m, last) << r;
        last = m;
    }
}

}  // namespace
}  // namespace prism::stochastic::detail
