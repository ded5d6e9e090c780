#include "src/run/run_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "src/common/error.hpp"

namespace prism {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kSecondsPerDay = 86400.0;
constexpr double kSecondsPerHour = 3600.0;
// Standard normal quantiles of the reported run-time percentiles.
constexpr double kZ95 = 1.6448536269514722;
constexpr double kZ99 = 2.3263478740408408;
// The Normal-Power approximation is monotone for z > -3/|skew|; |skew| <= 1 keeps it monotone
// down to p = 0.0013 and is far above the skew of a run (a sum of thousands of segments).
constexpr double kMaxSkew = 1.0;

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

/// P(Poisson(x) > k) / x^k without cancellation for small x.
double poisson_tail_over_pow(int k, double x) {
    if (x < 1.0) {
        // e^{-x} sum_{j>k} x^{j-k} / j!: all terms positive.
        double term = 1.0;
        for (int j = 1; j <= k + 1; ++j) term /= j;
        term *= x;  // x^1 / (k+1)!
        double sum = 0.0;
        for (int j = k + 1; j < k + 40 && term > 1e-18 * sum; ++j) {
            sum += term;
            term *= x / (j + 1);
        }
        return std::exp(-x) * sum;
    }
    double head = 0.0;
    double term = 1.0;
    for (int j = 0; j <= k; ++j) {
        head += term;
        term *= x / (j + 1);
    }
    return (1.0 - std::exp(-x) * head) / std::pow(x, k);
}

/// Cumulants of an exponential(rate) variable conditioned on being < width: the time lost to a
/// failure that strikes inside a window of `width` seconds.
Cumulants truncated_exponential_cumulants(double rate_per_s, double width_s) {
    if (width_s <= 0) return {};
    const double x = rate_per_s * width_s;
    const double norm = -std::expm1(-x);
    // E[(Y/width)^k] = k! P(Poisson(x) > k) / (x^k (1 - e^{-x}))
    const double m1 = 1.0 * poisson_tail_over_pow(1, x) / norm;
    const double m2 = 2.0 * poisson_tail_over_pow(2, x) / norm;
    const double m3 = 6.0 * poisson_tail_over_pow(3, x) / norm;
    return {m1 * width_s, (m2 - m1 * m1) * width_s * width_s,
            (m3 - 3.0 * m1 * m2 + 2.0 * m1 * m1 * m1) * width_s * width_s * width_s};
}

/// Cumulants of the number of failures before the first success of probability e^{-x}
/// (geometric): r/p, r/p^2, r(1+r)/p^3 with r = 1 - p.
Cumulants geometric_failure_cumulants(double x) {
    const double p = std::exp(-x);
    const double r = -std::expm1(-x);
    const double g1 = std::expm1(x);
    const double g2 = g1 / p;
    return {g1, g2, g2 * (1.0 + r) / p};
}

/// Cumulants of sum_{i=1}^{G} V_i (G independent of the iid V_i): the cumulant generating
/// function is K_G(K_V(s)); differentiate three times at 0 (Faa di Bruno).
Cumulants compound(const Cumulants& g, const Cumulants& v) {
    return {g.k1 * v.k1, g.k1 * v.k2 + g.k2 * v.k1 * v.k1,
            g.k1 * v.k3 + 3.0 * g.k2 * v.k1 * v.k2 + g.k3 * v.k1 * v.k1 * v.k1};
}

Cumulants operator+(const Cumulants& a, const Cumulants& b) {
    return {a.k1 + b.k1, a.k2 + b.k2, a.k3 + b.k3};
}

Cumulants scaled(const Cumulants& a, double n) { return {n * a.k1, n * a.k2, n * a.k3}; }

/// Expected failures striking the job while one segment of failure-free duration `window_s`
/// completes: expm1(lambda T) failures during the segment, each followed by e^{lambda R} - 1
/// failures during recovery on average.
double segment_failures(double window_s, double rate_per_s, double recovery_s) {
    return std::expm1(rate_per_s * window_s) * std::exp(rate_per_s * recovery_s);
}

double mean_step_s(const RunInput& in) {
    if (in.cluster_mean_s.empty()) return in.deterministic_step_s;
    double sum = 0;
    for (double m : in.cluster_mean_s) sum += m;
    return sum / static_cast<double>(in.cluster_mean_s.size());
}

void validate(const RunInput& in) {
    if (in.steps <= 0) throw ModelError(fmt::format("run: steps must be > 0 (got {})", in.steps));
    if (!(in.step_autocorrelation >= 0 && in.step_autocorrelation < 1)) {
        throw ModelError(fmt::format("run: step_autocorrelation must be in [0, 1) (got {})",
                                     in.step_autocorrelation));
    }
    if (in.cluster_mean_s.size() != in.cluster_var_s2.size()) {
        throw ModelError(fmt::format(
            "run: {} cluster step means but {} cluster step variances; they must pair up",
            in.cluster_mean_s.size(), in.cluster_var_s2.size()));
    }
    if (in.cluster_mean_s.empty() && !(in.deterministic_step_s > 0)) {
        throw ModelError(fmt::format("run: deterministic step time must be > 0 (got {} s)",
                                     in.deterministic_step_s));
    }
    for (std::size_t k = 0; k < in.cluster_mean_s.size(); ++k) {
        if (!(in.cluster_mean_s[k] > 0) || !(in.cluster_var_s2[k] >= 0)) {
            throw ModelError(fmt::format(
                "run: realization {}: step mean must be > 0 and variance >= 0 (got {} s, {} s^2)",
                k, in.cluster_mean_s[k], in.cluster_var_s2[k]));
        }
    }
    if (in.gpus <= 0) throw ModelError(fmt::format("run: gpus must be > 0 (got {})", in.gpus));
    if (in.gpus_per_node <= 0) {
        throw ModelError(fmt::format("run: gpus per node must be > 0 (got {})", in.gpus_per_node));
    }
    const FailureSpec& f = in.failures;
    if (!f.enabled) return;
    if (f.detection_s < 0 || f.restart_s < 0) {
        throw ModelError(
            fmt::format("failures: detection and restart must be >= 0 (got {} s, {} s)",
                        f.detection_s, f.restart_s));
    }
    if (in.checkpoint_bytes < 0) {
        throw ModelError(
            fmt::format("run: checkpoint size must be >= 0 (got {} bytes)", in.checkpoint_bytes));
    }
    if (in.checkpoint_bytes > 0 && !(f.checkpoint_bytes_per_s > 0)) {
        throw ModelError(
            fmt::format("failures.checkpoint_bandwidth: must be > 0 to write {} bytes (got {} B/s)",
                        in.checkpoint_bytes, f.checkpoint_bytes_per_s));
    }
    if (f.async_checkpoint && !(in.host_copy_bytes_per_s > 0)) {
        throw ModelError(fmt::format("run: host copy bandwidth must be > 0 (got {} B/s)",
                                     in.host_copy_bytes_per_s));
    }
    if (in.checkpoint_interval_override_s < 0) {
        throw ModelError(fmt::format("space.checkpoint_interval: must be >= 0 (got {} s)",
                                     in.checkpoint_interval_override_s));
    }
    if (in.checkpoint_interval_override_s == 0 && f.checkpoint_policy == CheckpointPolicy::fixed &&
        !(f.checkpoint_interval_s > 0)) {
        throw ModelError(
            fmt::format("failures.checkpoint_interval: must be > 0 with checkpoint_policy = "
                        "\"fixed\" (got {} s)",
                        f.checkpoint_interval_s));
    }
}

}  // namespace

double failure_rate_per_s(const FailureSpec& failures, std::int64_t gpus, int gpus_per_node) {
    const std::int64_t nodes = (gpus + gpus_per_node - 1) / gpus_per_node;
    double rate = 0;
    for (const FailureCause& c : failures.causes) {
        if (!(c.mtbf_s > 0)) {
            throw ModelError(
                fmt::format("failures.cause '{}': mtbf must be > 0 (got {} s)", c.name, c.mtbf_s));
        }
        if (!(c.weibull_shape > 0)) {
            throw ModelError(fmt::format("failures.cause '{}': weibull shape must be > 0 (got {})",
                                         c.name, c.weibull_shape));
        }
        rate += static_cast<double>(c.per_node ? nodes : gpus) / c.mtbf_s;
    }
    return rate;
}

double young_daly_interval_s(double checkpoint_s, double mtbf_s) {
    return std::sqrt(2.0 * checkpoint_s * mtbf_s);
}

double optimal_interval_s(double checkpoint_s, double rate_per_s) {
    if (!(rate_per_s > 0)) return kInf;
    const double c = -std::expm1(-rate_per_s * checkpoint_s);  // in [0, 1)
    if (c <= 0) return 0.0;
    // phi(x) = (x - 1) e^x + 1 = sum_{j>=2} (j - 1) x^j / j!, increasing and convex on x > 0;
    // phi(x) >= x^2 / 2 puts x0 = sqrt(2c) right of the root, so Newton decreases monotonically.
    auto phi = [](double x) {
        if (x > 0.1) return (x - 1.0) * std::exp(x) + 1.0;
        double term = x * x / 2.0;  // x^2 / 2!
        double sum = 0.0;
        for (int j = 2; j < 30; ++j) {
            sum += (j - 1) * term;
            term *= x / (j + 1);
        }
        return sum;
    };
    double x = std::min(std::sqrt(2.0 * c), 1.0);
    for (int it = 0; it < 60; ++it) {
        const double step = (phi(x) - c) / (x * std::exp(x));
        x -= step;
        if (std::abs(step) <= 1e-15 * x) break;
    }
    return x / rate_per_s;
}

Cumulants segment_time_cumulants(double window_s, double rate_per_s, double downtime_s,
                                 double recovery_s) {
    if (!(rate_per_s > 0) || window_s <= 0) return {window_s, 0, 0};
    // Recovery Z = D + R + sum_{j=1}^{H} (D + Y'_j): H failures during restart (geometric,
    // success e^{-lambda R}), each losing Y' < R and a new downtime.
    Cumulants z{downtime_s + recovery_s, 0, 0};
    if (recovery_s > 0) {
        Cumulants per_retry = truncated_exponential_cumulants(rate_per_s, recovery_s);
        per_retry.k1 += downtime_s;
        z = z + compound(geometric_failure_cumulants(rate_per_s * recovery_s), per_retry);
    }
    // Segment S = T + sum_{i=1}^{G} (Y_i + Z_i): G failed attempts, each losing Y < T.
    const Cumulants per_failure = truncated_exponential_cumulants(rate_per_s, window_s) + z;
    Cumulants s = compound(geometric_failure_cumulants(rate_per_s * window_s), per_failure);
    s.k1 += window_s;
    return s;
}

CheckpointPlan plan_checkpoints(const RunInput& in) {
    validate(in);
    CheckpointPlan plan;
    const FailureSpec& f = in.failures;
    plan.enabled = f.enabled;
    if (!f.enabled) {
        plan.interval_s = std::numeric_limits<double>::quiet_NaN();
        plan.interval_opt_s = std::numeric_limits<double>::quiet_NaN();
        return plan;
    }
    const double step_s = mean_step_s(in);
    const double work_s = static_cast<double>(in.steps) * step_s;
    plan.failure_rate_per_s = failure_rate_per_s(f, in.gpus, in.gpus_per_node);
    const double write_s =
        in.checkpoint_bytes > 0 ? in.checkpoint_bytes / f.checkpoint_bytes_per_s : 0.0;
    plan.downtime_s = f.detection_s;
    plan.recovery_s = f.restart_s;
    plan.commit_s = write_s;
    double min_interval_s = step_s;
    if (f.async_checkpoint) {
        // Snapshot to host memory blocks; each GPU copies its shard of the checkpoint.
        plan.blocking_s =
            in.checkpoint_bytes / (static_cast<double>(in.gpus) * in.host_copy_bytes_per_s);
        // A failure while the write is in flight loses that checkpoint: on average one write
        // time of extra work per failure (failure offset uniform over the segment).
        plan.downtime_s += write_s;
        min_interval_s = std::max(min_interval_s, write_s);
    } else {
        plan.blocking_s = write_s;
    }
    auto clamp = [&](double tau) {
        return std::clamp(tau, min_interval_s, std::max(work_s, min_interval_s));
    };

    plan.interval_opt_s = clamp(optimal_interval_s(plan.blocking_s, plan.failure_rate_per_s));
    double tau = 0;
    if (in.checkpoint_interval_override_s > 0) {
        tau = in.checkpoint_interval_override_s;
    } else {
        switch (f.checkpoint_policy) {
            case CheckpointPolicy::fixed:
                tau = f.checkpoint_interval_s;
                break;
            case CheckpointPolicy::young_daly:
                tau = plan.failure_rate_per_s > 0
                          ? young_daly_interval_s(plan.blocking_s, 1.0 / plan.failure_rate_per_s)
                          : kInf;
                break;
            case CheckpointPolicy::optimal:
                tau = plan.interval_opt_s;
                break;
        }
    }
    plan.interval_s = clamp(tau);
    return plan;
}

RunTimeDistribution::RunTimeDistribution(std::vector<Component> components)
    : components_(std::move(components)) {
    double total = 0;
    for (const Component& c : components_) total += c.weight;
    mean_s_ = 0;
    for (Component& c : components_) {
        c.weight /= total;
        c.skew = std::clamp(c.skew, -kMaxSkew, kMaxSkew);
        mean_s_ += c.weight * c.mean_s;
    }
}

namespace {

// Normal-Power approximation (actuarial, for compound sums): with x the standardized value and
// g the skewness, P(X <= x) ~ Phi(z), z = (sqrt(9 + g^2 + 6 g x) - 3) / g, written without the
// division by g; inverse x = z + g (z^2 - 1) / 6.
double component_cdf(const RunTimeDistribution::Component& c, double t_s) {
    if (c.sd_s <= 0) return t_s >= c.mean_s ? 1.0 : 0.0;
    const double x = (t_s - c.mean_s) / c.sd_s;
    const double g = c.skew;
    const double arg = 9.0 + g * g + 6.0 * g * x;
    if (arg < 0) return g > 0 ? 0.0 : 1.0;
    return normal_cdf((g + 6.0 * x) / (std::sqrt(arg) + 3.0));
}

/// CDF and density together (dz/dx = 3 / sqrt(9 + g^2 + 6 g x)); a point mass has density 0.
std::pair<double, double> component_cdf_pdf(const RunTimeDistribution::Component& c, double t_s) {
    if (c.sd_s <= 0) return {t_s >= c.mean_s ? 1.0 : 0.0, 0.0};
    const double x = (t_s - c.mean_s) / c.sd_s;
    const double g = c.skew;
    const double arg = 9.0 + g * g + 6.0 * g * x;
    if (arg <= 0) return {g > 0 ? 0.0 : 1.0, 0.0};
    const double root = std::sqrt(arg);
    const double z = (g + 6.0 * x) / (root + 3.0);
    const double density = std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI) * 3.0 / root / c.sd_s;
    return {normal_cdf(z), density};
}

double component_quantile(const RunTimeDistribution::Component& c, double z) {
    return c.mean_s + c.sd_s * (z + c.skew * (z * z - 1.0) / 6.0);
}

/// Acklam's rational approximation refined by one Halley step (|error| < 1e-13).
double normal_quantile(double p) {
    static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                   -2.759285104469687e+02, 1.383577518672690e+02,
                                   -3.066479806614716e+01, 2.506628277459239e+00};
    static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                   -1.556989798598866e+02, 6.680131188771972e+01,
                                   -1.328068155288572e+01};
    static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                   -2.400758277161838e+00, -2.549732539343734e+00,
                                   4.374664141464968e+00,  2.938163982698783e+00};
    static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                   2.445134137142996e+00, 3.754408661907416e+00};
    double x;
    if (p < 0.02425) {
        const double q = std::sqrt(-2 * std::log(p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    } else if (p > 1 - 0.02425) {
        const double q = std::sqrt(-2 * std::log(1 - p));
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    } else {
        const double q = p - 0.5;
        const double r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
    }
    const double e = normal_cdf(x) - p;
    const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
    return x - u / (1 + x * u / 2);
}

}  // namespace

double RunTimeDistribution::cdf(double t_s) const {
    if (components_.empty()) return std::numeric_limits<double>::quiet_NaN();
    double sum = 0;
    for (const Component& c : components_) sum += c.weight * component_cdf(c, t_s);
    return std::clamp(sum, 0.0, 1.0);
}

double RunTimeDistribution::quantile(double p) const {
    if (components_.empty() || !(p > 0 && p < 1)) return std::numeric_limits<double>::quiet_NaN();
    const double z = p == 0.5 ? 0.0 : p == 0.95 ? kZ95 : p == 0.99 ? kZ99 : normal_quantile(p);
    if (components_.size() == 1) return component_quantile(components_[0], z);
    // The mixture quantile lies between the smallest and largest component quantile.
    double a = kInf;
    double b = -kInf;
    double m2 = 0;
    double m3 = 0;
    for (const Component& c : components_) {
        const double q = component_quantile(c, z);
        a = std::min(a, q);
        b = std::max(b, q);
        const double d = c.mean_s - mean_s_;
        const double v = c.sd_s * c.sd_s;
        m2 += c.weight * (v + d * d);
        m3 += c.weight * (c.skew * v * c.sd_s + 3.0 * v * d + d * d * d);
    }
    const double tol = 1e-10 * std::max(std::abs(a), std::abs(b)) + 1e-12;
    if (b - a <= tol) return 0.5 * (a + b);
    // Start from the Normal-Power quantile of the whole mixture (its own three moments), then
    // Newton, falling back to bisection whenever a step leaves the bracket.
    Component whole{1.0, mean_s_, std::sqrt(m2), m2 > 0 ? m3 / (m2 * std::sqrt(m2)) : 0.0};
    whole.skew = std::clamp(whole.skew, -kMaxSkew, kMaxSkew);
    double x = std::clamp(component_quantile(whole, z), a, b);
    for (int it = 0; it < 200; ++it) {
        double f = 0;
        double density = 0;
        for (const Component& c : components_) {
            const auto [cf, cd] = component_cdf_pdf(c, x);
            f += c.weight * cf;
            density += c.weight * cd;
        }
        (f < p ? a : b) = x;
        double next = density > 0 ? x - (f - p) / density : 0.5 * (a + b);
        if (!(next > a && next < b)) next = 0.5 * (a + b);
        if (std::abs(next - x) <= tol || b - a <= tol) return next;
        x = next;
    }
    return x;
}

double ar1_sum_variance_factor(double n, double rho) {
    if (rho == 0) return n;
    return n * (1 + rho) / (1 - rho) - 2 * rho * (1 - std::pow(rho, n)) / ((1 - rho) * (1 - rho));
}

RunAnalysis analyze_run(const RunInput& in) {
    RunAnalysis out;
    out.plan = plan_checkpoints(in);
    const CheckpointPlan& plan = out.plan;
    const double n = static_cast<double>(in.steps);
    const double step_s = mean_step_s(in);
    out.work_mean_s = n * step_s;

    // Run-time cumulants for the mean realization; segments are independent, so cumulants add.
    Cumulants base{out.work_mean_s, 0, 0};
    double failure_free_s = out.work_mean_s;  // work + checkpoints: the run nothing strikes
    if (plan.enabled) {
        const double tau = plan.interval_s;
        const double full = std::floor(out.work_mean_s / tau);
        double last_s = out.work_mean_s - full * tau;
        if (last_s <= 1e-12 * out.work_mean_s) last_s = 0;
        auto segment = [&](double work) {
            return segment_time_cumulants(work + plan.blocking_s, plan.failure_rate_per_s,
                                          plan.downtime_s, plan.recovery_s);
        };
        auto failures = [&](double work) {
            return segment_failures(work + plan.blocking_s, plan.failure_rate_per_s,
                                    plan.recovery_s);
        };
        failure_free_s += (full + (last_s > 0 ? 1.0 : 0.0)) * plan.blocking_s;
        base = scaled(segment(tau), full);
        out.interruptions_mean = full * failures(tau);
        if (last_s > 0) {
            base = base + segment(last_s);
            out.interruptions_mean += failures(last_s);
        }
    }

    // Realization k does m_k / m-bar times the mean work: as many more segments, so every
    // failure cumulant scales by that ratio; the steps' own noise adds n v_k to the variance.
    // The runs no failure strikes (probability e^{-lambda * exposed}) form an atom at the
    // failure-free time; the moments of the others follow from removing it from the whole.
    std::vector<RunTimeDistribution::Component> components;
    const FailureSpec& f = in.failures;
    const bool drain = f.straggler_detection_s > 0 && in.healthy_mean_s > 0;
    std::size_t drained = 0;
    double work_sum_s = 0;  // the realizations' compute, drained ones at their drained time
    auto add = [&](double mean_k, double var_k) {
        // a detected straggler: n_1 steps at m_k, then the healthy cluster after a planned
        // checkpoint and the replacement (shift: no failure strikes it)
        double shift = 0;
        if (drain && mean_k > in.healthy_mean_s * (1 + f.straggler_threshold)) {
            const double n1 = std::min(n, f.straggler_detection_s / mean_k);
            if (n1 < n) {
                mean_k = (n1 * mean_k + (n - n1) * in.healthy_mean_s) / n;
                var_k = (n1 * var_k + (n - n1) * in.healthy_var_s2) / n;
                shift = plan.blocking_s + f.straggler_replacement_s;
                ++drained;
            }
        }
        work_sum_s += n * mean_k;
        const double ratio = mean_k / step_s;
        const double noise = ar1_sum_variance_factor(n, in.step_autocorrelation) * var_k;
        const Cumulants c{ratio * base.k1, ratio * base.k2, ratio * base.k3};
        const double p_fail = -std::expm1(-plan.failure_rate_per_s * ratio * failure_free_s);
        const double p_none = 1.0 - p_fail;
        auto component = [&](double weight, double mean, double var, double third) {
            const double sd = std::sqrt(var);
            components.push_back({weight, mean + shift, sd, var > 0 ? third / (var * sd) : 0.0});
        };
        if (p_fail <= 0 || p_none < 1e-6) {
            component(1.0, c.k1, c.k2 + noise, c.k3);
            return;
        }
        // Moments about the overall mean: M_j = p_none d^j + p_fail E[(X - mean)^j | failure].
        const double d = ratio * failure_free_s - c.k1;
        const double c1 = -p_none * d / p_fail;
        const double c2 = (c.k2 - p_none * d * d) / p_fail;
        const double c3 = (c.k3 - p_none * d * d * d) / p_fail;
        component(p_none, ratio * failure_free_s, noise, 0.0);
        component(p_fail, c.k1 + c1, std::max(c2 - c1 * c1, 0.0) + noise,
                  c3 - 3.0 * c1 * c2 + 2.0 * c1 * c1 * c1);
    };
    if (!std::isfinite(base.k1) || !std::isfinite(base.k2) || !std::isfinite(base.k3)) {
        // Segments essentially never complete (lambda * (tau + C) beyond ~700): the run does
        // not finish; report it as an infinite time rather than NaN moments.
        out.run_time = RunTimeDistribution({{1.0, kInf, 0.0, 0.0}});
        return out;
    }
    if (in.cluster_mean_s.empty()) {
        add(in.deterministic_step_s, 0.0);
    } else {
        components.reserve(2 * in.cluster_mean_s.size());
        for (std::size_t k = 0; k < in.cluster_mean_s.size(); ++k) {
            add(in.cluster_mean_s[k], in.cluster_var_s2[k]);
        }
        out.drained_fraction =
            static_cast<double>(drained) / static_cast<double>(in.cluster_mean_s.size());
        if (drained > 0)
            out.work_mean_s = work_sum_s / static_cast<double>(in.cluster_mean_s.size());
    }
    out.run_time = RunTimeDistribution(std::move(components));
    return out;
}

RunMetrics evaluate_run(const RunInput& input, std::uint64_t /*seed*/,
                        std::uint64_t /*point_index*/) {
    const RunAnalysis a = analyze_run(input);
    const double gpus = static_cast<double>(input.gpus);
    RunMetrics m;
    m.run_time_mean_s = a.run_time.mean_s();
    const double p95_s = a.run_time.quantile(0.95);
    m.run_time_p50_days = a.run_time.quantile(0.5) / kSecondsPerDay;
    m.run_time_p95_days = p95_s / kSecondsPerDay;
    m.run_time_p99_days = a.run_time.quantile(0.99) / kSecondsPerDay;
    m.ettr = a.work_mean_s / m.run_time_mean_s;
    m.interruptions_mean = a.interruptions_mean;
    m.gpu_hours_mean = gpus * m.run_time_mean_s / kSecondsPerHour;
    m.gpu_hours_p95 = gpus * p95_s / kSecondsPerHour;
    m.p_run_le_deadline.reserve(input.failures.deadlines_s.size());
    for (double d : input.failures.deadlines_s) m.p_run_le_deadline.push_back(a.run_time.cdf(d));
    m.checkpoint_interval_s = a.plan.interval_s;
    m.checkpoint_interval_opt_s = a.plan.interval_opt_s;
    m.checkpoint_cost_s = a.plan.blocking_s;
    return m;
}

}  // namespace prism
