#pragma once

// Analytic vs Monte Carlo figures shared by the accuracy measurements (accuracy_405b,
// accuracy_experiment).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "src/stochastic/step_distribution.hpp"

namespace prism::bench {

/// Kolmogorov-Smirnov distance between the empirical CDF of `sorted` (ascending) and a CDF
/// given at those samples (`cdf_at[k]` at sorted[k]).
inline double ks_to_samples(const std::vector<double>& sorted, const std::vector<double>& cdf_at) {
    const auto n = static_cast<double>(sorted.size());
    double ks = 0;
    for (std::size_t k = 0; k < sorted.size(); ++k) {
        ks = std::max({ks, std::fabs(cdf_at[k] - static_cast<double>(k) / n),
                       std::fabs(cdf_at[k] - static_cast<double>(k + 1) / n)});
    }
    return ks;
}

/// The analytic p50, p95 and p99 of `d` over the Monte Carlo ones (order statistic
/// floor(p (n - 1)) of `sorted`).
struct QuantileRatios {
    double p50, p95, p99;
    double worst() const {
        return std::max({std::fabs(p50 - 1), std::fabs(p95 - 1), std::fabs(p99 - 1)});
    }
};
inline QuantileRatios quantile_ratios(const StepDistribution& d,
                                      const std::vector<double>& sorted) {
    const auto n = static_cast<double>(sorted.size());
    auto q = [&](double p) { return sorted[static_cast<std::size_t>(p * (n - 1))]; };
    return {d.p50_s / q(0.5), d.p95_s / q(0.95), d.p99_s / q(0.99)};
}

}  // namespace prism::bench
