#include "src/fit/hiccup_fit.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "src/common/error.hpp"
#include "src/fit/detail/median.hpp"
#include "src/stochastic/distribution.hpp"

namespace prism::fit {

namespace {

using detail::median_of;

constexpr double kLogSqrt2Pi = 0.9189385332046727;

// One run's censored sample: steps at or below the threshold, and the hits' excesses (s).
struct Censored {
    double nodes = 1;
    double threshold_s = 0;
    std::size_t below = 0;
    std::vector<double> excess_s;
};

// One node's delay law: lognormal (mu, sigma) or Pareto (median, shape alpha).
struct DelayLaw {
    bool pareto = false;
    double mu = 0, sigma = 1;     // lognormal
    double scale = 0, alpha = 0;  // Pareto: d_m and alpha
    double sf(double e) const {   // P(D > e)
        if (pareto) return e <= scale ? 1.0 : std::pow(scale / e, alpha);
        return stochastic::normal_sf((std::log(e) - mu) / sigma);
    }
    double log_pdf(double e) const {
        if (pareto) {
            return e < scale
                       ? -std::numeric_limits<double>::infinity()
                       : std::log(alpha) + alpha * std::log(scale) - (alpha + 1) * std::log(e);
        }
        const double z = (std::log(e) - mu) / sigma;
        return -0.5 * z * z - kLogSqrt2Pi - std::log(sigma) - std::log(e);
    }
};

// log of (1 - q S_D(e))
double log_no_larger(double q, const DelayLaw& d, double e) { return std::log1p(-q * d.sf(e)); }

double log_likelihood(const std::vector<Censored>& data, double q, const DelayLaw& d) {
    double ll = 0;
    for (const Censored& c : data) {
        if (c.below > 0) {
            ll += static_cast<double>(c.below) * c.nodes * log_no_larger(q, d, c.threshold_s);
        }
        for (double e : c.excess_s) {
            ll += std::log(c.nodes) + std::log(q) + d.log_pdf(e);
            if (c.nodes > 1) ll += (c.nodes - 1) * log_no_larger(q, d, e);
        }
    }
    return ll;
}

// Nelder-Mead (Lagarias et al. 1998 coefficients) minimizing f from x0 with initial steps.
std::array<double, 3> nelder_mead(const std::function<double(const std::array<double, 3>&)>& f,
                                  std::array<double, 3> x0, std::array<double, 3> step) {
    constexpr int n = 3;
    std::array<std::array<double, 3>, n + 1> x;
    std::array<double, n + 1> fx;
    x[0] = x0;
    for (int i = 0; i < n; ++i) {
        x[i + 1] = x0;
        x[i + 1][i] += step[i];
    }
    for (int i = 0; i <= n; ++i) fx[i] = f(x[i]);
    for (int iteration = 0; iteration < 2000; ++iteration) {
        std::array<int, n + 1> order{0, 1, 2, 3};
        std::sort(order.begin(), order.end(), [&](int a, int b) { return fx[a] < fx[b]; });
        const int best = order[0], worst = order[n], second = order[n - 1];
        if (std::fabs(fx[worst] - fx[best]) < 1e-10 * (1 + std::fabs(fx[best]))) break;
        std::array<double, 3> centroid{};
        for (int i = 0; i <= n; ++i) {
            if (i == worst) continue;
            for (int d = 0; d < n; ++d) centroid[d] += x[i][d] / n;
        }
        const auto along = [&](double t) {
            std::array<double, 3> p;
            for (int d = 0; d < n; ++d) p[d] = centroid[d] + t * (x[worst][d] - centroid[d]);
            return p;
        };
        const auto reflected = along(-1);
        const double fr = f(reflected);
        if (fr < fx[best]) {
            const auto expanded = along(-2);
            const double fe = f(expanded);
            if (fe < fr) {
                x[worst] = expanded;
                fx[worst] = fe;
            } else {
                x[worst] = reflected;
                fx[worst] = fr;
            }
        } else if (fr < fx[second]) {
            x[worst] = reflected;
            fx[worst] = fr;
        } else {
            const auto contracted = fr < fx[worst] ? along(-0.5) : along(0.5);
            const double fc = f(contracted);
            if (fc < std::min(fr, fx[worst])) {
                x[worst] = contracted;
                fx[worst] = fc;
            } else {
                for (int i = 0; i <= n; ++i) {
                    if (i == best) continue;
                    for (int d = 0; d < n; ++d) x[i][d] = x[best][d] + 0.5 * (x[i][d] - x[best][d]);
                    fx[i] = f(x[i]);
                }
            }
        }
    }
    int best = 0;
    for (int i = 1; i <= n; ++i) {
        if (fx[i] < fx[best]) best = i;
    }
    return x[best];
}

}  // namespace

HiccupFit fit_hiccups(const std::vector<HiccupGroup>& groups, double threshold_sd) {
    HiccupFit out;
    std::vector<Censored> data;
    std::vector<double> log_excess;
    double node_steps = 0;
    for (const HiccupGroup& g : groups) {
        for (const MeasuredSteps& r : g.runs) {
            if (r.step_time_s.size() < 2) {
                throw ModelError(fmt::format("hiccup fit: {}: {} steps; need at least 2", r.name,
                                             r.step_time_s.size()));
            }
            const double median = median_of(r.step_time_s);
            std::vector<double> deviation;
            for (double t : r.step_time_s) deviation.push_back(std::fabs(t - median));
            Censored c;
            c.nodes = std::max(1.0, g.nodes);
            // the body's robust sd (1.4826 MAD); hits are far above it
            c.threshold_s = std::max(threshold_sd * 1.4826 * median_of(deviation), 1e-9 * median);
            for (double t : r.step_time_s) {
                if (t - median > c.threshold_s) {
                    c.excess_s.push_back(t - median);
                    log_excess.push_back(std::log(t - median));
                } else {
                    ++c.below;
                }
            }
            out.steps += r.step_time_s.size();
            out.hits += c.excess_s.size();
            node_steps += static_cast<double>(r.step_time_s.size()) * c.nodes;
            data.push_back(std::move(c));
        }
    }
    if (out.hits == 0) {
        out.probability_upper_95 = node_steps > 0 ? 3 / node_steps : 1;
        return out;
    }
    // start: the hits' log-excess moments, q from the hit fraction at the mean node count
    double m = 0, v = 0;
    for (double x : log_excess) m += x / static_cast<double>(log_excess.size());
    for (double x : log_excess) v += (x - m) * (x - m) / static_cast<double>(log_excess.size());
    const double hit_fraction = static_cast<double>(out.hits) / static_cast<double>(out.steps);
    const double mean_nodes = node_steps / static_cast<double>(out.steps);
    const double q0 = -std::expm1(std::log1p(-std::min(hit_fraction, 0.999)) / mean_nodes);
    const double sigma0 = std::max(std::sqrt(v), 0.1);
    // fewer than kMinHitsForSigma hits do not pin the delay's spread (one hit: the likelihood
    // grows without bound as sigma -> 0): it is then held at sigma0, at least 0.5
    constexpr std::size_t kMinHitsForSigma = 5;
    const bool sigma_free = out.hits >= kMinHitsForSigma;
    const double sigma_held = std::max(sigma0, 0.5);
    // A hiccup is a delay the body does not make: below the threshold the likelihood cannot
    // tell a hiccup from the body's noise (the body's own terms carry those), and it runs along
    // a ridge of ever more frequent, ever smaller delays (the Oracle 1,536-GPU runs, 3 hits in
    // 527 steps: q 0.011 per node and step, 89% of the steps hit, median 11 ms). The delay's
    // median is held at or above the smallest run threshold: most hiccups are visible.
    double log_threshold = std::numeric_limits<double>::infinity();
    for (const Censored& c : data) log_threshold = std::min(log_threshold, std::log(c.threshold_s));
    const auto mu_of = [&](double x) { return std::max(x, log_threshold); };
    const auto lognormal_nll = [&](const std::array<double, 3>& x) {
        const double q = std::exp(std::min(x[0], 0.0));
        const double sigma = sigma_free ? std::exp(x[2]) : sigma_held;
        if (!(sigma > 1e-4) || !(sigma < 20)) return std::numeric_limits<double>::infinity();
        DelayLaw d;
        d.mu = mu_of(x[1]);
        d.sigma = sigma;
        const double ll = log_likelihood(data, q, d);
        return std::isfinite(ll) ? -ll : std::numeric_limits<double>::infinity();
    };
    const std::array<double, 3> best =
        nelder_mead(lognormal_nll, {std::log(q0), mu_of(m), std::log(sigma0)}, {0.5, 0.5, 0.3});
    out.hiccup.probability = std::exp(std::min(best[0], 0.0));
    out.hiccup.delay_median_s = std::exp(mu_of(best[1]));
    out.hiccup.delay_sigma = sigma_free ? std::exp(best[2]) : sigma_held;
    out.sigma_fitted = sigma_free;
    out.log_likelihood = -lognormal_nll(best);
    out.lognormal_log_likelihood = out.log_likelihood;
    if (!sigma_free) return out;
    // The Pareto tail (median, alpha > 2: x[2] = log(alpha - 2)), started from the Hill
    // estimate over the hits; the family with the larger likelihood is kept (both have three
    // parameters with q).
    const double smallest = *std::min_element(log_excess.begin(), log_excess.end());
    double hill = 0;
    for (double x : log_excess) hill += (x - smallest) / static_cast<double>(log_excess.size());
    const double alpha0 = std::max(hill > 0 ? 1 / hill : 10.0, 2.1);
    const auto pareto_law = [&](const std::array<double, 3>& x) {
        DelayLaw d;
        d.pareto = true;
        d.alpha = 2 + std::exp(x[2]);
        d.scale = std::exp(mu_of(x[1])) * std::exp2(-1 / d.alpha);
        return d;
    };
    const auto pareto_nll = [&](const std::array<double, 3>& x) {
        const double q = std::exp(std::min(x[0], 0.0));
        const DelayLaw d = pareto_law(x);
        if (!(d.alpha < 1e3)) return std::numeric_limits<double>::infinity();
        const double ll = log_likelihood(data, q, d);
        return std::isfinite(ll) ? -ll : std::numeric_limits<double>::infinity();
    };
    // the median at the smallest hit's 2^(1/alpha) multiple: every hit above d_m
    const std::array<double, 3> pareto_start{std::log(q0), smallest + std::log(2) / alpha0 - 1e-6,
                                             std::log(alpha0 - 2)};
    const std::array<double, 3> pbest = nelder_mead(pareto_nll, pareto_start, {0.5, 0.1, 0.3});
    out.pareto_log_likelihood = -pareto_nll(pbest);
    if (out.pareto_log_likelihood > out.lognormal_log_likelihood) {
        const DelayLaw d = pareto_law(pbest);
        out.hiccup.probability = std::exp(std::min(pbest[0], 0.0));
        out.hiccup.family = HiccupFamily::pareto;
        out.hiccup.delay_median_s = d.scale * std::exp2(1 / d.alpha);
        out.hiccup.delay_tail = d.alpha;
        out.hiccup.delay_sigma = 0;
        out.log_likelihood = out.pareto_log_likelihood;
    }
    return out;
}

}  // namespace prism::fit
