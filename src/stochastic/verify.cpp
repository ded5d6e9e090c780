#include "src/stochastic/verify.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "src/stochastic/step_distribution.hpp"

namespace prism::stochastic {

double ks_to_samples(const std::vector<double>& sorted, const std::vector<double>& cdf_at) {
    const auto n = static_cast<double>(sorted.size());
    double ks = 0;
    for (std::size_t k = 0; k < sorted.size(); ++k) {
        ks = std::max({ks, std::fabs(cdf_at[k] - static_cast<double>(k) / n),
                       std::fabs(cdf_at[k] - static_cast<double>(k + 1) / n)});
    }
    return ks;
}

Verification verify_monte_carlo(const StepProfile& profile, const DesignPoint& point,
                                const HardwareSpec& hardware, const ClusterSpec& cluster,
                                const VariabilitySpec& variability,
                                const EvaluationSpec& evaluation, std::uint64_t seed,
                                std::uint64_t stream_index, const std::function<bool()>& stop) {
    const auto check_stop = [&] {
        if (stop && stop()) throw VerificationStopped();
    };
    Verification v;
    check_stop();
    std::vector<double> x = monte_carlo_samples(profile, point, hardware, cluster, variability,
                                                evaluation.samples, seed, stream_index);
    std::sort(x.begin(), x.end());
    v.samples = static_cast<int>(x.size());
    if (x.empty()) return v;
    check_stop();
    if (analytic_hands_over(profile, point, hardware, variability)) {
        // the sweep evaluated this point by Monte Carlo on these very streams (outside the
        // analytic law's domain): its law is the empirical CDF of the draws x themselves
        std::vector<double> cdf(x.size());
        for (std::size_t k = 0; k < x.size(); ++k) {
            cdf[k] = static_cast<double>(std::upper_bound(x.begin(), x.end(), x[k]) - x.begin()) /
                     static_cast<double>(x.size());
        }
        v.ks = ks_to_samples(x, cdf);
    } else {
        v.ks = ks_to_samples(x, analytic_cdf(profile, point, hardware, cluster, variability, x,
                                             evaluation.grid_points));
    }
    check_stop();
    EvaluationSpec an = evaluation;
    an.method = Method::analytic;
    an.histogram = false;
    const StepDistribution d =
        step_distribution(profile, point, hardware, cluster, variability, an, seed, stream_index);
    v.analytic_mean_s = d.mean_s;
    v.analytic_p50_s = d.p50_s;
    v.analytic_p95_s = d.p95_s;
    v.analytic_p99_s = d.p99_s;
    const auto n = static_cast<double>(x.size());
    auto q = [&](double p) { return x[static_cast<std::size_t>(p * (n - 1))]; };
    v.mc_mean_s = std::accumulate(x.begin(), x.end(), 0.0) / n;
    v.mc_p50_s = q(0.5);
    v.mc_p95_s = q(0.95);
    v.mc_p99_s = q(0.99);
    return v;
}

}  // namespace prism::stochastic
