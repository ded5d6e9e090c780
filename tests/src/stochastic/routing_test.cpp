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

}  // namespace
