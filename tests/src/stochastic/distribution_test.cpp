#include "src/stochastic/distribution.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "src/common/error.hpp"
#include "src/stochastic/random.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace prism::stochastic {
namespace {

using testing::dist;

constexpr double kPi = 3.14159265358979323846;

TEST(NormalQuantile, InvertsTheErfcCdfDownToTinyTails) {
    // truth: the CDF from std::erfc, independent of AS241
    for (double p : {1e-300, 1e-100, 1e-20, 1e-9, 1e-3, 0.02, 0.3, 0.5, 0.7, 0.98, 0.999999}) {
        const double z = normal_quantile(p);

        const double back = p < 0.5 ? normal_cdf(z) : 1.0 - normal_sf(z);

        EXPECT_NEAR(back / p, 1.0, 1e-12) << p;
    }
}

TEST(IncompleteGamma, MatchesClosedFormsForIntegerShapes) {
    for (double x : {0.01, 0.5, 1.0, 3.0, 10.0, 40.0}) {
        EXPECT_NEAR(gamma_p(1.0, x), -std::expm1(-x), 1e-14) << x;
        EXPECT_NEAR(gamma_q(2.0, x) / (std::exp(-x) * (1 + x)), 1.0, 1e-12) << x;
    }
}

TEST(Distribution, MomentsMatchTheSpecification) {
    for (const auto kind : {DistKind::lognormal, DistKind::gamma}) {
        const Distribution d(dist(kind, 0.2, 1.5));

        EXPECT_NEAR(d.mean(), 1.5, 1e-12);
        EXPECT_NEAR(std::sqrt(d.variance()) / d.mean(), 0.2, 1e-12);
    }
    // truncated normal with cv 0.5: mean mu + sigma phi(a) / (1 - Phi(a)), a = -2
    const Distribution n(dist(DistKind::normal, 0.5, 1.0));
    const double lam =
        std::exp(-2.0) / std::sqrt(2 * kPi) / (1 - 0.5 * std::erfc(2 / std::sqrt(2.0)));
    EXPECT_NEAR(n.mean(), 1.0 + 0.5 * lam, 1e-12);
}

TEST(Distribution, QuantileInvertsCdfForEveryKind) {
    DistributionSpec mix;
    mix.kind = DistKind::mixture;
    mix.components = {{0.99, dist(DistKind::lognormal, 0.02)},
                      {0.01, dist(DistKind::constant, 0, 3.0)}};
    DistributionSpec emp;
    emp.kind = DistKind::empirical;
    emp.samples = {0.9, 1.1, 1.0, 1.3};
    for (const auto& spec : {dist(DistKind::normal, 0.1), dist(DistKind::lognormal, 0.3),
                             dist(DistKind::gamma, 0.5)}) {
        const Distribution d(spec);
        for (double u : {1e-12, 0.001, 0.2, 0.5, 0.9, 0.995}) {
            const double x = d.quantile(u);

            EXPECT_NEAR(d.cdf(x) / u, 1.0, 1e-9) << u;
        }
        for (double q : {1e-14, 1e-6, 0.01}) {
            EXPECT_NEAR(d.sf(d.quantile_upper(q)) / q, 1.0, 1e-6) << q;
        }
    }
    // with an atom (the constant component) the quantile is the generalized inverse
    const Distribution m(mix);
    for (double u : {0.001, 0.5, 0.9895, 0.995}) {
        const double x = m.quantile(u);

        EXPECT_GE(m.cdf(x), u - 1e-12);
        EXPECT_LE(m.cdf(x * (1 - 1e-9)), u + 1e-12);
    }
    EXPECT_EQ(m.quantile(0.995), 3.0);
    const Distribution e(emp);
    EXPECT_EQ(e.quantile(0.25), 0.9);
    EXPECT_EQ(e.quantile(0.26), 1.0);
    EXPECT_DOUBLE_EQ(e.mean(), 1.075);
}

TEST(Distribution, QuantileOfNormalScoreHasCdfPhiOfTheScore) {
    // truth: the CDF at the returned point equals Phi(z) (upper tail compared for z > 0)
    for (const auto& spec :
         {dist(DistKind::normal, 0.1), dist(DistKind::normal, 0.6), dist(DistKind::lognormal, 0.05),
          dist(DistKind::lognormal, 0.8), dist(DistKind::gamma, 0.3)}) {
        const Distribution d(spec);
        for (double z : {-6.0, -2.5, -0.3, 0.0, 0.7, 3.0, 6.0}) {
            const double x = d.quantile_of_score(z);
            if (z <= 0) {
                EXPECT_NEAR(d.cdf(x) / normal_cdf(z), 1.0, 1e-8) << z;
            } else {
                EXPECT_NEAR(d.sf(x) / normal_sf(z), 1.0, 1e-6) << z;
            }
        }
    }
    EXPECT_EQ(Distribution(dist(DistKind::constant, 0, 2.5)).quantile_of_score(1.0), 2.5);
}

TEST(Distribution, PartialMeanOfScoresMatchesQuadratureAndSumsToTheMean) {
    // truth: a 40,000-step midpoint rule of F^-1(Phi(z)) phi(z) over (z1, z2), using the plain
    // quantile; over the whole line the partial means add up to the mean
    for (const auto& spec : {dist(DistKind::normal, 0.1), dist(DistKind::lognormal, 0.05),
                             dist(DistKind::lognormal, 0.6), dist(DistKind::gamma, 0.3)}) {
        const Distribution d(spec);
        for (const auto& [z1, z2] : {std::pair{-1.0, -0.875}, std::pair{1.5, 1.625},
                                     std::pair{-8.0, 8.0}, std::pair{0.3, 2.9}}) {
            const int n = 40000;
            const double h = (z2 - z1) / n;
            double want = 0;
            for (int i = 0; i < n; ++i) {
                const double z = z1 + (i + 0.5) * h;
                want += d.quantile(normal_cdf(z)) * std::exp(-0.5 * z * z) / std::sqrt(2 * kPi) * h;
            }
            EXPECT_NEAR(d.partial_mean_of_scores(z1, z2), want, 1e-7 + 1e-6 * want) << z1;
        }
        const double whole = d.partial_mean_of_scores(-HUGE_VAL, -6.0) +
                             d.partial_mean_of_scores(-6.0, 6.0) +
                             d.partial_mean_of_scores(6.0, HUGE_VAL);
        EXPECT_NEAR(whole, d.mean(), 1e-6);
    }
}

TEST(Distribution, MixtureMeanIsTheWeightedMean) {
    DistributionSpec mix;
    mix.kind = DistKind::mixture;
    mix.components = {{0.99, dist(DistKind::lognormal, 0.02)},
                      {0.01, dist(DistKind::constant, 0, 3.0)}};

    const Distribution d(mix);

    EXPECT_NEAR(d.mean(), 0.99 + 0.03, 1e-12);
    EXPECT_NEAR(d.variance(), 0.99 * 0.0004 + 0.99 * 0.01 * 4.0, 1e-12);
}

TEST(Distribution, RejectsNegativeCvWithItsValue) {
    try {
        Distribution d(dist(DistKind::lognormal, -0.1));
        FAIL() << "no throw";
    } catch (const ConfigError& e) {
        EXPECT_STREQ(e.what(), "lognormal distribution: cv must be >= 0, got -0.1");
    }
}

TEST(MaxOfIid, QuantileSolvesFToTheN) {
    // F(x)^n = p with F from erfc (normal) or log + erfc (lognormal), in log space
    for (const auto kind : {DistKind::normal, DistKind::lognormal}) {
        const Distribution d(dist(kind, 0.1));
        for (double n : {1.0, 8.0, 1024.0, 65536.0}) {
            for (double p : {0.01, 0.5, 0.99, 0.999}) {
                const double x = d.max_quantile(p, n);

                const double log_f = std::log1p(-d.sf(x));

                EXPECT_NEAR(n * log_f, std::log(p), 1e-9 * n + 1e-12) << n << " " << p;
            }
        }
    }
}

TEST(MaxOfIid, MomentsMatchClosedFormsForTwoAndThreeNormals) {
    // E max of 2 std normals = 1/sqrt(pi), Var = 1 - 1/pi; E max of 3 = 3/(2 sqrt(pi))
    const double sigma = 0.01;  // truncation at 0 is 100 sigma away
    const Distribution d(dist(DistKind::normal, sigma));

    const auto m2 = d.max_moments(2);
    const auto m3 = d.max_moments(3);

    EXPECT_NEAR((m2.mean - 1) / sigma, 1 / std::sqrt(kPi), 1e-6);
    EXPECT_NEAR(m2.var / (sigma * sigma), 1 - 1 / kPi, 1e-5);
    EXPECT_NEAR((m3.mean - 1) / sigma, 1.5 / std::sqrt(kPi), 1e-6);
}

TEST(MaxOfIid, MomentsMatchBruteForceForLognormalMaxOfEight) {
    // 200,000 brute-force maxima of 8: standard error of the mean ~ sd / 447, so 5e-4 relative
    // on sd ~ 0.05 is about 4.5 standard errors
    const Distribution d(dist(DistKind::lognormal, 0.1));
    Stream s(1, 2, StreamKind::test, 0);
    double sum = 0, sum2 = 0;
    constexpr int kN = 200000;
    for (int i = 0; i < kN; ++i) {
        double m = 0;
        for (int j = 0; j < 8; ++j) m = std::max(m, d.sample(s.uniform()));
        sum += m;
        sum2 += m * m;
    }
    const double mean = sum / kN;
    const double var = sum2 / kN - mean * mean;

    const auto mm = d.max_moments(8);

    EXPECT_NEAR(mm.mean, mean, 4.5 * std::sqrt(var / kN));
    EXPECT_NEAR(std::sqrt(mm.var), std::sqrt(var), 0.02 * std::sqrt(var));
}

TEST(Stream, IsAPureFunctionOfSeedPointAndId) {
    Stream a(7, 123456789012ULL, StreamKind::sample, 5);
    Stream b(7, 123456789012ULL, StreamKind::sample, 5);
    Stream c(7, 123456789012ULL, StreamKind::sample, 6);
    Stream d(8, 123456789012ULL, StreamKind::sample, 5);

    for (int i = 0; i < 100; ++i) {
        const double x = a.uniform();
        EXPECT_EQ(x, b.uniform());
        EXPECT_NE(x, c.uniform());
        EXPECT_NE(x, d.uniform());
        EXPECT_GT(x, 0.0);
        EXPECT_LT(x, 1.0);
    }
}

}  // namespace
}  // namespace prism::stochastic

namespace prism::stochastic {
namespace {

TEST(Stream, NormalDrawsFollowTheStandardNormal) {
    // 400,000 draws: KS distance to Phi (erfc) below 1.95 / sqrt(n) (0.1% level), mean within
    // 4 / sqrt(n), variance within 4 sqrt(2 / n), tail fraction beyond 3.442 (the ziggurat's
    // base-layer cut) within 4 binomial standard errors
    // both generators: normal() (53-bit abscissa) and normal32() (one 32-bit word)
    for (const bool one_word : {false, true}) {
        SCOPED_TRACE(one_word ? "normal32" : "normal");
        constexpr int kN = 400000;
        Stream s(9, 9, StreamKind::test, 1);
        std::vector<double> x(kN);
        for (auto& v : x) v = one_word ? s.normal32() : s.normal();
        std::sort(x.begin(), x.end());
        double ks = 0, sum = 0, sum2 = 0;
        int tail = 0;
        for (int i = 0; i < kN; ++i) {
            const double f = normal_cdf(x[i]);
            ks = std::max({ks, std::fabs(f - double(i) / kN), std::fabs(f - double(i + 1) / kN)});
            sum += x[i];
            sum2 += x[i] * x[i];
            tail += std::fabs(x[i]) > 3.442619855899;
        }
        const double p_tail = 2 * normal_sf(3.442619855899);

        EXPECT_LT(ks, 1.95 / std::sqrt(double(kN)));
        EXPECT_NEAR(sum / kN, 0.0, 4 / std::sqrt(double(kN)));
        EXPECT_NEAR(sum2 / kN, 1.0, 4 * std::sqrt(2.0 / kN));
        EXPECT_NEAR(double(tail) / kN, p_tail, 4 * std::sqrt(p_tail / kN));
    }
}

}  // namespace
}  // namespace prism::stochastic
