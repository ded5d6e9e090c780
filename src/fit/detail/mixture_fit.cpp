#include "src/fit/detail/mixture_fit.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "src/fit/detail/median.hpp"
#include "src/stochastic/distribution.hpp"

namespace prism::fit::detail {

namespace {

constexpr double kInvSqrt2Pi = 0.39894228040143267794;

double normal_density(double e, double mean, double sigma) {
    const double z = (e - mean) / sigma;
    return kInvSqrt2Pi / sigma * std::exp(-0.5 * z * z);
}

// Weighted quantile of `v`.
double weighted_quantile(const std::vector<double>& v, const std::vector<double>& w, double p) {
    std::vector<std::size_t> order(v.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    double cum = 0;
    for (std::size_t i : order) {
        cum += w[i];
        if (cum >= p * total) return v[i];
    }
    return v[order.back()];
}

}  // namespace

SlowModeMixture fit_slow_mode(const std::vector<LogGroup>& groups, std::vector<double>* locations) {
    std::vector<double>& mu = *locations;
    mu.clear();
    std::vector<double> e, w, abs_e;
    for (const LogGroup& g : groups) {
        mu.push_back(median_of(g.y));
        for (double y : g.y) {
            e.push_back(y - mu.back());
            abs_e.push_back(std::fabs(y - mu.back()));
            w.push_back(g.weight);
        }
    }
    SlowModeMixture m;
    // Start: the body from the median absolute residual, the slow mode from the top 5%.
    m.body_sigma = std::max(1.4826 * weighted_quantile(abs_e, w, 0.5), 1e-6);
    m.shift = std::max(weighted_quantile(e, w, 0.97), 3 * m.body_sigma);
    m.slow_sigma = m.body_sigma;
    m.slow_weight = 0.05;
    std::vector<double> r(e.size());
    for (int iter = 0; iter < 1000; ++iter) {
        const SlowModeMixture before = m;
        // E-step with the current locations.
        std::size_t k = 0;
        for (std::size_t g = 0; g < groups.size(); ++g) {
            for (double y : groups[g].y) {
                const double res = y - mu[g];
                const double body = std::sqrt(m.body_sigma * m.body_sigma + groups[g].noise_var);
                const double a = (1 - m.slow_weight) * normal_density(res, 0, body);
                const double b = m.slow_weight * normal_density(res, m.shift, m.slow_sigma);
                r[k++] = a + b > 0 ? b / (a + b) : (res > m.shift ? 1.0 : 0.0);
            }
        }
        // M-step: weights, slow mode, body (per-group degrees of freedom), locations.
        double sw = 0, sr = 0, sre = 0, body_ss = 0, body_dof = 0, body_noise = 0;
        k = 0;
        for (std::size_t g = 0; g < groups.size(); ++g) {
            const double n = static_cast<double>(groups[g].y.size());
            double body_r = 0;
            for (double y : groups[g].y) {
                const double res = y - mu[g];
                sw += groups[g].weight;
                sr += groups[g].weight * r[k];
                sre += groups[g].weight * r[k] * res;
                body_ss += groups[g].weight * (1 - r[k]) * res * res;
                body_r += 1 - r[k];
                ++k;
            }
            body_dof += groups[g].weight * body_r * (n - 1) / n;
            body_noise += groups[g].weight * body_r * (n - 1) / n * groups[g].noise_var;
        }
        m.slow_weight = std::clamp(sr / sw, 1e-9, 0.5);
        m.shift = sr > 0 ? sre / sr : m.shift;
        double slow_ss = 0;
        k = 0;
        for (std::size_t g = 0; g < groups.size(); ++g) {
            for (double y : groups[g].y) {
                const double d = y - mu[g] - m.shift;
                slow_ss += groups[g].weight * r[k++] * d * d;
            }
        }
        m.body_sigma = std::sqrt(std::max(body_ss - body_noise, 1e-12 * body_dof) /
                                 std::max(body_dof, 1e-300));
        m.slow_sigma = std::max(std::sqrt(slow_ss / std::max(sr, 1e-300)), 0.1 * m.body_sigma);
        k = 0;
        for (std::size_t g = 0; g < groups.size(); ++g) {
            double num = 0, den = 0;
            for (double y : groups[g].y) {
                const double a = (1 - r[k]) / (m.body_sigma * m.body_sigma + groups[g].noise_var);
                const double b = r[k] / (m.slow_sigma * m.slow_sigma);
                num += a * y + b * (y - m.shift);
                den += a + b;
                ++k;
            }
            mu[g] = num / den;
        }
        const double change = std::fabs(m.slow_weight - before.slow_weight) +
                              std::fabs(m.shift - before.shift) +
                              std::fabs(m.body_sigma - before.body_sigma) +
                              std::fabs(m.slow_sigma - before.slow_sigma);
        if (change < 1e-10) {
            m.converged = true;
            break;
        }
    }
    return m;
}

double slow_mode_cdf(const SlowModeMixture& m, double e, double n, double noise_var) {
    const double body = std::sqrt((m.body_sigma * m.body_sigma + noise_var) * (n - 1) / n);
    return (1 - m.slow_weight) * stochastic::normal_cdf(e / body) +
           m.slow_weight * stochastic::normal_cdf((e - m.shift) / m.slow_sigma);
}

}  // namespace prism::fit::detail
