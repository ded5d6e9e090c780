#pragma once

// What the analytic evaluator's stages share: growable thread-local scratch, the x grid of one
// replica's Delta, and the binomial law of slow-unit counts.

#include <cmath>
#include <cstddef>
#include <vector>

namespace prism::stochastic::detail::ssta {

/// Thread-local scratch that only grows: resize() would zero-fill what a smaller point freed.
template <class T>
void grow(std::vector<T>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
}

/// P(K = k) for K ~ Binomial(n, q), through log-gamma (n up to millions of units)
inline double binomial_pmf(double n, int k, double q) {
    if (k < 0 || k > n) return 0.0;
    if (q <= 0 || q >= 1) return k == (q <= 0 ? 0.0 : n) ? 1.0 : 0.0;  // a certain count
    return std::exp(std::lgamma(n + 1) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1) +
                    k * std::log(q) + (n - k) * std::log1p(-q));
}

/// A uniform grid of n points from lo to hi (step h): one replica's Delta, and F_D.
struct Grid {
    double lo = 0, hi = 0, h = 0;
    int n = 0;
    double at(int i) const { return lo + h * i; }
};

}  // namespace prism::stochastic::detail::ssta
