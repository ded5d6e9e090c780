#include "src/fit/family_fit.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "src/common/error.hpp"
#include "src/fit/detail/median.hpp"
#include "src/fit/detail/mixture_fit.hpp"
#include "src/fit/detail/special.hpp"
#include "src/stochastic/distribution.hpp"

namespace prism::fit {

namespace {

using detail::median_of;

// One group's summary: its invocations and the statistics every family needs.
struct Group {
    std::vector<double> x;
    double n = 0;
    double weight = 0;          // median duration
    double mean = 0;            // of x
    double log_mean = 0;        // of ln x
    double sum_log_ratio = 0;   // sum ln(x / mean), <= 0
    double resolution_var = 0;  // relative variance of the timer's rounding, q^2 / (12 m^2)
};

std::vector<Group> summarize(const std::vector<KernelGroup>& groups, double resolution_s) {
    std::vector<Group> out;
    for (const KernelGroup& kg : groups) {
        Group g;
        for (double d : kg.durations_s) {
            if (d > 0 && std::isfinite(d)) g.x.push_back(d);
        }
        if (g.x.size() < 2) continue;
        g.n = static_cast<double>(g.x.size());
        g.weight = median_of(g.x);
        g.mean = std::accumulate(g.x.begin(), g.x.end(), 0.0) / g.n;
        for (double d : g.x) g.log_mean += std::log(d);
        g.log_mean /= g.n;
        for (double d : g.x) g.sum_log_ratio += std::log(d / g.mean);
        g.resolution_var = resolution_s * resolution_s / (12 * g.weight * g.weight);
        out.push_back(std::move(g));
    }
    return out;
}

// d/dk of the weighted Dirichlet log-likelihood of the shares (see the header): decreasing in
// k, +inf at 0, sum w sum ln(x / mean) <= 0 at infinity.
double gamma_score(const std::vector<Group>& groups, double k) {
    double s = 0;
    for (const Group& g : groups) {
        s += g.weight * (g.n * (detail::digamma(g.n * k) - detail::digamma(k) - std::log(g.n)) +
                         g.sum_log_ratio);
    }
    return s;
}

// The Dirichlet MLE of the gamma shape k; infinity when every group is constant.
double gamma_shape(const std::vector<Group>& groups) {
    double lo = -12;  // ln k
    double hi = 40;
    if (gamma_score(groups, std::exp(hi)) >= 0) return std::exp(hi);
    for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
        const double mid = 0.5 * (lo + hi);
        if (gamma_score(groups, std::exp(mid)) > 0) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return std::exp(0.5 * (lo + hi));
}

// The probability-integral transforms of every invocation under `kind` with raw parameter
// `param` (normal: c, lognormal: sigma, gamma: k).
std::vector<double> pits(const std::vector<Group>& groups, DistKind kind, double param) {
    std::vector<double> out;
    for (const Group& g : groups) {
        const double deflate = std::sqrt((g.n - 1) / g.n);
        const double sum = g.mean * g.n;
        for (double x : g.x) {
            switch (kind) {
                case DistKind::normal:
                    out.push_back(stochastic::normal_cdf((x / g.mean - 1) / (param * deflate)));
                    break;
                case DistKind::lognormal:
                    out.push_back(
                        stochastic::normal_cdf((std::log(x) - g.log_mean) / (param * deflate)));
                    break;
                default:
                    out.push_back(detail::incomplete_beta(param, (g.n - 1) * param, x / sum));
                    break;
            }
        }
    }
    return out;
}

// (fitted quantile, empirical quantile) of X at `points` probabilities: the empirical quantile
// is the fitted distribution's quantile at the weighted empirical quantile of the PITs.
std::vector<std::array<double, 2>> qq_pairs(const std::vector<double>& pit,
                                            const std::vector<double>& weight,
                                            const DistributionSpec& spec, int points) {
    std::vector<std::size_t> order(pit.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return pit[a] < pit[b]; });
    const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
    const stochastic::Distribution dist(spec);
    std::vector<std::array<double, 2>> out;
    double cum = 0;
    std::size_t i = 0;
    for (int k = 0; k < points; ++k) {
        const double p = (k + 0.5) / points;
        while (i + 1 < order.size() && cum + weight[order[i]] < p * total)
            cum += weight[order[i++]];
        const double u = std::clamp(pit[order[i]], 1e-12, 1 - 1e-12);
        out.push_back({dist.quantile(p), dist.quantile(u)});
    }
    return out;
}

DistributionSpec simple_spec(DistKind kind, double cv) {
    DistributionSpec spec;
    spec.kind = cv > 0 ? kind : DistKind::constant;
    spec.cv = cv;
    return spec;
}

// X for the slow-mode mixture: both components lognormal, overall mean 1.
DistributionSpec mixture_spec(const detail::SlowModeMixture& m) {
    const double body_s2 = m.body_sigma * m.body_sigma;
    const double slow_s2 = m.slow_sigma * m.slow_sigma;
    const double body_mean = std::exp(0.5 * body_s2);
    const double slow_mean = std::exp(m.shift + 0.5 * slow_s2);
    const double mean = (1 - m.slow_weight) * body_mean + m.slow_weight * slow_mean;
    DistributionSpec spec;
    spec.kind = DistKind::mixture;
    spec.components = {
        MixtureComponent{
            1 - m.slow_weight,
            DistributionSpec{
                DistKind::lognormal, body_mean / mean, std::sqrt(std::expm1(body_s2)), {}, {}}},
        MixtureComponent{
            m.slow_weight,
            DistributionSpec{
                DistKind::lognormal, slow_mean / mean, std::sqrt(std::expm1(slow_s2)), {}, {}}}};
    double second = 0;
    for (const MixtureComponent& c : spec.components) {
        second += c.weight * c.dist.mean * c.dist.mean * (1 + c.dist.cv * c.dist.cv);
    }
    spec.cv = std::sqrt(std::max(0.0, second - 1));
    return spec;
}

// The slow-mode candidate: its fit, its PITs (empty when EM finds no separate slow mode).
std::vector<double> fit_slow_mode_candidate(const std::vector<Group>& groups, TransientFit& fit) {
    std::vector<detail::LogGroup> log_groups;
    for (const Group& g : groups) {
        detail::LogGroup lg;
        lg.weight = g.weight;
        lg.noise_var = g.resolution_var;
        for (double x : g.x) lg.y.push_back(std::log(x));
        log_groups.push_back(std::move(lg));
    }
    std::vector<double> mu;
    detail::SlowModeMixture m = detail::fit_slow_mode(log_groups, &mu);
    // Four significant digits, so that the body's weight 1 - p is short and exact in TOML.
    m.slow_weight = std::stod(fmt::format("{:.4g}", m.slow_weight));
    // A slow mode is rare, and slower than the body's spread can explain.
    if (!m.converged || m.slow_weight < 1e-4 || m.slow_weight > 0.3 || m.shift < 3 * m.body_sigma) {
        return {};
    }
    std::vector<double> pit;
    for (std::size_t g = 0; g < groups.size(); ++g) {
        for (double y : log_groups[g].y) {
            pit.push_back(
                detail::slow_mode_cdf(m, y - mu[g], groups[g].n, groups[g].resolution_var));
        }
    }
    fit.slow_mode_fit.kind = DistKind::mixture;
    fit.slow_mode_fit.spec = mixture_spec(m);
    fit.slow_mode_fit.cv = fit.slow_mode_fit.spec.cv;
    fit.slow_mode.weight = m.slow_weight;
    fit.slow_mode.factor = std::exp(m.shift);
    fit.slow_mode.body_cv = fit.slow_mode_fit.spec.components[0].dist.cv;
    fit.slow_mode.slow_cv = fit.slow_mode_fit.spec.components[1].dist.cv;
    return pit;
}

}  // namespace

double ks_uniform(std::vector<double> pit, std::vector<double> weight) {
    std::vector<std::size_t> order(pit.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return pit[a] < pit[b]; });
    const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
    double cum = 0;
    double d = 0;
    for (std::size_t i : order) {
        d = std::max(d, pit[i] - cum / total);
        cum += weight[i];
        d = std::max(d, cum / total - pit[i]);
    }
    return d;
}

TransientFit fit_transient(const std::vector<KernelGroup>& groups,
                           const TransientFitOptions& options) {
    const std::vector<Group> g = summarize(groups, options.resolution_s);
    TransientFit fit;
    for (const Group& group : g) fit.samples += group.x.size();
    fit.groups = g.size();
    if (fit.samples < 2) {
        throw ModelError(fmt::format(
            "transient fit: {} invocations in groups of 2 or more; need at least 2", fit.samples));
    }

    double dof = 0;
    double ss_log = 0;
    double ss_ratio = 0;
    double resolution = 0;
    std::vector<double> weight;
    double w_sum = 0;
    double w_sq = 0;
    for (const Group& group : g) {
        dof += group.weight * (group.n - 1);
        resolution += group.weight * (group.n - 1) * group.resolution_var;
        for (double x : group.x) {
            ss_log +=
                group.weight * (std::log(x) - group.log_mean) * (std::log(x) - group.log_mean);
            ss_ratio += group.weight * (x / group.mean - 1) * (x / group.mean - 1);
            weight.push_back(group.weight);
            w_sum += group.weight;
            w_sq += group.weight * group.weight;
        }
    }
    const double sigma2 = ss_log / dof;
    const double c2 = ss_ratio / dof;
    const double shape = gamma_shape(g);
    const double q = resolution / dof;
    fit.effective_samples = w_sum * w_sum / w_sq;
    fit.ks_critical_5pct = 1.358 / std::sqrt(fit.effective_samples);

    // Raw parameters (for the PITs) and cv after Sheppard's correction.
    const std::array<DistKind, 3> kinds{DistKind::normal, DistKind::lognormal, DistKind::gamma};
    const std::array<double, 3> raw_cv2{c2, std::expm1(sigma2), 1.0 / shape};
    const std::array<double, 3> param{std::sqrt(c2), std::sqrt(sigma2), shape};
    const std::array<double, 3> cv{std::sqrt(std::max(0.0, c2 - q)),
                                   std::sqrt(std::expm1(std::max(0.0, sigma2 - q))),
                                   std::sqrt(std::max(0.0, 1.0 / shape - q))};
    std::vector<double> best_pit;
    std::vector<double> raw_pit_for_qq;
    DistributionSpec raw_best;
    for (std::size_t k = 0; k < kinds.size(); ++k) {
        FamilyFit& f = fit.families[k];
        f.kind = kinds[k];
        f.cv = cv[k];
        f.spec = simple_spec(kinds[k], cv[k]);
        if (!(raw_cv2[k] > 1e-24)) {  // every group constant: nothing to test
            f.ks = 0;
            continue;
        }
        std::vector<double> pit = pits(g, kinds[k], param[k]);
        f.ks = ks_uniform(pit, weight);
        if (best_pit.empty() || f.ks < fit.best.ks) {
            fit.best = f;
            best_pit = std::move(pit);
            raw_best = simple_spec(kinds[k], std::sqrt(raw_cv2[k]));
            fit.resolution_share = std::min(1.0, q / raw_cv2[k]);
        }
    }
    if (best_pit.empty()) {
        fit.best = fit.families[1];
        return fit;
    }
    std::vector<double> mixture_pit = fit_slow_mode_candidate(g, fit);
    if (!mixture_pit.empty()) {
        fit.slow_mode_fit.ks = ks_uniform(mixture_pit, weight);
        if (fit.slow_mode_fit.ks + fit.ks_critical_5pct < fit.best.ks) {
            fit.best = fit.slow_mode_fit;
            best_pit = std::move(mixture_pit);
            raw_best = fit.slow_mode_fit.spec;
        }
    }
    fit.qq = qq_pairs(best_pit, weight, raw_best, options.qq_points);
    return fit;
}

}  // namespace prism::fit
