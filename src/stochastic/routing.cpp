#include "src/stochastic/routing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "src/common/error.hpp"
#include "src/stochastic/distribution.hpp"

namespace prism::stochastic {

std::vector<double> rank_probabilities(const std::vector<double>& p, int ep) {
    if (ep <= 0 || p.empty() || p.size() % std::size_t(ep) != 0) {
        throw ModelError("routing: ep must divide the number of experts");
    }
    const double total = std::accumulate(p.begin(), p.end(), 0.0);
    const std::size_t per = p.size() / std::size_t(ep);
    std::vector<double> out(std::size_t(ep), 0.0);
    for (std::size_t e = 0; e < p.size(); ++e) out[e / per] += p[e] / total;
    return out;
}

double max_rank_load_cdf(double x, double copies, const std::vector<double>& rank_p) {
    // Poissonized: Y_r ~ N(N P_r, N P_r) independent, the loads are Y given sum Y = N, so
    // P(max L <= x) = P(all Y_r <= x) f(sum Y = N | all Y_r <= x) / f(sum Y = N), the
    // conditional sum a normal with the truncated normals' means and variances summed
    constexpr double kInvSqrt2Pi = 0.3989422804014327;
    double product = 1.0, mean = 0.0, var = 0.0;
    for (const double pr : rank_p) {
        const double mu = copies * pr;
        const double sd = std::sqrt(copies * pr);
        if (sd <= 0) continue;
        const double a = (x + 0.5 - mu) / sd;
        const double cdf = normal_cdf(a);
        if (cdf <= 0.0) return 0.0;
        product *= cdf;
        const double ratio = kInvSqrt2Pi * std::exp(-0.5 * a * a) / cdf;
        mean += mu - sd * ratio;
        var += sd * sd * std::max(0.0, 1.0 - a * ratio - ratio * ratio);
    }
    if (var <= 0) return product;
    const double density_ratio =
        std::sqrt(copies / var) * std::exp(-0.5 * (copies - mean) * (copies - mean) / var);
    return std::clamp(product * density_ratio, 0.0, 1.0);
}

double expected_max_load_factor(double copies, const std::vector<double>& rank_p) {
    if (rank_p.empty() || copies <= 0) return 1.0;
    double lo = 0, hi = 0, sd_min = copies;
    for (const double pr : rank_p) {
        const double mean = copies * pr, sd = std::sqrt(copies * pr);
        lo = std::max(lo, mean - 10.0 * sd);
        hi = std::max(hi, mean + 10.0 * sd + 1.0);
        if (sd > 0) sd_min = std::min(sd_min, sd);
    }
    hi = std::min(hi, copies);
    lo = std::floor(std::min(lo, hi));
    // E[M] = lo + sum over x >= lo of P(M > x) (integer loads; below lo P(M > x) = 1 to 1e-23);
    // wide laws by the midpoint rule in steps of sd / 16
    const double step = std::max(1.0, std::floor(sd_min / 16.0));
    double expected = lo;
    for (double x = lo; x < hi; x += step) {
        expected += step * (1.0 - max_rank_load_cdf(x + 0.5 * (step - 1.0), copies, rank_p));
    }
    return expected / (copies / double(rank_p.size()));
}

std::vector<double> skewed_popularity(int experts, double sigma, std::uint64_t seed) {
    std::vector<double> z(std::size_t(std::max(experts, 0)));
    for (std::size_t e = 0; e < z.size(); ++e) {
        z[e] = normal_quantile((double(e) + 0.5) / double(z.size()));
    }
    std::mt19937_64 rng(seed);
    std::shuffle(z.begin(), z.end(), rng);
    std::vector<double> p(z.size());
    for (std::size_t e = 0; e < z.size(); ++e) p[e] = std::exp(sigma * z[e] - 0.5 * sigma * sigma);
    return p;
}

}  // namespace prism::stochastic
