#include "src/stochastic/distribution.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "src/common/error.hpp"

namespace prism::stochastic {

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

const char* kind_name(DistKind k) {
    switch (k) {
        case DistKind::constant:
            return "constant";
        case DistKind::normal:
            return "normal";
        case DistKind::lognormal:
            return "lognormal";
        case DistKind::gamma:
            return "gamma";
        case DistKind::empirical:
            return "empirical";
        case DistKind::mixture:
            return "mixture";
    }
    return "?";
}

/// Solves f(x) = target for a non-decreasing f by bisection on [lo, hi] (widened if needed).
template <class F>
double bisect_increasing(F f, double target, double lo, double hi) {
    for (int i = 0; i < 200 && f(lo) > target; ++i) lo = lo > 0 ? lo * 0.5 : lo * 2 - 1;
    for (int i = 0; i < 200 && f(hi) < target; ++i) hi = hi > 0 ? hi * 2 + 1 : hi * 0.5;
    for (int i = 0; i < 200; ++i) {
        const double mid = 0.5 * (lo + hi);
        if (mid <= lo || mid >= hi) break;
        if (f(mid) < target) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return hi;
}

}  // namespace

double normal_cdf(double z) { return 0.5 * std::erfc(-z * kInvSqrt2); }
double normal_pdf(double z) { return kInvSqrt2Pi * std::exp(-0.5 * z * z); }
double normal_sf(double z) { return 0.5 * std::erfc(z * kInvSqrt2); }

double normal_quantile(double p) {
    // Wichura (1988), Algorithm AS241 PPND16.
    if (p <= 0) return -std::numeric_limits<double>::infinity();
    if (p >= 1) return std::numeric_limits<double>::infinity();
    const double q = p - 0.5;
    if (std::fabs(q) <= 0.425) {
        const double r = 0.180625 - q * q;
        return q *
               (((((((2.5090809287301226727e+3 * r + 3.3430575583588128105e+4) * r +
                     6.7265770927008700853e+4) *
                        r +
                    4.5921953931549871457e+4) *
                       r +
                   1.3731693765509461125e+4) *
                      r +
                  1.9715909503065514427e+3) *
                     r +
                 1.3314166789178437745e+2) *
                    r +
                3.3871328727963666080e0) /
               (((((((5.2264952788528545610e+3 * r + 2.8729085735721942674e+4) * r +
                     3.9307895800092710610e+4) *
                        r +
                    2.1213794301586595867e+4) *
                       r +
                   5.3941960214247511077e+3) *
                      r +
                  6.8718700749205790830e+2) *
                     r +
                 4.2313330701600911252e+1) *
                    r +
                1.0);
    }
    double r = q < 0 ? p : 1.0 - p;
    r = std::sqrt(-std::log(r));
    double val;
    if (r <= 5.0) {
        r -= 1.6;
        val = (((((((7.74545014278341407640e-4 * r + 2.27238449892691845833e-2) * r +
                    2.41780725177450611770e-1) *
                       r +
                   1.27045825245236838258e0) *
                      r +
                  3.64784832476320460504e0) *
                     r +
                 5.76949722146069140550e0) *
                    r +
                4.63033784615654529590e0) *
                   r +
               1.42343711074968357734e0) /
              (((((((1.05075007164441684324e-9 * r + 5.47593808499534494600e-4) * r +
                    1.51986665636164571966e-2) *
                       r +
                   1.48103976427480074590e-1) *
                      r +
                  6.89767334985100004550e-1) *
                     r +
                 1.67638483018380384940e0) *
                    r +
                2.05319162663775882187e0) *
                   r +
               1.0);
    } else {
        r -= 5.0;
        val = (((((((2.01033439929228813265e-7 * r + 2.71155556874348757815e-5) * r +
                    1.24266094738807843860e-3) *
                       r +
                   2.65321895265761230930e-2) *
                      r +
                  2.96560571828504891230e-1) *
                     r +
                 1.78482653991729133580e0) *
                    r +
                5.46378491116411436990e0) *
                   r +
               6.65790464350110377720e0) /
              (((((((2.04426310338993978564e-15 * r + 1.42151175831644588870e-7) * r +
                    1.84631831751005468180e-5) *
                       r +
                   7.86869131145613259100e-4) *
                      r +
                  1.48753612908506148525e-2) *
                     r +
                 1.36929880922735805310e-1) *
                    r +
                5.99832206555887937690e-1) *
                   r +
               1.0);
    }
    return q < 0 ? -val : val;
}

double gamma_p(double a, double x) {
    if (x <= 0) return 0.0;
    if (x >= a + 1.0) return 1.0 - gamma_q(a, x);
    // series: P = e^-x x^a / Gamma(a+1) * sum x^n / ((a+1)...(a+n))
    double ap = a;
    double sum = 1.0 / a;
    double del = sum;
    for (int n = 0; n < 10000; ++n) {
        ap += 1.0;
        del *= x / ap;
        sum += del;
        if (std::fabs(del) < std::fabs(sum) * 1e-17) break;
    }
    return sum * std::exp(-x + a * std::log(x) - std::lgamma(a));
}

double gamma_q(double a, double x) {
    if (x <= 0) return 1.0;
    if (x < a + 1.0) return 1.0 - gamma_p(a, x);
    // modified Lentz continued fraction
    constexpr double tiny = 1e-300;
    double b = x + 1.0 - a;
    double c = 1.0 / tiny;
    double d = 1.0 / b;
    double h = d;
    for (int i = 1; i < 10000; ++i) {
        const double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (std::fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (std::fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        const double del = d * c;
        h *= del;
        if (std::fabs(del - 1.0) < 1e-16) break;
    }
    return std::exp(-x + a * std::log(x) - std::lgamma(a)) * h;
}

Distribution::Distribution(const DistributionSpec& spec)
    : kind_(spec.kind), mean_(spec.mean), cv_(spec.cv) {
    if (!(spec.cv >= 0)) {
        throw ConfigError(
            fmt::format("{} distribution: cv must be >= 0, got {}", kind_name(spec.kind), spec.cv));
    }
    if (spec.kind != DistKind::empirical && spec.kind != DistKind::mixture && !(spec.mean > 0)) {
        throw ConfigError(fmt::format("{} distribution: mean must be > 0, got {}",
                                      kind_name(spec.kind), spec.mean));
    }
    if (spec.cv == 0 && spec.kind != DistKind::empirical && spec.kind != DistKind::mixture) {
        kind_ = DistKind::constant;
    }
    switch (kind_) {
        case DistKind::constant:
            break;
        case DistKind::normal:
            mu_ = spec.mean;
            sigma_ = spec.cv * spec.mean;
            below0_ = normal_cdf(-mu_ / sigma_);
            break;
        case DistKind::lognormal:
            lsigma_ = std::sqrt(std::log1p(spec.cv * spec.cv));
            lmu_ = std::log(spec.mean) - 0.5 * lsigma_ * lsigma_;
            break;
        case DistKind::gamma:
            shape_ = 1.0 / (spec.cv * spec.cv);
            scale_ = spec.mean * spec.cv * spec.cv;
            break;
        case DistKind::empirical:
            if (spec.samples.empty()) {
                throw ConfigError("empirical distribution: no samples");
            }
            samples_ = spec.samples;
            std::sort(samples_.begin(), samples_.end());
            if (samples_.front() < 0) {
                throw ConfigError(fmt::format(
                    "empirical distribution: samples must be >= 0, got {}", samples_.front()));
            }
            break;
        case DistKind::mixture: {
            double total = 0;
            for (const auto& c : spec.components) total += std::max(0.0, c.weight);
            if (!(total > 0)) throw ConfigError("mixture distribution: no positive weight");
            for (const auto& c : spec.components) {
                if (c.weight <= 0) continue;
                weights_.push_back(c.weight / total);
                components_.emplace_back(c.dist);
            }
            if (components_.size() == 1 && components_[0].kind_ != DistKind::mixture) {
                *this = Distribution(components_[0]);
            }
            break;
        }
    }
}

bool Distribution::is_constant() const {
    if (kind_ == DistKind::constant) return true;
    if (kind_ == DistKind::empirical) return samples_.front() == samples_.back();
    return false;
}

double Distribution::mean() const {
    switch (kind_) {
        case DistKind::constant:
            return mean_;
        case DistKind::normal: {
            const double a = -mu_ / sigma_;
            return mu_ + sigma_ * normal_pdf(a) / (1.0 - below0_);
        }
        case DistKind::lognormal:
        case DistKind::gamma:
            return mean_;
        case DistKind::empirical:
            return std::accumulate(samples_.begin(), samples_.end(), 0.0) /
                   static_cast<double>(samples_.size());
        case DistKind::mixture: {
            double m = 0;
            for (size_t i = 0; i < components_.size(); ++i)
                m += weights_[i] * components_[i].mean();
            return m;
        }
    }
    return mean_;
}

double Distribution::variance() const {
    switch (kind_) {
        case DistKind::constant:
            return 0.0;
        case DistKind::normal: {
            const double a = -mu_ / sigma_;
            const double lam = normal_pdf(a) / (1.0 - below0_);
            return sigma_ * sigma_ * (1.0 + a * lam - lam * lam);
        }
        case DistKind::lognormal:
        case DistKind::gamma:
            return mean_ * mean_ * cv_ * cv_;
        case DistKind::empirical: {
            const double m = mean();
            double s = 0;
            for (double x : samples_) s += (x - m) * (x - m);
            return s / static_cast<double>(samples_.size());
        }
        case DistKind::mixture: {
            const double m = mean();
            double s = 0;
            for (size_t i = 0; i < components_.size(); ++i) {
                const double mi = components_[i].mean();
                s += weights_[i] * (components_[i].variance() + (mi - m) * (mi - m));
            }
            return s;
        }
    }
    return 0.0;
}

double Distribution::cdf(double x) const {
    switch (kind_) {
        case DistKind::constant:
            return x >= mean_ ? 1.0 : 0.0;
        case DistKind::normal:
            if (x <= 0) return 0.0;
            return std::max(0.0, (normal_cdf((x - mu_) / sigma_) - below0_) / (1.0 - below0_));
        case DistKind::lognormal:
            return x <= 0 ? 0.0 : normal_cdf((std::log(x) - lmu_) / lsigma_);
        case DistKind::gamma:
            return gamma_p(shape_, x / scale_);
        case DistKind::empirical:
            return static_cast<double>(std::upper_bound(samples_.begin(), samples_.end(), x) -
                                       samples_.begin()) /
                   static_cast<double>(samples_.size());
        case DistKind::mixture: {
            double f = 0;
            for (size_t i = 0; i < components_.size(); ++i)
                f += weights_[i] * components_[i].cdf(x);
            return f;
        }
    }
    return 0.0;
}

double Distribution::sf(double x) const {
    switch (kind_) {
        case DistKind::constant:
            return x >= mean_ ? 0.0 : 1.0;
        case DistKind::normal:
            if (x <= 0) return 1.0;
            return std::min(1.0, normal_sf((x - mu_) / sigma_) / (1.0 - below0_));
        case DistKind::lognormal:
            return x <= 0 ? 1.0 : normal_sf((std::log(x) - lmu_) / lsigma_);
        case DistKind::gamma:
            return gamma_q(shape_, x / scale_);
        case DistKind::empirical:
            return 1.0 - cdf(x);
        case DistKind::mixture: {
            double s = 0;
            for (size_t i = 0; i < components_.size(); ++i) s += weights_[i] * components_[i].sf(x);
            return s;
        }
    }
    return 0.0;
}

double Distribution::quantile_of_score(double z) const {
    switch (kind_) {
        case DistKind::constant:
            return mean_;
        case DistKind::lognormal:
            return std::exp(lmu_ + lsigma_ * z);
        case DistKind::normal:
            if (below0_ == 0.0) return mu_ + sigma_ * z;
            break;
        default:
            break;
    }
    return z > 0 ? quantile_upper(normal_sf(z)) : quantile(normal_cdf(z));
}

double Distribution::partial_mean_of_scores(double z1, double z2) const {
    if (!(z2 > z1)) return 0.0;
    auto cdf = [](double z) { return z == -HUGE_VAL ? 0.0 : z == HUGE_VAL ? 1.0 : normal_cdf(z); };
    auto pdf = [](double z) {
        return std::isinf(z) ? 0.0 : 0.39894228040143267794 * std::exp(-0.5 * z * z);
    };
    switch (kind_) {
        case DistKind::constant:
            return mean_ * (cdf(z2) - cdf(z1));
        case DistKind::lognormal:
            // E[e^(m + s Z); Z in (z1, z2)] = e^(m + s^2 / 2) (Phi(z2 - s) - Phi(z1 - s))
            return std::exp(lmu_ + 0.5 * lsigma_ * lsigma_) *
                   (cdf(z2 - lsigma_) - cdf(z1 - lsigma_));
        case DistKind::normal:
            if (below0_ == 0.0) return mu_ * (cdf(z2) - cdf(z1)) + sigma_ * (pdf(z1) - pdf(z2));
            break;
        default:
            break;
    }
    static constexpr std::array<double, 8> kX{
        -0.9602898564975363, -0.7966664774136267, -0.5255324099163290, -0.1834346424956498,
        0.1834346424956498,  0.5255324099163290,  0.7966664774136267,  0.9602898564975363};
    static constexpr std::array<double, 8> kW{
        0.1012285362903763, 0.2223810344533745, 0.3137066458778873, 0.3626837833783620,
        0.3626837833783620, 0.3137066458778873, 0.2223810344533745, 0.1012285362903763};
    const double a = std::max(z1, -8.0), b = std::min(z2, 8.0);
    if (!(b > a)) return 0.0;
    // panels at most 0.25 wide in z, 8 points each
    const int panels = std::max(1, static_cast<int>(std::ceil((b - a) / 0.25)));
    const double w = (b - a) / panels;
    double sum = 0;
    for (int k = 0; k < panels; ++k) {
        const double c = a + (k + 0.5) * w;
        for (int i = 0; i < 8; ++i) {
            const double z = c + 0.5 * w * kX[i];
            sum += 0.5 * w * kW[i] * quantile_of_score(z) * pdf(z);
        }
    }
    return sum;
}

double Distribution::quantile(double u) const {
    u = std::clamp(u, 0.0, 1.0);
    switch (kind_) {
        case DistKind::constant:
            return mean_;
        case DistKind::normal:
            if (u > 0.5) return quantile_upper(1.0 - u);
            return mu_ + sigma_ * normal_quantile(below0_ + u * (1.0 - below0_));
        case DistKind::lognormal:
            return std::exp(lmu_ + lsigma_ * normal_quantile(u));
        case DistKind::gamma: {
            if (u > 0.5) return quantile_upper(1.0 - u);
            if (u <= 0) return 0.0;
            const double guess = mean_ * std::exp(cv_ * normal_quantile(u));
            return bisect_increasing([&](double x) { return gamma_p(shape_, x / scale_); }, u,
                                     guess * 0.5, guess * 2.0);
        }
        case DistKind::empirical: {
            const auto n = static_cast<double>(samples_.size());
            const auto i = static_cast<size_t>(std::max(0.0, std::ceil(u * n) - 1.0));
            return samples_[std::min(i, samples_.size() - 1)];
        }
        case DistKind::mixture: {
            if (u > 0.5) return quantile_upper(1.0 - u);
            double lo = std::numeric_limits<double>::infinity();
            double hi = -lo;
            for (const auto& c : components_) {
                const double x = c.quantile(u);
                lo = std::min(lo, x);
                hi = std::max(hi, x);
            }
            if (lo == hi) return lo;
            return bisect_increasing([&](double x) { return cdf(x); }, u, lo, hi);
        }
    }
    return mean_;
}

double Distribution::quantile_upper(double q) const {
    q = std::clamp(q, 0.0, 1.0);
    switch (kind_) {
        case DistKind::constant:
            return mean_;
        case DistKind::normal:
            if (q > 0.5) return quantile(1.0 - q);
            return mu_ - sigma_ * normal_quantile(q * (1.0 - below0_));
        case DistKind::lognormal:
            return std::exp(lmu_ - lsigma_ * normal_quantile(q));
        case DistKind::gamma: {
            if (q > 0.5) return quantile(1.0 - q);
            if (q <= 0) return std::numeric_limits<double>::infinity();
            const double guess = mean_ * std::exp(-cv_ * normal_quantile(q));
            // sf is decreasing: solve -sf(x) = -q
            return bisect_increasing([&](double x) { return -gamma_q(shape_, x / scale_); }, -q,
                                     guess * 0.5, guess * 2.0);
        }
        case DistKind::empirical:
            return quantile(1.0 - q);
        case DistKind::mixture: {
            if (q > 0.5) return quantile(1.0 - q);
            double lo = std::numeric_limits<double>::infinity();
            double hi = -lo;
            for (const auto& c : components_) {
                const double x = c.quantile_upper(q);
                lo = std::min(lo, x);
                hi = std::max(hi, x);
            }
            if (lo == hi) return lo;
            return bisect_increasing([&](double x) { return -sf(x); }, -q, lo, hi);
        }
    }
    return mean_;
}

double Distribution::max_quantile(double p, double n) const {
    if (p <= 0) return quantile(0.0);
    if (p >= 1) return quantile_upper(0.0);
    // 1 - p^(1/n) without cancellation
    const double q = -std::expm1(std::log(p) / n);
    return quantile_upper(q);
}

double Distribution::max_cdf(double x, double n) const {
    const double s = sf(x);
    if (s <= 0) return 1.0;
    if (s < 0.5) return std::exp(n * std::log1p(-s));
    const double f = cdf(x);
    return f <= 0 ? 0.0 : std::exp(n * std::log(f));
}

Moments Distribution::max_moments(double n) const {
    if (is_constant()) return {quantile(0.5), 0.0};
    if (n == 1.0 && kind_ != DistKind::empirical) return {mean(), variance()};
    // E[Y] = int_0^1 Q_n(p) dp, Q_n the quantile of the max, written in the logit l of p:
    // int Q_n(p(l)) p (1 - p) dl, a smooth integrand (Simpson's rule); the mass outside
    // |l| <= 30 (p < 1e-13 or 1 - p < 1e-13) is neglected.
    constexpr int kPoints = 1201;  // odd
    constexpr double kLogitRange = 30.0;
    const double h = 2.0 * kLogitRange / (kPoints - 1);
    const double x0 = max_quantile(0.5, n);
    double m1 = 0;
    double m2 = 0;
    for (int i = 0; i < kPoints; ++i) {
        const double l = -kLogitRange + h * i;
        double x;
        double w;
        if (l < 0) {
            const double p = 1.0 / (1.0 + std::exp(-l));
            x = max_quantile(p, n);
            w = p * (1.0 - p);
        } else {
            const double q = 1.0 / (1.0 + std::exp(l));  // 1 - p, accurate
            x = quantile_upper(-std::expm1(std::log1p(-q) / n));
            w = q * (1.0 - q);
        }
        const double simpson = (i == 0 || i == kPoints - 1) ? 1.0 : (i % 2 ? 4.0 : 2.0);
        const double d = x - x0;
        m1 += simpson * w * d;
        m2 += simpson * w * d * d;
    }
    m1 *= h / 3.0;
    m2 *= h / 3.0;
    return {x0 + m1, std::max(0.0, m2 - m1 * m1)};
}

}  // namespace prism::stochastic
