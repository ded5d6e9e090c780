// Summary statistics of Monte Carlo step samples (DESIGN.md section 5: mean, std, quantiles,
// P(step > (1 + delta) deterministic), the histogram).

#include <algorithm>
#include <cmath>
#include <vector>

#include "src/stochastic/detail/evaluators.hpp"
#include "src/stochastic/step_distribution.hpp"

namespace prism::stochastic::detail {

namespace {

double sorted_quantile(const std::vector<double>& x, double p) {
    // linear interpolation between order statistics (Hyndman-Fan type 7)
    const double h = (static_cast<double>(x.size()) - 1) * p;
    const auto lo = static_cast<size_t>(std::floor(h));
    const size_t hi = std::min(lo + 1, x.size() - 1);
    return x[lo] + (h - static_cast<double>(lo)) * (x[hi] - x[lo]);
}

}  // namespace

void summarize_samples(std::vector<double> x, const EvaluationSpec& eval, double det,
                       StepDistribution& out) {
    const auto n = static_cast<double>(x.size());

    double mean = 0;
    for (double v : x) mean += v;
    mean /= n;
    double var = 0;
    for (double v : x) var += (v - mean) * (v - mean);
    out.mean_s = mean;
    out.std_s = std::sqrt(var / std::max(1.0, n - 1));
    std::sort(x.begin(), x.end());
    out.p50_s = sorted_quantile(x, 0.50);
    out.p90_s = sorted_quantile(x, 0.90);
    out.p95_s = sorted_quantile(x, 0.95);
    out.p99_s = sorted_quantile(x, 0.99);
    out.p999_s = sorted_quantile(x, 0.999);
    out.p_slow.clear();
    for (double delta : eval.slow_deltas) {
        const double t = (1.0 + delta) * det;
        const auto above = x.end() - std::upper_bound(x.begin(), x.end(), t);
        out.p_slow.push_back(static_cast<double>(above) / n);
    }
    out.histogram.clear();
    if (eval.histogram && eval.histogram_bins > 0) {
        out.histogram_lo_s = x.front();
        out.histogram_hi_s = x.back() > x.front() ? x.back() : x.front() * (1 + 1e-12) + 1e-300;
        out.histogram.assign(eval.histogram_bins, 0.0f);
        const double w = (out.histogram_hi_s - out.histogram_lo_s) / eval.histogram_bins;
        for (double v : x) {
            const auto b = std::clamp(static_cast<int>((v - out.histogram_lo_s) / w), 0,
                                      eval.histogram_bins - 1);
            out.histogram[b] += static_cast<float>(1.0 / n);
        }
    }
}

}  // namespace prism::stochastic::detail
