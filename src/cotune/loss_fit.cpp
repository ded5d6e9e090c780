#include "src/cotune/loss_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "src/common/error.hpp"

namespace prism::cotune {

namespace {

constexpr double kHuberK = 1.345;
constexpr double kMadToSigma = 1.4826;  // 1 / Phi^-1(3/4)
constexpr double kMinDecay = 1e-3;      // -b X: decays over the curve's span X searched
constexpr double kMaxDecay = 50.0;
constexpr int kScan = 97;
constexpr int kMaxPasses = 50;

struct Linear {
    double a = 0;
    double c = 0;
    double rss = std::numeric_limits<double>::infinity();
};

/// For a fixed rate b, the weighted least-squares (a, c) and the weighted residual sum.
Linear solve_linear(std::span<const double> x, std::span<const double> y, std::span<const double> w,
                    double b) {
    double sw = 0, sp = 0, spp = 0, sy = 0, spy = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double p = std::exp(b * x[i]);
        sw += w[i];
        sp += w[i] * p;
        spp += w[i] * p * p;
        sy += w[i] * y[i];
        spy += w[i] * p * y[i];
    }
    const double det = spp * sw - sp * sp;
    Linear out;
    if (!(det > 1e-300)) return out;
    out.a = (sw * spy - sp * sy) / det;
    out.c = (spp * sy - sp * spy) / det;
    out.rss = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double r = y[i] - out.a * std::exp(b * x[i]) - out.c;
        out.rss += w[i] * r * r;
    }
    return out;
}

/// The rate b minimizing the weighted residual sum: a log-spaced scan, then golden section on
/// log(-b) between the neighbours of the best scanned rate.
double best_rate(std::span<const double> x, std::span<const double> y, std::span<const double> w,
                 double span, bool* at_bound) {
    auto rss_at = [&](double log_decay) {
        return solve_linear(x, y, w, -std::exp(log_decay) / span).rss;
    };
    const double lo = std::log(kMinDecay), hi = std::log(kMaxDecay);
    const double step = (hi - lo) / (kScan - 1);
    int best = 0;
    double best_rss = std::numeric_limits<double>::infinity();
    for (int k = 0; k < kScan; ++k) {
        const double rss = rss_at(lo + k * step);
        if (rss < best_rss) {
            best_rss = rss;
            best = k;
        }
    }
    double a = lo + std::max(best - 1, 0) * step;
    double b = lo + std::min(best + 1, kScan - 1) * step;
    const double g = 0.5 * (std::sqrt(5.0) - 1.0);
    double c = b - g * (b - a), d = a + g * (b - a);
    double fc = rss_at(c), fd = rss_at(d);
    for (int it = 0; it < 80 && b - a > 1e-12; ++it) {
        if (fc < fd) {
            b = d;
            d = c;
            fd = fc;
            c = b - g * (b - a);
            fc = rss_at(c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + g * (b - a);
            fd = rss_at(d);
        }
    }
    const double log_decay = 0.5 * (a + b);
    *at_bound = log_decay <= lo + step * 1e-3 || log_decay >= hi - step * 1e-3;
    return -std::exp(log_decay) / span;
}

double median(std::vector<double> v) {
    const std::size_t n = v.size();
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.end());
    const double upper = v[n / 2];
    if (n % 2 == 1) return upper;
    return 0.5 *
           (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2)));
}

}  // namespace

double ExponentialFit::predict(double step) const {
    return a * std::exp(b * (step - first_step)) + c;
}

FitOutcome fit_exponential(std::span<const double> steps, std::span<const double> losses) {
    const std::size_t n = steps.size();
    if (n != losses.size()) {
        throw ModelError(fmt::format("fit: {} steps but {} losses", n, losses.size()));
    }
    if (n < 5) throw ModelError(fmt::format("fit: {} points; a fit needs at least 5", n));
    for (std::size_t i = 1; i < n; ++i) {
        if (!(steps[i] > steps[i - 1])) {
            throw ModelError(
                fmt::format("fit: step {} is not after step {}", steps[i], steps[i - 1]));
        }
    }
    FitOutcome out;
    // Does the loss fall at all? Compare the medians of the first and last quarters: a few
    // spikes cannot make a flat or rising curve look like it decreases.
    const std::size_t quarter = std::max<std::size_t>(1, n / 4);
    const double head =
        median({losses.begin(), losses.begin() + static_cast<std::ptrdiff_t>(quarter)});
    const double tail = median({losses.end() - static_cast<std::ptrdiff_t>(quarter), losses.end()});
    if (!(tail < head)) {
        out.rejected = fmt::format(
            "the loss does not decrease (median {:.6g} over its last {} points, {:.6g} over its "
            "first {})",
            tail, quarter, head, quarter);
        return out;
    }

    std::vector<double> x(n), w(n, 1.0), r(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = steps[i] - steps[0];
    const double span = x.back();
    ExponentialFit fit;
    fit.first_step = steps[0];
    fit.points = n;
    for (int pass = 0; pass < kMaxPasses; ++pass) {
        bool at_bound = false;
        const double b = best_rate(x, losses, w, span, &at_bound);
        const Linear lin = solve_linear(x, losses, w, b);
        const bool settled = pass > 0 && std::abs(b - fit.b) <= 1e-9 * std::abs(b) &&
                             std::abs(lin.a - fit.a) <= 1e-9 * (std::abs(lin.a) + 1e-300) &&
                             std::abs(lin.c - fit.c) <= 1e-9 * (std::abs(lin.c) + 1e-300);
        fit.a = lin.a;
        fit.b = b;
        fit.c = lin.c;
        fit.rate_at_bound = at_bound;
        for (std::size_t i = 0; i < n; ++i) r[i] = losses[i] - fit.predict(steps[i]);
        std::vector<double> abs_r(n);
        for (std::size_t i = 0; i < n; ++i) abs_r[i] = std::abs(r[i]);
        fit.robust_sigma = kMadToSigma * median(abs_r);
        if (settled || !(fit.robust_sigma > 0)) break;
        const double cut = kHuberK * fit.robust_sigma;
        for (std::size_t i = 0; i < n; ++i) w[i] = abs_r[i] <= cut ? 1.0 : cut / abs_r[i];
    }
    double mean = 0;
    for (double y : losses) mean += y;
    mean /= static_cast<double>(n);
    double ss_res = 0, ss_tot = 0;
    for (std::size_t i = 0; i < n; ++i) {
        ss_res += r[i] * r[i];
        ss_tot += (losses[i] - mean) * (losses[i] - mean);
        if (w[i] < 0.5) ++fit.downweighted;
    }
    fit.rmse = std::sqrt(ss_res / static_cast<double>(n));
    fit.r_squared = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
    fit.decay_seen = -std::expm1(fit.b * span);
    if (!(fit.a > 0)) {
        out.rejected =
            fmt::format("the loss does not decrease (the fit rises toward c = {:.6g}: a = {:.3g})",
                        fit.c, fit.a);
        return out;
    }
    out.fit = fit;
    return out;
}

std::optional<std::size_t> best_learning_rate(std::span<const FitOutcome> outcomes,
                                              double tau_step) {
    std::optional<std::size_t> best;
    for (std::size_t k = 0; k < outcomes.size(); ++k) {
        if (!outcomes[k].fit) continue;
        if (!best || outcomes[k].fit->predict(tau_step) < outcomes[*best].fit->predict(tau_step)) {
            best = k;
        }
    }
    return best;
}

}  // namespace prism::cotune
