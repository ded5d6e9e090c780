#pragma once

// Analytic vs Monte Carlo figures shared by the accuracy measurements (accuracy_405b,
// accuracy_experiment).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "src/stochastic/step_distribution.hpp"
#include "src/stochastic/verify.hpp"

namespace prism::bench {

/// Kolmogorov-Smirnov distance between the empirical CDF of `sorted` and a CDF at its samples.
using stochastic::ks_to_samples;

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
