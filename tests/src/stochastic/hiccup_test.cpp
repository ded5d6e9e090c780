#include "src/stochastic/detail/hiccup.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "src/stochastic/step_distribution.hpp"
#include "tests/src/stochastic/ks.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace prism::stochastic {
namespace {

using detail::HiccupLaw;
using prism::testing::ProfileShape;

HiccupSpec hiccup(double q, double median_s, double sigma) {
    HiccupSpec h;
    h.probability = q;
    h.delay_median_s = median_s;
    h.delay_sigma = sigma;
    return h;
}

double lognormal_cdf(double x, double median, double sigma) {
    return 0.5 * std::erfc(-std::log(x / median) / (sigma * std::sqrt(2.0)));
}

// The max over n nodes, each stalled with probability q: by the binomial number k of stalled
// nodes, P(H <= h) = sum_k C(n, k) q^k (1 - q)^(n - k) F_D(h)^k (an independent form of the
// product (1 - q + q F_D)^n the law uses). Exact to rounding: tolerance 1e-12.
TEST(HiccupLaw, CdfIsTheBinomialMixtureOfTheMaxOverStalledNodes) {
    const int n = 16;
    const double q = 0.03, median = 0.2, sigma = 0.8;
    const HiccupLaw law(hiccup(q, median, sigma), n);

    for (double h : {0.01, 0.1, 0.2, 0.5, 2.0, 10.0}) {
        double expected = 0, binom = 1;  // C(n, k)
        for (int k = 0; k <= n; ++k) {
            expected += binom * std::pow(q, k) * std::pow(1 - q, n - k) *
                        std::pow(lognormal_cdf(h, median, sigma), k);
            binom = binom * (n - k) / (k + 1);
        }
        EXPECT_NEAR(law.cdf(h), expected, 1e-12) << h;
    }
    EXPECT_NEAR(law.p0(), std::pow(1 - q, n), 1e-15);
    EXPECT_DOUBLE_EQ(law.cdf(-1), 0);
}

HiccupSpec pareto(double q, double median_s, double alpha) {
    HiccupSpec h;
    h.probability = q;
    h.delay_median_s = median_s;
    h.family = HiccupFamily::pareto;
    h.delay_tail = alpha;
    return h;
}

// P(D <= d) of a Pareto tail with median m and shape alpha, written out: d_m = m / 2^(1/alpha).
double pareto_cdf(double d, double median, double alpha) {
    const double scale = median / std::pow(2.0, 1 / alpha);
    return d <= scale ? 0.0 : 1 - std::pow(scale / d, alpha);
}

// The same binomial mixture with Pareto delays; the median is the median.
TEST(HiccupLaw, ParetoCdfIsTheBinomialMixtureAndItsMedianTheMedian) {
    const int n = 16;
    const double q = 0.03, median = 0.2, alpha = 2.5;
    const HiccupLaw law(pareto(q, median, alpha), n);

    for (double h : {0.1, 0.15, 0.2, 0.5, 2.0, 10.0}) {
        double expected = 0, binom = 1;
        for (int k = 0; k <= n; ++k) {
            expected += binom * std::pow(q, k) * std::pow(1 - q, n - k) *
                        std::pow(pareto_cdf(h, median, alpha), k);
            binom = binom * (n - k) / (k + 1);
        }
        EXPECT_NEAR(law.cdf(h), expected, 1e-12) << h;
    }
    const HiccupLaw one(pareto(1.0, median, alpha), 1);  // every step one delay: H = D
    EXPECT_NEAR(one.quantile(0.5), median, 1e-12);
    for (double u : {0.9, 0.99, 0.999999}) {
        EXPECT_NEAR(law.cdf(law.quantile(u)), u, 1e-10) << u;
    }
}

// Mean and variance of the max of Pareto delays against brute force (inverse-CDF draws with
// std::mt19937_64), 400,000 steps; alpha 3 keeps the sample variance's own spread moderate
// (its fourth moment is infinite: tolerance 10% on the variance, 5 standard errors on the mean).
TEST(HiccupLaw, ParetoMomentsMatchBruteForceDrawsOfEveryNode) {
    const int n = 32;
    const double q = 0.02, median = 0.1, alpha = 3.0;
    const HiccupLaw law(pareto(q, median, alpha), n);
    const double scale = median / std::pow(2.0, 1 / alpha);
    std::mt19937_64 rng(11);
    std::bernoulli_distribution stall(q);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const int steps = 400000;
    double s1 = 0, s2 = 0;

    for (int k = 0; k < steps; ++k) {
        double h = 0;
        for (int i = 0; i < n; ++i) {
            if (stall(rng)) h = std::max(h, scale * std::pow(1 - unit(rng), -1 / alpha));
        }
        s1 += h;
        s2 += h * h;
    }

    const double mean = s1 / steps, var = s2 / steps - mean * mean;
    EXPECT_NEAR(law.mean(), mean, 5 * std::sqrt(var / steps));
    EXPECT_NEAR(law.var(), var, 0.1 * var);
    // the closed form of one node's moments (n = 1, q = 1): alpha d_m / (alpha - 1) and
    // alpha d_m^2 / (alpha - 2) - mean^2
    const HiccupLaw one(pareto(1.0, median, alpha), 1);
    EXPECT_NEAR(one.mean(), alpha * scale / (alpha - 1), 1e-6 * scale);
    EXPECT_NEAR(one.var(),
                alpha * scale * scale / (alpha - 2) - std::pow(alpha * scale / (alpha - 1), 2),
                1e-6 * scale * scale);
}

TEST(HiccupLaw, QuantileInvertsTheCdfAndIsZeroOnTheAtom) {
    const HiccupLaw law(hiccup(0.01, 0.05, 1.2), 64);

    for (double u : {0.6, 0.9, 0.99, 0.999999}) {
        ASSERT_GT(u, law.p0());
        EXPECT_NEAR(law.cdf(law.quantile(u)), u, 1e-10) << u;
    }
    EXPECT_EQ(law.quantile(0.5 * law.p0()), 0.0);
}

// Mean and variance against brute force: n Bernoulli(q) nodes with lognormal delays, the max
// per step, 400,000 steps (std::mt19937_64, independent of the evaluators' Philox streams).
// Tolerance 5 standard errors of the brute-force means.
TEST(HiccupLaw, MomentsMatchBruteForceDrawsOfEveryNode) {
    const int n = 32;
    const double q = 0.02, median = 0.1, sigma = 0.7;
    const HiccupLaw law(hiccup(q, median, sigma), n);
    std::mt19937_64 rng(7);
    std::bernoulli_distribution stall(q);
    std::lognormal_distribution<double> delay(std::log(median), sigma);
    const int steps = 400000;
    double s1 = 0, s2 = 0;

    for (int k = 0; k < steps; ++k) {
        double h = 0;
        for (int i = 0; i < n; ++i) {
            if (stall(rng)) h = std::max(h, delay(rng));
        }
        s1 += h;
        s2 += h * h;
    }

    const double mean = s1 / steps, var = s2 / steps - mean * mean;
    EXPECT_NEAR(law.mean(), mean, 5 * std::sqrt(var / steps));
    EXPECT_NEAR(law.var(), var, 0.03 * var);  // sd of a sample variance of this skew: ~1%
}

// A pipeline of 4 replicas (tp 8, pp 4: 128 GPUs on 16 nodes), the PRISM-like transient noise
// scaled down so that the body is narrow (as measured steps are) and hiccups of q = 0.5% per
// node-step (7.7% of steps hit), median delay 5% of the step, sigma 0.6.
struct HiccupCase {
    StepProfile profile;
    DesignPoint point;
    HardwareSpec hardware = prism::testing::test_hardware();
    ClusterSpec cluster;
    VariabilitySpec spec;
};

HiccupCase pipeline_case(bool with_regime) {
    ProfileShape shape;
    shape.stages = 4;
    shape.microbatches = 8;
    shape.dp = 4;
    HiccupCase c;
    c.profile = prism::testing::make_profile(shape);
    c.point = prism::testing::design_point(shape);
    c.spec = prism::testing::prism_like();
    c.spec.persistent.spatial = DistributionSpec{};
    for (auto& d : c.spec.transient) d.cv *= 0.2;
    if (!with_regime) c.spec.comm_regime = DistributionSpec{};
    c.spec.hiccup = hiccup(0.005, 0.05 * deterministic_step_time(c.profile), 0.6);
    return c;
}

// The analytic evaluator's CDF with hiccups against 20,000 Monte Carlo steps (the reference:
// exact draws of every factor and of H). The two-sample-free KS of n = 20,000 draws against the
// exact law is below 0.0115 with 99% probability; the evaluators' budget without hiccups is
// 0.013 (README, the accuracy matrix): tolerance 0.015.
TEST(Hiccups, AnalyticMatchesMonteCarloWithHiccupsOn) {
    for (const bool regime : {false, true}) {
        const HiccupCase c = pipeline_case(regime);
        std::vector<double> draws =
            monte_carlo_samples(c.profile, c.point, c.hardware, c.cluster, c.spec, 20000, 5, 0);
        std::sort(draws.begin(), draws.end());

        const std::vector<double> cdf =
            analytic_cdf(c.profile, c.point, c.hardware, c.cluster, c.spec, draws);

        const double ks = prism::testing::ks_against_cdf(cdf);
        EXPECT_LT(ks, 0.015) << "regime " << regime;
        // the hit steps sit in the upper 8%: p95 and p99 are hiccup quantiles
        EvaluationSpec analytic;
        analytic.sensitivity = false;
        EvaluationSpec mc = analytic;
        mc.method = Method::montecarlo;
        mc.samples = 20000;
        const StepDistribution a =
            step_distribution(c.profile, c.point, c.hardware, c.cluster, c.spec, analytic, 5, 0);
        const StepDistribution m =
            step_distribution(c.profile, c.point, c.hardware, c.cluster, c.spec, mc, 5, 0);
        EXPECT_NEAR(a.mean_s / m.mean_s, 1.0, 0.002) << regime;
        EXPECT_NEAR(a.p95_s / m.p95_s, 1.0, 0.005) << regime;
        EXPECT_NEAR(a.p99_s / m.p99_s, 1.0, 0.01) << regime;
    }
}

// The same with a Pareto tail (alpha 2.5, the same median): the analytic CDF against 20,000
// Monte Carlo steps, tolerance 0.015 as above.
TEST(Hiccups, AnalyticMatchesMonteCarloWithAParetoTail) {
    HiccupCase c = pipeline_case(true);
    c.spec.hiccup = pareto(0.005, c.spec.hiccup.delay_median_s, 2.5);
    std::vector<double> draws =
        monte_carlo_samples(c.profile, c.point, c.hardware, c.cluster, c.spec, 20000, 6, 0);
    std::sort(draws.begin(), draws.end());

    const std::vector<double> cdf =
        analytic_cdf(c.profile, c.point, c.hardware, c.cluster, c.spec, draws);

    const double ks = prism::testing::ks_against_cdf(cdf);
    EXPECT_LT(ks, 0.015);
}

// With every other factor constant the step is the deterministic step plus H, whose quantile
// has the closed form G^-1(p) = median exp(sigma z), 1 - q Phi(-z) = p^(1/n) (z by bisection
// here, independent of the law's inverse).
TEST(Hiccups, ConstantFactorsGiveTheDeterministicStepPlusTheLargestDelay) {
    HiccupCase c = pipeline_case(false);
    VariabilitySpec only;
    only.hiccup = hiccup(0.02, 0.3, 0.5);  // 16 nodes: P(no hiccup) = 0.72
    EvaluationSpec e;
    e.sensitivity = false;
    const double det = deterministic_step_time(c.profile);

    const StepDistribution d =
        step_distribution(c.profile, c.point, c.hardware, c.cluster, only, e, 1, 0);

    const auto closed_form = [&](double p) {
        const double target = 1 - std::pow(p, 1.0 / 16);  // q P(D > h)
        double lo = -40, hi = 40;
        for (int i = 0; i < 200; ++i) {
            const double z = 0.5 * (lo + hi);
            (0.02 * 0.5 * std::erfc(z / std::sqrt(2.0)) > target ? lo : hi) = z;
        }
        return 0.3 * std::exp(0.5 * 0.5 * (lo + hi));
    };
    EXPECT_NEAR(d.p50_s, det, 1e-9 * det);  // the atom at 0 holds 72%
    EXPECT_NEAR(d.p95_s, det + closed_form(0.95), 1e-9 * det);
    EXPECT_NEAR(d.p99_s, det + closed_form(0.99), 1e-9 * det);
    EXPECT_GT(d.mean_s, det);
}

// With the hiccup probability at 0 (its delay law set) every result is the one without
// hiccups, bit for bit, in both evaluators.
TEST(Hiccups, ZeroProbabilityChangesNothing) {
    const HiccupCase c = pipeline_case(true);
    VariabilitySpec off = c.spec;
    off.hiccup.probability = 0;
    VariabilitySpec none = c.spec;
    none.hiccup = HiccupSpec{};
    for (const Method method : {Method::analytic, Method::montecarlo}) {
        EvaluationSpec e;
        e.method = method;
        e.samples = 500;
        e.sensitivity = false;

        const StepDistribution a =
            step_distribution(c.profile, c.point, c.hardware, c.cluster, off, e, 9, 3);
        const StepDistribution b =
            step_distribution(c.profile, c.point, c.hardware, c.cluster, none, e, 9, 3);

        EXPECT_EQ(a.mean_s, b.mean_s);
        EXPECT_EQ(a.std_s, b.std_s);
        EXPECT_EQ(a.p99_s, b.p99_s);
        EXPECT_EQ(a.cluster_mean_s, b.cluster_mean_s);
    }
}

// The chance a step is hit grows as 1 - (1 - q)^nodes: the same q on 4x the nodes (dp 16
// instead of 4) raises P(step > 1.02 x its median) accordingly, in both evaluators.
TEST(Hiccups, TheHitStepsGrowWithTheNodeCount) {
    const HiccupCase small = pipeline_case(false);
    HiccupCase large = small;
    ProfileShape shape;
    shape.stages = 4;
    shape.microbatches = 8;
    shape.dp = 16;
    large.profile = prism::testing::make_profile(shape);
    large.point = prism::testing::design_point(shape);
    const double q = small.spec.hiccup.probability;

    const auto hit_fraction = [](const HiccupCase& c) {
        std::vector<double> x =
            monte_carlo_samples(c.profile, c.point, c.hardware, c.cluster, c.spec, 20000, 3, 0);
        std::vector<double> sorted = x;
        std::sort(sorted.begin(), sorted.end());
        const double median = sorted[sorted.size() / 2];
        // the body's spread is ~0.3%; a hiccup adds 5% x lognormal(0.6): above 1.5% but for
        // P(D < 0.3 median) = Phi(ln 0.3 / 0.6) = 2.2% of them
        return static_cast<double>(std::count_if(x.begin(), x.end(),
                                                 [&](double t) { return t > 1.015 * median; })) /
               static_cast<double>(x.size());
    };

    const double f16 = hit_fraction(small), f64 = hit_fraction(large);

    // expected: (1 - (1 - q)^n) x 0.978, sd of a fraction of 20,000 <= 0.0035: tolerance 0.012
    EXPECT_NEAR(f16, (1 - std::pow(1 - q, 16)) * 0.978, 0.012);
    EXPECT_NEAR(f64, (1 - std::pow(1 - q, 64)) * 0.978, 0.012);
}

// A periodic event of 30% of the step every 100 steps (issue 35, item 2): it adds 0.3 x det /
// 100 to the mean, leaves p95 in the body (1% of the steps) and moves p99.9 by its duration;
// both evaluators agree (KS against 20,000 Monte Carlo steps below 0.015, as above).
TEST(PeriodicEvents, AOneInAHundredEventMovesTheMeanAndTheTopQuantilesNotP95) {
    HiccupCase c = pipeline_case(false);
    c.spec.hiccup = HiccupSpec{};
    VariabilitySpec with = c.spec;
    const double det = deterministic_step_time(c.profile);
    with.periodic = {{"gc", 100, 0.3 * det}};
    EvaluationSpec e;
    e.sensitivity = false;

    const StepDistribution base =
        step_distribution(c.profile, c.point, c.hardware, c.cluster, c.spec, e, 5, 0);
    const StepDistribution gc =
        step_distribution(c.profile, c.point, c.hardware, c.cluster, with, e, 5, 0);

    EXPECT_NEAR(gc.mean_s - base.mean_s, 0.3 * det / 100, 1e-9 * det);
    // p95 becomes the body's quantile at 0.95 / 0.99: it moves within the body's spread, by
    // less than 1% of the event's duration
    EXPECT_GE(gc.p95_s, base.p95_s);
    EXPECT_LT(gc.p95_s - base.p95_s, 0.01 * 0.3 * det);
    EXPECT_NEAR(gc.p999_s - base.p999_s, 0.3 * det, 0.01 * det);
    // the run model reads the cluster strata: they carry the event's cost
    double strata_mean = 0;
    for (double m : gc.cluster_mean_s) strata_mean += m / gc.cluster_mean_s.size();
    EXPECT_NEAR(strata_mean, gc.mean_s, 1e-9 * det);
    EXPECT_NEAR(gc.std_s * gc.std_s - base.std_s * base.std_s,
                0.01 * 0.99 * (0.3 * det) * (0.3 * det), 1e-6 * det * det);

    std::vector<double> draws =
        monte_carlo_samples(c.profile, c.point, c.hardware, c.cluster, with, 20000, 5, 0);
    std::sort(draws.begin(), draws.end());
    const std::vector<double> cdf =
        analytic_cdf(c.profile, c.point, c.hardware, c.cluster, with, draws);
    const double ks = prism::testing::ks_against_cdf(cdf);
    EXPECT_LT(ks, 0.015);
}

// Two events share a step every lcm of their periods: gc every 4 and logging every 6 steps
// take 1/4 + 1/6 - 1/12 of the steps; the law's shares over one common period are exact.
TEST(PeriodicEvents, EventsSharingAStepAddOverTheirCommonPeriod) {
    const HiccupLaw law(HiccupSpec{}, 16, {{"gc", 4, 1.0}, {"log", 6, 0.5}});

    EXPECT_NEAR(law.mean(), 1.0 / 4 + 0.5 / 6, 1e-12);
    EXPECT_NEAR(law.cdf(0.0), 1 - (1.0 / 4 + 1.0 / 6 - 1.0 / 12), 1e-12);
    EXPECT_NEAR(law.cdf(0.75), 1 - 1.0 / 4, 1e-12);  // only both (1.5) or gc (1.0) above
    EXPECT_NEAR(law.cdf(1.2), 1 - 1.0 / 12, 1e-12);
}

}  // namespace
}  // namespace prism::stochastic
