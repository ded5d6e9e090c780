#include "src/stochastic/detail/kernels.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "src/stochastic/random.hpp"

namespace prism::stochastic::detail {
namespace {

TEST(Kernels, OneMinusExpMatchesExpm1ToRelative1em14) {
    // truth: -expm1 from libm (correctly rounded to ~1 ulp), over the whole range in use
    std::vector<double> t;
    for (double x = -45.0; x <= 0.0; x += 0.0007) t.push_back(x);
    for (double x = -0.02; x < 0.0; x += 1e-6) t.push_back(x);
    for (double x : {-1e-300, -1e-17, -1e-9, -0.01, -0.0100000001, -40.0, -40.0000001, 0.0}) {
        t.push_back(x);
    }
    std::vector<double> out(t.size());
    one_minus_exp_n(t.data(), static_cast<int>(t.size()), out.data());
    double worst = 0;
    for (size_t i = 0; i < t.size(); ++i) {
        const double want = t[i] < -40.0 ? 1.0 : -std::expm1(t[i]);
        if (want == 0) {
            EXPECT_EQ(out[i], 0.0);
            continue;
        }
        worst = std::max(worst, std::fabs(out[i] / want - 1.0));
    }
    EXPECT_LE(worst, 1e-14);
}

TEST(Kernels, ExpNonpositiveMatchesLibmToRelative1em15) {
    // truth: std::exp (libm, ~1 ulp)
    std::vector<double> x;
    for (double v = -720.0; v <= 0.0; v += 0.013) x.push_back(v);
    for (double v : {0.0, -1e-300, -1e-12, -0.5, -708.0, -708.0001, -745.0}) x.push_back(v);
    std::vector<double> out(x.size());
    exp_nonpositive_n(x.data(), static_cast<int>(x.size()), out.data());
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        if (x[i] < -708.0) {
            EXPECT_EQ(out[i], 0.0) << x[i];
            continue;
        }
        worst = std::max(worst, std::fabs(out[i] / std::exp(x[i]) - 1.0));
    }
    EXPECT_LE(worst, 1e-15);
}

TEST(Kernels, InterpAffineMatchesPointwiseLinearInterpolation) {
    Stream rng(1, 2, StreamKind::test, 0);
    const int points = 101;
    std::vector<double> y(points);
    for (auto& v : y) v = -rng.uniform() * 10;
    const double lo = 0.5, inv_h = 40.0, hi = lo + (points - 1) / inv_h;
    const double g0 = 0.3, dg = 0.0013;
    const int n = 3000;  // g from below lo to above hi
    std::vector<double> out(n);
    interp_affine(y.data(), points, lo, hi, inv_h, g0, dg, n, out.data());
    for (int j = 0; j < n; ++j) {
        const double g = g0 + dg * j;
        double want;
        if (!(g > lo)) {
            want = -1e300;
        } else if (g >= hi) {
            want = y.back();
        } else {
            const double u = (g - lo) * inv_h;
            const int i = std::min(static_cast<int>(u), points - 2);
            want = y[i] + (u - i) * (y[i + 1] - y[i]);
        }
        EXPECT_EQ(out[j], want) << j;
    }
}

TEST(Kernels, BandedDotMatchesNaiveSums) {
    Stream rng(3, 4, StreamKind::test, 0);
    const int n = 50, m = 200;
    std::vector<double> a(m), b(m + n), base(n), out(n);
    std::vector<int> lo(n), hi(n), off(n);
    for (auto& v : a) v = rng.uniform();
    for (auto& v : b) v = rng.uniform();
    for (int i = 0; i < n; ++i) {
        lo[i] = static_cast<int>(rng.uniform() * 100);
        hi[i] = lo[i] + static_cast<int>(rng.uniform() * 37) - 3;  // some empty ranges
        off[i] = static_cast<int>(rng.uniform() * n);
        base[i] = rng.uniform();
    }
    banded_dot(n, lo.data(), hi.data(), off.data(), a.data(), b.data(), base.data(), out.data());
    for (int i = 0; i < n; ++i) {
        double want = 0;
        for (int k = lo[i]; k < hi[i]; ++k) want += a[k] * b[off[i] + k];
        EXPECT_NEAR(out[i], base[i] + want, 1e-13 * (1 + std::fabs(want))) << i;
    }
}

}  // namespace
}  // namespace prism::stochastic::detail
