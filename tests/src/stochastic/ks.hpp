#pragma once

// Kolmogorov-Smirnov distances for the stochastic tests.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace prism::testing {

/// Two-sample Kolmogorov-Smirnov distance.
inline double ks_two_sample(std::vector<double> a, std::vector<double> b) {
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    std::size_t i = 0, j = 0;
    double d = 0;
    while (i < a.size() && j < b.size()) {
        const double x = std::min(a[i], b[j]);
        while (i < a.size() && a[i] <= x) ++i;
        while (j < b.size() && b[j] <= x) ++j;
        d = std::max(d, std::fabs(static_cast<double>(i) / static_cast<double>(a.size()) -
                                  static_cast<double>(j) / static_cast<double>(b.size())));
    }
    return d;
}

/// One-sample Kolmogorov-Smirnov distance of n sorted draws from a law, given the law's CDF at
/// each draw (cdf[i] = F(x_(i))).
inline double ks_against_cdf(const std::vector<double>& cdf) {
    const double n = static_cast<double>(cdf.size());
    double d = 0;
    for (std::size_t i = 0; i < cdf.size(); ++i) {
        d = std::max({d, std::fabs(cdf[i] - static_cast<double>(i + 1) / n),
                      std::fabs(cdf[i] - static_cast<double>(i) / n)});
    }
    return d;
}

}  // namespace prism::testing
