// The busiest EP rank's load law (src/stochastic/routing.hpp) against brute force: exact
// multinomial draws of the token copies over the experts (sequential conditional binomials).

#include "src/stochastic/routing.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace {

/// Maxima over ranks of `draws` multinomial routings of `copies` copies with probabilities p.
std::vector<int> brute_force_maxima(const std::vector<double>& p, int ep, int copies, int draws,
                                    std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    double total = 0;
    for (double x : p) total += x;
    const std::size_t per = p.size() / std::size_t(ep);
    std::vector<int> out;
    for (int d = 0; d < draws; ++d) {
        int left = copies;
        double mass = 1.0;
        std::vector<int> rank(std::size_t(ep), 0);
        for (std::size_t e = 0; e < p.size() && left > 0; ++e) {
            const double q = std::min(1.0, (p[e] / total) / mass);
            std::binomial_distribution<int> bin(left, q);
            const int n = e + 1 == p.size() ? left : bin(rng);
            rank[e / per] += n;
            left -= n;
            mass -= p[e] / total;
        }
        out.push_back(*std::max_element(rank.begin(), rank.end()));
    }
    return out;
}

/// Kolmogorov-Smirnov distance between the draws' empirical CDF and the analytic law, over the
/// integer loads.
double ks_distance(std::vector<int> maxima, int copies, const std::vector<double>& rank_p) {
    std::sort(maxima.begin(), maxima.end());
    double d = 0;
    const double n = double(maxima.size());
    for (int x = maxima.front() - 1; x <= maxima.back(); ++x) {
        const double emp =
            double(std::upper_bound(maxima.begin(), maxima.end(), x) - maxima.begin()) / n;
        d = std::max(d, std::abs(emp - prism::stochastic::max_rank_load_cdf(x, copies, rank_p)));
    }
    return d;
}

// KS critical value at alpha = 0.001 for 4,000 draws: 1.95 / sqrt(4000) = 0.031
constexpr double kKsCritical = 1.95 / 63.2456;

TEST(Routing, BusiestRankLawMatchesMultinomialDrawsForABalancedRouter) {
    const std::vector<double> p(64, 1.0);  // 64 experts on ep 8, 2048 tokens x top 8
    const auto rank_p = prism::stochastic::rank_probabilities(p, 8);
    const auto maxima = brute_force_maxima(p, 8, 16384, 4000, 36);

    EXPECT_LT(ks_distance(maxima, 16384, rank_p), kKsCritical);
    // by hand: equal shares make the loads N/8 + sqrt(N/8) (U_r - mean U) with U iid standard
    // normals (covariance N (P - P P^T)), so E[max] = N/8 + sqrt(N/8) x 1.4236 (the mean of the
    // largest of 8 standard normals; Harter 1961)
    EXPECT_NEAR(prism::stochastic::expected_max_load_factor(16384, rank_p),
                1 + 1.4236 * std::sqrt(2048.0) / 2048, 0.001);
}

TEST(Routing, BusiestRankLawMatchesMultinomialDrawsForASkewedRouter) {
    const std::vector<double> p =
        prism::stochastic::skewed_popularity(256, 0.5, 7);  // DeepSeek-V3 shape
    const auto rank_p = prism::stochastic::rank_probabilities(p, 32);
    const auto maxima = brute_force_maxima(p, 32, 8192, 4000, 11);

    EXPECT_LT(ks_distance(maxima, 8192, rank_p), kKsCritical);
    double empirical = 0;
    for (int m : maxima) empirical += m;
    empirical /= double(maxima.size()) * (8192.0 / 32);
    EXPECT_NEAR(prism::stochastic::expected_max_load_factor(8192, rank_p), empirical, 0.01);
    EXPECT_GT(empirical, 1.2);  // a skewed router's busiest rank is well above its share
}

TEST(Routing, UniformPopularityIsTheBalancedShare) {
    const auto p = prism::stochastic::skewed_popularity(16, 0.0, 1);
    for (double x : p) EXPECT_DOUBLE_EQ(x, 1.0);
    EXPECT_THROW(prism::stochastic::rank_probabilities(p, 3), std::exception);
}

TEST(Routing, LoadFactorMomentsMatchBruteForceDrawsWithAndWithoutACapacity) {
    // DeepSeek-V3's shape (256 experts, ep 32) with a skewed router: the law's E[Z] and E[Z^2]
    // against the brute-force maxima above (4,000 draws: within 4 standard errors)
    prism::stochastic::RoutingLoad r;
    r.copies = 8192;
    r.popularity = prism::stochastic::skewed_popularity(256, 0.5, 7);
    r.ep = 32;
    const auto maxima = brute_force_maxima(r.popularity, 32, 8192, 4000, 12);
    const double share = 8192.0 / 32;
    for (const double cap : {0.0, 1.3}) {
        r.capacity = cap;
        double m1 = 0, m2 = 0;
        for (int m : maxima) {
            const double z = cap > 0 ? std::min(m / share, cap) : m / share;
            m1 += z / 4000;
            m2 += z * z / 4000;
        }
        const double se = std::sqrt(std::max(m2 - m1 * m1, 1e-12) / 4000);
        const auto law = prism::stochastic::load_factor_moments(r);
        EXPECT_NEAR(law.mean, m1, 4 * se + 1e-3) << "capacity " << cap;
        EXPECT_NEAR(law.var(), m2 - m1 * m1, 0.15 * (m2 - m1 * m1) + 1e-6) << "capacity " << cap;
        if (cap > 0) {
            EXPECT_LE(law.mean, cap);
        }
    }
}

TEST(Routing, MonteCarloDrawsFollowTheMaxOverRanksLaw) {
    // the evaluators' Monte Carlo draws (sequential binomials over the ranks, Philox) against
    // the analytic law by KS, 4,000 draws (64 experts on ep 8, 16,384 copies)
    prism::stochastic::RoutingLoad r;
    r.copies = 16384;
    r.popularity = prism::stochastic::skewed_popularity(64, 0.2, 3);
    r.ep = 8;
    const auto z = prism::stochastic::draw_load_factors(r, 4000, 99);
    std::vector<int> maxima;
    for (double x : z) maxima.push_back(int(std::lround(x * 2048)));
    EXPECT_LT(ks_distance(maxima, 16384, prism::stochastic::rank_probabilities(r.popularity, 8)),
              kKsCritical);
    // the drawn moments (2,048 draws) agree with the law's to their standard error
    const auto law = prism::stochastic::load_factor_moments(r);
    const auto drawn = prism::stochastic::drawn_load_factor_moments(r, 2048, 99);
    EXPECT_NEAR(drawn.mean, law.mean, 4 * std::sqrt(law.var() / 2048));
}

TEST(Routing, DriftRaisesTheBusiestRanksExpectedLoad) {
    // popularity redrawn each step around the persistent one: E over the drift of E[M] is
    // larger (M convex in the rank probabilities), and the draws (a fresh drift per draw)
    // agree with the law's drift nodes
    prism::stochastic::RoutingLoad r;
    r.copies = 16384;
    r.popularity = prism::stochastic::skewed_popularity(64, 0.1, 3);
    r.ep = 8;
    const double still = prism::stochastic::load_factor_moments(r).mean;
    r.drift = 0.2;
    const auto law = prism::stochastic::load_factor_moments(r);
    const auto drawn = prism::stochastic::drawn_load_factor_moments(r, 4096, 5);
    EXPECT_GT(law.mean, still + 0.01);
    EXPECT_NEAR(drawn.mean, law.mean, 0.01);
}

TEST(Routing, BalancingSkewsReproduceThePublishedMaxVio) {
    // [variability.routing] balance: the skews whose 64 experts (Wang et al. 2024's 64 routed
    // experts) have their Table 2 MaxVio_global = max load / mean load - 1: loss-free 0.04,
    // auxiliary loss 0.52 (3B)
    auto maxvio = [](double sigma) {
        const auto p = prism::stochastic::skewed_popularity(64, sigma, 1);
        double sum = 0, top = 0;
        for (double x : p) sum += x, top = std::max(top, x);
        return top / (sum / 64) - 1;
    };
    EXPECT_NEAR(maxvio(0.0163), 0.04, 0.002);
    EXPECT_NEAR(maxvio(0.180), 0.52, 0.005);
}

}  // namespace
