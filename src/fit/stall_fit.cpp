#include "src/fit/stall_fit.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "src/common/error.hpp"
#include "src/fit/detail/median.hpp"
#include "src/fit/detail/search.hpp"
#include "src/stochastic/step_distribution.hpp"

namespace prism::fit {

namespace {

/// The group's model median (over clusters) with `stalls` in place of the base's: the analytic
/// evaluator's p50, or with m.monte_carlo_samples the median of that many Monte Carlo steps,
/// each on its own cluster, drawn from m.seed at every fraction (common random numbers: the
/// fit's objective moves with the fraction, not with the draws).
double model_median(const StepModelInput& m, const VariabilitySpec& base, const StallSpec& stalls) {
    VariabilitySpec v = base;
    v.stalls = stalls;
    if (m.monte_carlo_samples > 0) {
        return detail::median_of(stochastic::monte_carlo_samples(
            m.profile, m.point, m.hardware, m.cluster, v, m.monte_carlo_samples, m.seed, 0));
    }
    return step_distribution(m.profile, m.point, m.hardware, m.cluster, v,
                             detail::analytic_evaluation(), m.seed, 0)
        .p50_s;
}

/// Sum of squares of `r` about its mean, and the mean.
std::pair<double, double> spread(const std::vector<double>& r) {
    double mean = 0;
    for (const double x : r) mean += x;
    mean /= static_cast<double>(r.size());
    double ss = 0;
    for (const double x : r) ss += (x - mean) * (x - mean);
    return {ss, mean};
}

}  // namespace

bool StallFit::stall_like() const { return least_share <= kMaxLeastStallShare; }

bool StallRidge::apart() const { return hi > 0 && (lo <= 0 || hi / lo > kRidgeApart); }

std::vector<StallGroup> stall_groups(const std::vector<StepGroup>& groups) {
    std::vector<StallGroup> out;
    for (const StepGroup& g : groups) {
        std::vector<double> all;
        for (const MeasuredSteps& r : g.runs) {
            all.insert(all.end(), r.step_time_s.begin(), r.step_time_s.end());
        }
        out.push_back({g.name, g.model, detail::median_of(std::move(all))});
    }
    return out;
}

StallRidge stall_ridge(const std::vector<StepGroup>& groups, const VariabilitySpec& base,
                       const StepFit& fit, double fraction, double duration_s) {
    StallRidge out;
    out.lo = out.hi = fraction;
    const std::vector<StallGroup> medians = stall_groups(groups);
    for (const StepFitTarget target : {StepFitTarget::regime, StepFitTarget::transient}) {
        StallRidgeEnd end;
        end.target = target;
        StepFitParameters start = fit.parameters;
        if (target == StepFitTarget::regime) {
            start.transient_scale = 0;
        } else {
            start.regime_cv = 0;
            if (!(start.transient_scale > 0)) start.transient_scale = 1;
        }
        end.fit = fit_steps_groups(groups, base, target, start);
        end.as_good = end.fit.ks_shape <= fit.ks_shape + kRidgeKs;
        if (end.as_good) {
            end.stalls = fit_stalls(medians, with_parameters(base, end.fit.parameters), duration_s);
            out.lo = std::min(out.lo, end.stalls.stalls.fraction);
            out.hi = std::max(out.hi, end.stalls.stalls.fraction);
        }
        out.ends.push_back(std::move(end));
    }
    return out;
}

StallFit fit_stalls(const std::vector<StallGroup>& groups, const VariabilitySpec& base,
                    double duration_s) {
    if (groups.size() < 2) {
        throw ConfigError(fmt::format(
            "stall fit: {} group of runs; the stalls show only as the medians' growth from one "
            "scale to another: give two scales or more",
            groups.size()));
    }
    if (!(duration_s > 0) || !std::isfinite(duration_s)) {
        throw ConfigError(fmt::format(
            "stall fit: stall duration {} s is not a positive time (e.g. \"20 ms\")", duration_s));
    }
    for (const StallGroup& g : groups) {
        if (!(g.measured_median_s > 0) || !std::isfinite(g.measured_median_s)) {
            throw ModelError(fmt::format("stall fit: {}: median step {} s is not a positive time",
                                         g.name, g.measured_median_s));
        }
    }
    const std::size_t n = groups.size();
    // log(measured / model) of every group at fraction f
    const auto residuals = [&](double f, std::vector<double>* medians) {
        std::vector<double> r(n);
        for (std::size_t k = 0; k < n; ++k) {
            const double m = model_median(groups[k].model, base, StallSpec{f, duration_s});
            if (medians != nullptr) (*medians)[k] = m;
            r[k] = std::log(groups[k].measured_median_s / m);
        }
        return r;
    };
    const auto objective = [&](double f) { return spread(residuals(f, nullptr)).first; };

    StallFit out;
    out.stalls.duration_s = duration_s;
    for (const StallGroup& g : groups) out.measured_s.push_back(g.measured_median_s);
    out.model_without_s.resize(n);
    out.model_with_s.resize(n);
    const std::vector<double> r0 = residuals(0, &out.model_without_s);

    // identifiable only where the stalls move the groups' medians apart: at a fraction large
    // enough to show (1e-3, about a stall every 20 s of a node's time at 20 ms), every group's
    // model median moving by the same factor tells nothing
    {
        std::vector<double> probe(n);
        residuals(1e-3, &probe);
        double lo = 1e300, hi = -1e300;
        for (std::size_t k = 0; k < n; ++k) {
            const double g = std::log(probe[k] / out.model_without_s[k]);
            lo = std::min(lo, g);
            hi = std::max(hi, g);
        }
        if (!(hi - lo > 1e-9)) {
            throw ConfigError(
                "stall fit: the stalls reach every group's step alike (the same job shape and "
                "step): nothing to compare; give runs at two scales of the job");
        }
    }

    // f = 0, then a log grid over [1e-7, 0.5]; every local minimum of the grid refined by
    // golden-section search in its bracket. The ratios can be flattened more than once (the
    // medians of a discrete law move by steps, and FSDP's largest job saturates: every sync
    // stalled): the least fraction whose fit is within kRmsTolerance of the best one is kept,
    // the smallest stalls that explain the growth.
    constexpr int kGrid = 43;
    constexpr double kRmsTolerance = 1e-3;  // 0.1% of a median: below what medians resolve
    const double a = std::log(1e-7), b = std::log(kMaxStallFraction);
    std::vector<double> xs, fs;
    xs.reserve(kGrid);
    fs.reserve(kGrid);
    for (int i = 0; i < kGrid; ++i) {
        xs.push_back(a + (b - a) * i / (kGrid - 1));
        fs.push_back(objective(std::exp(xs.back())));
    }
    const auto refine = [&](std::size_t i) {
        const auto [x, fx] = detail::golden_log(objective, xs[i > 0 ? i - 1 : 0],
                                                xs[std::min(i + 1, xs.size() - 1)], 40);
        return fx < fs[i] ? std::pair{std::exp(x), fx} : std::pair{std::exp(xs[i]), fs[i]};
    };
    // (fraction, sum of squares) of f = 0 and of every refined local minimum, in increasing f
    std::vector<std::pair<double, double>> minima{{0.0, spread(r0).first}};
    for (std::size_t i = 0; i < xs.size(); ++i) {
        const bool left = i == 0 || fs[i] <= fs[i - 1];
        const bool right = i + 1 == xs.size() || fs[i] <= fs[i + 1];
        if (left && right) minima.push_back(refine(i));
    }
    double best_ss = 1e300;
    for (const auto& m : minima) best_ss = std::min(best_ss, m.second);
    const auto rms_of = [&](double ss) { return std::sqrt(ss / static_cast<double>(n)); };
    double best_f = 0;
    for (const auto& m : minima) {
        if (rms_of(m.second) <= rms_of(best_ss) + kRmsTolerance) {
            best_f = m.first;
            break;
        }
    }
    out.stalls.fraction = best_f;
    out.at_upper_bound = best_f >= kMaxStallFraction * (1 - 1e-9);
    const std::vector<double> r1 = residuals(best_f, &out.model_with_s);
    const double ss0 = spread(r0).first;
    const auto [ss1, m1] = spread(r1);
    out.rms_without = std::sqrt(ss0 / static_cast<double>(n));
    out.rms_with = std::sqrt(ss1 / static_cast<double>(n));
    out.level = std::exp(m1);
    out.least_share = 1e300;
    for (std::size_t k = 0; k < n; ++k) {
        out.least_share =
            std::min(out.least_share, out.model_with_s[k] / out.model_without_s[k] - 1);
    }
    return out;
}

}  // namespace prism::fit
