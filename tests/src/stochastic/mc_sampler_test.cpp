// The sparse Monte Carlo sampler's parts (detail/persistent.hpp) against independent truths:
// geometric skipping of slow units against iid Bernoulli units, the lazily revealed group
// factors against the exact law of each group factor, and the whole sparse evaluator against
// the dense one on a point where both laws coincide.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "src/stochastic/detail/evaluators.hpp"
#include "src/stochastic/detail/persistent.hpp"
#include "src/stochastic/distribution.hpp"
#include "src/stochastic/random.hpp"
#include "tests/src/stochastic/ks.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace prism {
namespace {

using testing::ks_two_sample;

using stochastic::Stream;
using stochastic::StreamKind;
namespace detail = stochastic::detail;

/// Kolmogorov-Smirnov distance of the sample `x` to the CDF `f`.
double ks_distance(std::vector<double> x, const std::function<double(double)>& f) {
    std::sort(x.begin(), x.end());
    const auto n = static_cast<double>(x.size());
    double d = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double fx = f(x[i]);
        d = std::max({d, std::fabs(fx - static_cast<double>(i) / n),
                      std::fabs(fx - static_cast<double>(i + 1) / n)});
    }
    return d;
}

TEST(McSlowUnits, GeometricSkippingIsIidBernoulli) {
    // R realizations of U units: the count's mean within 5 standard errors of U q, its variance
    // within 5 standard errors (normal approximation, sd of s^2 ~ sigma^2 sqrt(2 / R)) of
    // U q (1 - q), every unit's frequency within 5 binomial standard errors of q, and adjacent
    // units both slow with frequency q^2 (independence; 5 standard errors)
    constexpr int kUnits = 500;
    constexpr int kReps = 20000;
    for (const double q : {0.01, 0.2, 0.7}) {
        SCOPED_TRACE(q);
        Stream s(3, 1, StreamKind::test, static_cast<std::uint32_t>(q * 1000));
        std::vector<std::int64_t> idx;
        std::vector<int> freq(kUnits, 0);
        double sum = 0, sum2 = 0, pairs = 0;
        std::vector<std::uint8_t> slow(kUnits);
        for (int k = 0; k < kReps; ++k) {
            const auto count = detail::draw_slow_units(q, kUnits, s, &idx);
            ASSERT_EQ(count, static_cast<std::int64_t>(idx.size()));
            std::fill(slow.begin(), slow.end(), std::uint8_t{0});
            for (size_t i = 0; i < idx.size(); ++i) {
                ASSERT_GE(idx[i], 0);
                ASSERT_LT(idx[i], kUnits);
                if (i > 0) {
                    ASSERT_GT(idx[i], idx[i - 1]);
                }
                slow[idx[i]] = 1;
                ++freq[idx[i]];
            }
            for (int u = 0; u + 1 < kUnits; ++u) pairs += slow[u] && slow[u + 1];
            sum += static_cast<double>(count);
            sum2 += static_cast<double>(count) * static_cast<double>(count);
        }
        const double mean = sum / kReps;
        const double var = (sum2 - sum * sum / kReps) / (kReps - 1);
        const double true_var = kUnits * q * (1 - q);
        EXPECT_NEAR(mean, kUnits * q, 5 * std::sqrt(true_var / kReps));
        EXPECT_NEAR(var, true_var, 5 * true_var * std::sqrt(2.0 / kReps));
        const double se = std::sqrt(q * (1 - q) / kReps);
        double worst = 0;
        for (const int f : freq) worst = std::max(worst, std::fabs(f / double(kReps) - q) / se);
        EXPECT_LT(worst, 5.0);
        const double pair_freq = pairs / (double(kReps) * (kUnits - 1));
        // the pairs of one realization are dependent: bound by the sum of their variances
        const double pair_se = std::sqrt(3 * q * q * (1 - q * q) / (double(kReps) * (kUnits - 1)));
        EXPECT_NEAR(pair_freq, q * q, 5 * pair_se);
    }
    Stream s(3, 2, StreamKind::test, 0);
    std::vector<std::int64_t> idx;
    EXPECT_EQ(detail::draw_slow_units(0.0, 100, s, &idx), 0);
    EXPECT_TRUE(idx.empty());
    EXPECT_EQ(detail::draw_slow_units(1.0, 100, s, &idx), 100);
    EXPECT_EQ(idx.size(), 100u);
    EXPECT_EQ(detail::draw_slow_units(0.5, 0, s, nullptr), 0);
}

TEST(McStream, BelowIsUniform) {
    // chi-square of 60,000 draws in 7 cells (and 3 cells) below the 0.1% critical value
    for (const std::uint32_t n : {7u, 3u}) {
        Stream s(5, 5, StreamKind::test, n);
        std::vector<double> c(n, 0.0);
        constexpr int kN = 60000;
        for (int i = 0; i < kN; ++i) {
            const auto x = s.below(n);
            ASSERT_LT(x, n);
            c[x] += 1;
        }
        double chi2 = 0;
        for (const double v : c) chi2 += (v - kN / double(n)) * (v - kN / double(n)) / (kN / n);
        EXPECT_LT(chi2, n == 7 ? 22.46 : 13.82);
    }
}

struct LazyCase {
    const char* name;
    PlacementKind placement;
    double slow_probability;
    bool per_node;
    int tp;
    std::int64_t machine_gpus = 0;  ///< the machine's GPUs (0: the job's)
};

TEST(McLazyGroupFactors, EveryRevealOrderGivesTheExactLawOfEachGroup) {
    // Per realization the factors are revealed in a varying order (some top order statistics,
    // some single groups, some replicas' top factors with the rest capped, then all). Each group
    // factor of the model is, independently, g = max over members of (slow member ? slow_factor :
    // 1) x spatial. Truths:
    //  * ordered, whole slow nodes = groups (tp 8): CDF (1 - q) H(y_0) + q H(y_8 / f), H = F_S^8;
    //  * ordered, slow GPUs (tp 4): CDF sum_k Binom(k; 4, q) F_S(y_k / f)^k F_S(y_k)^(4 - k);
    //    y_k = phi_k^-1(x), phi_k the effective factor of a group with k slow members;
    //  * variability-aware: against draw_group_factors (two-sample);
    //  * node-random on a machine with 8 spare nodes: the ordered law (each of the job's nodes is
    //    a random machine node, slow with probability q independently of the draw), for the lazy
    //    factors and for draw_group_factors, which draws the machine's slow nodes and the job's
    //    nodes among them as a scheduler would.
    // Pooled over the groups (independent in truth) and over realizations, KS below the 0.1%
    // critical value; and the max over all groups of one realization against its exact CDF.
    const LazyCase cases[] = {
        {"ordered_nodes", PlacementKind::ordered, 0.05, true, 8},
        {"ordered_gpus", PlacementKind::ordered, 0.03, false, 4},
        {"ordered_healthy", PlacementKind::ordered, 0.0, true, 8},
        {"aware_nodes", PlacementKind::variability_aware, 0.05, true, 8},
        {"random_nodes", PlacementKind::random, 0.05, true, 8, 8 * 4 * 16 + 64},
    };
    const auto hw = testing::test_hardware();
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        testing::ProfileShape shape;
        shape.tp = c.tp;
        shape.stages = 4;
        shape.dp = 16;
        shape.microbatches = 4;
        const auto profile = testing::make_profile(shape);
        DesignPoint point;
        point.tp = c.tp;
        point.pp = 4;
        point.dp = 16;
        point.placement.kind = c.placement;
        auto var = testing::prism_like(c.slow_probability);
        var.persistent.slow_per_node = c.per_node;
        ClusterSpec machine;
        machine.total_gpus = c.machine_gpus;
        const auto model = detail::build_step_model(profile, point, hw, machine, var);
        const auto layout = detail::make_layout(model, point, hw, machine);
        ASSERT_TRUE(detail::LazyGroupFactors::supports(model, layout));
        detail::LazyGroupFactors lg(model, layout);
        const int groups = 64;
        const int n = c.tp;
        const double q = c.slow_probability;
        const double f = model.slow_factor;
        const auto& fs = model.spatial;

        constexpr int kReps = 3000;
        Stream order(11, 0, StreamKind::test, 7);
        std::vector<double> pooled, maxima, dense_pooled, dense_maxima, dense;
        for (int k = 0; k < kReps; ++k) {
            lg.reset(Stream(21, 4, StreamKind::cluster, static_cast<std::uint32_t>(k)));
            const int steps = static_cast<int>(order.below(6));
            for (int st = 0; st < steps; ++st) {
                const auto what = order.below(3);
                if (what == 0) {
                    const double tau = lg.tau();
                    lg.extend(static_cast<int>(order.below(5)));
                    EXPECT_LE(lg.tau(), tau);
                } else if (what == 1) {
                    lg.reveal(static_cast<int>(order.below(groups)));
                } else {
                    // the groups of one replica (s * dp + rep), as the sampler tightens them
                    const auto rep = static_cast<std::int32_t>(order.below(16));
                    std::int32_t column[4];
                    for (int st2 = 0; st2 < 4; ++st2) column[st2] = st2 * 16 + rep;
                    lg.cap_top(column, 4, static_cast<int>(order.below(4)));
                }
            }
            std::vector<std::uint8_t> before(groups);
            std::vector<double> upper(groups);
            for (int i = 0; i < groups; ++i) {
                before[i] = lg.known(i);
                upper[i] = lg.upper(i);
            }
            lg.reveal_all();
            ASSERT_EQ(lg.unrevealed(), 0);
            double mx = 0;
            for (int i = 0; i < groups; ++i) {
                const double g = lg.g()[i];
                if (!before[i]) {
                    EXPECT_LE(g, upper[i]);  // the cap held for the unrevealed
                }
                pooled.push_back(g);
                mx = std::max(mx, g);
            }
            maxima.push_back(mx);
            if (c.placement != PlacementKind::ordered) {
                Stream ds(22, 4, StreamKind::cluster, static_cast<std::uint32_t>(k));
                detail::draw_group_factors(model, layout, ds, dense);
                dense_pooled.insert(dense_pooled.end(), dense.begin(), dense.end());
                dense_maxima.push_back(*std::max_element(dense.begin(), dense.end()));
            }
        }
        // a group's factor is phi_k(max G), k its slow members: max G <= phi_k^-1(x)
        ASSERT_TRUE(model.effective != nullptr);
        auto inv = [&](int k, double x) { return model.effective->inverse(k, x); };
        std::function<double(double)> cdf;
        if (c.per_node) {
            cdf = [&](double x) {
                return (1 - q) * fs.max_cdf(inv(0, x), n) + q * fs.max_cdf(inv(n, x) / f, n);
            };
        } else {
            cdf = [&](double x) {
                double s = 0, binom = 1;
                for (int k = 0; k <= n; ++k) {
                    if (k > 0) binom = binom * (n - k + 1) / k;
                    const double y = inv(k, x);
                    s += binom * std::pow(q, k) * std::pow(1 - q, n - k) *
                         std::pow(fs.cdf(y / f), k) * std::pow(fs.cdf(y), n - k);
                }
                return s;
            };
        }
        if (c.placement == PlacementKind::variability_aware) {
            const double crit_pool = 1.95 * std::sqrt(2.0 / pooled.size());
            EXPECT_LT(ks_two_sample(pooled, dense_pooled), crit_pool);
            EXPECT_LT(ks_two_sample(maxima, dense_maxima), 1.95 * std::sqrt(2.0 / kReps));
        } else {
            auto max_cdf = [&](double x) { return std::pow(cdf(x), groups); };
            EXPECT_LT(ks_distance(pooled, cdf), 1.95 / std::sqrt(double(pooled.size())));
            EXPECT_LT(ks_distance(maxima, max_cdf), 1.95 / std::sqrt(double(kReps)));
            if (c.placement == PlacementKind::random) {
                EXPECT_LT(ks_distance(dense_pooled, cdf),
                          1.95 / std::sqrt(double(dense_pooled.size())));
                EXPECT_LT(ks_distance(dense_maxima, max_cdf), 1.95 / std::sqrt(double(kReps)));
            }
        }
    }
}

TEST(McSparseEvaluator, MatchesTheDenseEvaluator) {
    // The same point (slow GPUs, not nodes, on a 4-stage pipeline) through the sparse sampler
    // and through the dense one (every group factor drawn by draw_group_factors, one bound per
    // replica): two samplers of one law. Two-sample KS of 2,000 steps each, below the 0.1%
    // critical value 1.95 sqrt(2 / 2000).
    const auto hw = testing::test_hardware();
    testing::ProfileShape shape;
    shape.tp = 4;
    shape.stages = 4;
    shape.dp = 32;
    shape.microbatches = 8;
    const auto profile = testing::make_profile(shape);
    auto var = testing::prism_like(0.01);
    var.persistent.slow_per_node = false;
    const DesignPoint point = testing::design_point(shape);
    const auto model = detail::build_step_model(profile, point, hw, {}, var);
    const auto layout = detail::make_layout(model, point, hw, {});
    ASSERT_TRUE(detail::LazyGroupFactors::supports(model, layout));

    const auto sparse = detail::monte_carlo(model, layout, 2000, 5, 1);
    const auto dense = detail::monte_carlo(model, layout, 2000, 5, 2, detail::McSampler::dense);

    EXPECT_LT(ks_two_sample(sparse, dense), 1.95 * std::sqrt(2.0 / 2000));
}

}  // namespace
}  // namespace prism
