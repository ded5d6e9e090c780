#include "src/stochastic/detail/hiccup.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <utility>

#include "src/stochastic/distribution.hpp"
#include "src/stochastic/random.hpp"

namespace prism::stochastic::detail {

namespace {

constexpr double kInvSqrt2Pi = 0.3989422804014327;

}  // namespace

namespace {

// E's values and shares over one common period of the events (or, past 10^6 steps, as
// independent events of probability 1 / every)
void periodic_shares(const std::vector<PeriodicEvent>& events, std::vector<double>& shift,
                     std::vector<double>& weight) {
    std::vector<const PeriodicEvent*> on;
    for (const PeriodicEvent& e : events) {
        if (e.duration_s > 0 && e.every >= 1) on.push_back(&e);
    }
    shift = {0.0};
    weight = {1.0};
    if (on.empty()) return;
    std::vector<double> mass(std::size_t{1} << std::min<std::size_t>(on.size(), 16), 0.0);
    if (on.size() > 16) on.resize(16);
    std::int64_t period = 1;
    for (const PeriodicEvent* e : on) {
        period = std::lcm(period, e->every);
        if (period > 1000000) break;
    }
    if (period <= 1000000) {
        for (std::int64_t k = 1; k <= period; ++k) {
            std::size_t mask = 0;
            for (std::size_t i = 0; i < on.size(); ++i) {
                if (k % on[i]->every == 0) mask |= std::size_t{1} << i;
            }
            mass[mask] += 1.0 / static_cast<double>(period);
        }
    } else {
        for (std::size_t mask = 0; mask < mass.size(); ++mask) {
            double w = 1;
            for (std::size_t i = 0; i < on.size(); ++i) {
                const double p = 1.0 / static_cast<double>(on[i]->every);
                w *= (mask >> i) & 1 ? p : 1 - p;
            }
            mass[mask] = w;
        }
    }
    shift.clear();
    weight.clear();
    for (std::size_t mask = 0; mask < mass.size(); ++mask) {
        if (!(mass[mask] > 0)) continue;
        double e = 0;
        for (std::size_t i = 0; i < on.size(); ++i) {
            if ((mask >> i) & 1) e += on[i]->duration_s;
        }
        shift.push_back(e);
        weight.push_back(mass[mask]);
    }
}

}  // namespace

HiccupLaw::HiccupLaw(const HiccupSpec& spec, double nodes,
                     const std::vector<PeriodicEvent>& periodic) {
    periodic_shares(periodic, shift_s_, weight_);
    set_shift_moments();
    hiccup_ = spec.active() && nodes >= 1;
    if (!hiccup_) return;
    n_ = nodes;
    q_ = std::min(spec.probability, 1.0);
    mu_ = std::log(spec.delay_median_s);
    sigma_ = spec.delay_sigma;
    p0_ = q_ >= 1 ? 0.0 : std::exp(n_ * std::log1p(-q_));
    if (spec.family == HiccupFamily::pareto) {
        pareto_ = true;
        alpha_ = spec.delay_tail;
        scale_ = spec.delay_median_s * std::exp2(-1 / alpha_);
        // E[H^k] = int_0^1 n q (1 - q s)^(n-1) d(s)^k ds over s = P(D > d), d(s) = d_m
        // s^(-1/alpha); with s = e^-y: n q d_m^k int_0^inf (1 - q e^-y)^(n-1) e^(-y (1 - k /
        // alpha)) dy. Simpson's rule (step 0.01) up to Y = max(0, ln(n q)) + 30, where (1 - q
        // e^-y)^(n-1) is 1 to e^-30; beyond, the integral of e^(-c y) in closed form. Finite for
        // alpha > 2 (the loader's bound).
        const double top = std::max(0.0, std::log(n_ * q_)) + 30;
        const int steps = 2 * static_cast<int>(std::ceil(top / 0.01 / 2));
        const double dy = top / steps;
        double m1 = 0, m2 = 0;
        const double c1 = 1 - 1 / alpha_, c2 = 1 - 2 / alpha_;
        for (int i = 0; i <= steps; ++i) {
            const double y = i * dy;
            const double w = (i == 0 || i == steps) ? 1.0 : (i % 2 == 1 ? 4.0 : 2.0);
            const double others =
                n_ > 1 ? std::exp((n_ - 1) * std::log1p(-q_ * std::exp(-y))) : 1.0;
            m1 += w * others * std::exp(-c1 * y);
            m2 += w * others * std::exp(-c2 * y);
        }
        m1 = m1 * dy / 3 + std::exp(-c1 * top) / c1;
        m2 = m2 * dy / 3 + std::exp(-c2 * top) / c2;
        mean_ = n_ * q_ * scale_ * m1;
        var_ = std::max(0.0, n_ * q_ * scale_ * scale_ * m2 - mean_ * mean_);
        return;
    }
    if (sigma_ <= 0) {
        // a fixed delay d: H = d unless no node stalls
        const double d = std::exp(mu_);
        mean_ = (1 - p0_) * d;
        var_ = p0_ * (1 - p0_) * d * d;
        return;
    }
    // E[H^k] = int e^(k (mu + sigma z)) dG/dz dz, dG/dz = n q phi(z) (1 - q Q(z))^(n-1) with
    // Q the normal upper tail: Simpson's rule (step 0.05) on z in [-12, 12 + 2 sigma] (the
    // lognormal's second moment peaks at z = 2 sigma; the max over nodes moves the mass up by at
    // most Q^-1(1 / (n q)) < 12)
    const double lo = -12, hi = 12 + 2 * sigma_;
    const int steps = 2 * static_cast<int>(std::ceil((hi - lo) / 0.05 / 2));
    const double dz = (hi - lo) / steps;
    double m1 = 0, m2 = 0;
    for (int i = 0; i <= steps; ++i) {
        const double z = lo + i * dz;
        const double w = (i == 0 || i == steps) ? 1.0 : (i % 2 == 1 ? 4.0 : 2.0);
        const double sf = normal_sf(z);
        // (1 - q Q)^(n - 1), 1 for one node (0 x log 0 would be NaN at q = 1)
        const double others = n_ > 1 ? std::exp((n_ - 1) * std::log1p(-q_ * sf)) : 1.0;
        const double density = n_ * q_ * kInvSqrt2Pi * std::exp(-0.5 * z * z) * others;
        const double x = std::exp(mu_ + sigma_ * z);
        m1 += w * density * x;
        m2 += w * density * x * x;
    }
    m1 *= dz / 3;
    m2 *= dz / 3;
    mean_ = m1;
    var_ = std::max(0.0, m2 - m1 * m1);
}

double HiccupLaw::cdf(double h) const {
    double f = 0;
    for (std::size_t j = 0; j < shift_s_.size(); ++j) f += weight_[j] * hiccup_cdf(h - shift_s_[j]);
    return std::min(f, 1.0);
}

double HiccupLaw::quantile(double u) const {
    if (shift_s_.size() == 1) return shift_s_.front() + hiccup_quantile(u);
    // the mixture of shifts: bisection on its CDF between the smallest and largest shift
    double lo = 0, hi = *std::max_element(shift_s_.begin(), shift_s_.end()) + hiccup_quantile(u);
    hi = std::max(hi, 1e-300);
    if (cdf(lo) >= u) return lo;
    for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; ++i) {
        const double mid = 0.5 * (lo + hi);
        (cdf(mid) < u ? lo : hi) = mid;
    }
    return hi;
}

double HiccupLaw::draw(double u_hiccup, double u_periodic) const {
    double e = shift_s_.back();
    double acc = 0;
    for (std::size_t j = 0; j < shift_s_.size(); ++j) {
        acc += weight_[j];
        if (u_periodic <= acc) {
            e = shift_s_[j];
            break;
        }
    }
    return e + hiccup_quantile(u_hiccup);
}

double HiccupLaw::hiccup_cdf(double h) const {
    if (!hiccup_) return h >= 0 ? 1.0 : 0.0;
    if (h < 0) return 0;
    if (h == 0) return p0_;
    if (!pareto_ && sigma_ <= 0) return h >= std::exp(mu_) ? 1.0 : p0_;
    return std::exp(n_ * std::log1p(-q_ * delay_sf(h)));
}

double HiccupLaw::delay_sf(double d) const {
    if (pareto_) return d <= scale_ ? 1.0 : std::pow(scale_ / d, alpha_);
    return normal_sf((std::log(d) - mu_) / sigma_);
}

double HiccupLaw::delay_upper_quantile(double tail) const {
    if (pareto_) return scale_ * std::pow(tail, -1 / alpha_);
    return std::exp(mu_ + sigma_ * normal_quantile(1 - tail));
}

double HiccupLaw::hiccup_quantile(double u) const {
    if (!hiccup_ || u <= p0_) return 0;
    if (!pareto_ && sigma_ <= 0) return std::exp(mu_);
    // q P(D > h) = 1 - u^(1/n)
    const double tail = -std::expm1(std::log(u) / n_) / q_;
    if (!(tail > 0)) {  // u = 1: past any finite draw
        return pareto_ ? scale_ * std::pow(1e-300, -1 / alpha_) : std::exp(mu_ + sigma_ * 40);
    }
    return delay_upper_quantile(std::min(tail, 1.0));
}

double job_nodes(const DesignPoint& point, const HardwareSpec& hardware) {
    const double per = std::max(1, hardware.gpus_per_node);
    return std::ceil(static_cast<double>(point.gpus()) / per);
}

StallShape stall_shape(const StepProfile& profile, const DesignPoint& point,
                       const HardwareSpec& hardware) {
    const double gpn = std::max(1, hardware.gpus_per_node);
    const double nodes = job_nodes(point, hardware);
    StallShape shape;
    if (profile.dp_lockstep) {
        const double layers = double(profile.chunks) * profile.layers_per_chunk;
        shape.syncs = std::max(1.0, 2.0 * layers * profile.microbatches);
        shape.nodes_per_member = std::max(1.0, std::ceil(double(profile.tp) * profile.cp / gpn));
        shape.members = std::max(
            1.0, std::floor(nodes / (std::max(1, profile.stages) * shape.nodes_per_member)));
        return shape;
    }
    shape.syncs = 1;
    shape.nodes_per_member =
        std::max(1.0, std::ceil(double(profile.tp) * profile.cp * profile.stages / gpn));
    shape.members = std::max(1.0, std::floor(nodes / shape.nodes_per_member));
    return shape;
}

namespace {

/// P(X <= x) for X ~ Poisson(mu), x = 0..top: the terms summed in order, each from a running
/// log (at mu <= 1000 the terms that underflow lie far below the mode and add nothing).
std::vector<double> poisson_cdf(double mu, int top) {
    std::vector<double> cdf(std::size_t(top) + 1);
    double log_term = -mu, sum = 0;
    for (int x = 0; x <= top; ++x) {
        if (x > 0) log_term += std::log(mu) - std::log(double(x));
        sum += std::exp(log_term);
        cdf[std::size_t(x)] = std::min(sum, 1.0);
    }
    return cdf;
}

/// pmf of a sum of two independent lattice laws (offsets in lattice steps), tails below
/// 1e-16 dropped
void convolve(const std::vector<double>& a, long a0, const std::vector<double>& b, long b0,
              std::vector<double>& out, long& out0) {
    std::vector<double> c(a.size() + b.size() - 1, 0.0);
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i] == 0) continue;
        for (std::size_t j = 0; j < b.size(); ++j) c[i + j] += a[i] * b[j];
    }
    std::size_t lo = 0, hi = c.size();
    while (lo + 1 < hi && c[lo] < 1e-16) ++lo;
    while (hi > lo + 1 && c[hi - 1] < 1e-16) --hi;
    out.assign(c.begin() + long(lo), c.begin() + long(hi));
    out0 = a0 + b0 + long(lo);
}

}  // namespace

void stall_law(const StallSpec& spec, const StallShape& shape, double step_s,
               std::vector<double>& value, std::vector<double>& weight) {
    value.clear();
    weight.clear();
    if (!spec.active() || !(step_s > 0)) return;
    const double d = spec.duration_s;
    const double mu = shape.nodes_per_member * (spec.fraction / d) * step_s / shape.syncs;
    const double g = shape.members;
    // M, the largest of g Poisson(mu) counts: its atoms (x0 + i, pm[i])
    std::vector<double> pm;
    std::vector<double> mx;  // M's values (lattice: integers; normal Poisson: a grid)
    if (mu <= 1000) {
        const int top = int(std::ceil(mu + 12 * std::sqrt(mu) + 8 + 4 * std::log(g + 1)));
        const std::vector<double> cdf = poisson_cdf(mu, top);
        double prev = 0;
        for (int x = 0; x <= top; ++x) {
            const double cur = std::exp(g * std::log(std::max(cdf[std::size_t(x)], 1e-300)));
            pm.push_back(std::max(0.0, cur - prev));
            mx.push_back(x);
            prev = cur;
        }
        pm.back() += std::max(0.0, 1 - prev);
    } else {
        // Poisson(mu) as a normal: M's CDF Phi(z)^g on 257 points over the range it covers
        const double sd = std::sqrt(mu);
        const double zlo = normal_quantile(std::exp(std::log(1e-15) / g)), zhi = 9;
        double prev = 0;
        for (int i = 0; i <= 256; ++i) {
            const double z = zlo + (zhi - zlo) * i / 256.0;
            const double cur = std::exp(g * std::log(std::max(normal_cdf(z), 1e-300)));
            pm.push_back(std::max(0.0, cur - prev));
            mx.push_back(mu + sd * z);
            prev = cur;
        }
        pm.back() += std::max(0.0, 1 - prev);
    }
    double m1 = 0, m2 = 0;
    for (std::size_t i = 0; i < pm.size(); ++i) {
        m1 += pm[i] * mx[i];
        m2 += pm[i] * mx[i] * mx[i];
    }
    const double var1 = std::max(0.0, m2 - m1 * m1);
    const double k = shape.syncs;
    if (k <= 1) {
        // atoms below 1e-15 dropped (the many empty ones below the bulk of a large mu): the
        // evaluators' cost grows with the atoms
        double kept = 0;
        for (std::size_t i = 0; i < pm.size(); ++i) {
            if (!(pm[i] > 1e-15)) continue;
            value.push_back(d * mx[i]);
            weight.push_back(pm[i]);
            kept += pm[i];
        }
        for (double& w : weight) w /= kept;
        return;
    }
    if (mu <= 1000 && k * m1 <= kStallExactMean) {
        // the k-fold sum exactly: binary powers of M's pmf
        std::vector<double> base = pm, acc{1.0};
        long base0 = 0, acc0 = 0;
        for (long n = long(std::llround(k)); n > 0; n >>= 1) {
            if (n & 1) convolve(acc, acc0, base, base0, acc, acc0);
            if (n > 1) convolve(base, base0, base, base0, base, base0);
        }
        double total = 0;
        for (double w : acc) total += w;
        double kept = 0;
        for (std::size_t i = 0; i < acc.size(); ++i) {
            if (!(acc[i] > 1e-15 * total)) continue;
            value.push_back(d * double(acc0 + long(i)));
            weight.push_back(acc[i]);
            kept += acc[i];
        }
        for (double& w : weight) w /= kept;
        return;
    }
    // the central limit: a normal of mean k m1 and variance k var1, 97 atoms
    const double mean = k * m1, sd = std::sqrt(k * var1);
    if (!(sd > 0)) {
        value.push_back(d * mean);
        weight.push_back(1);
        return;
    }
    double prev = 0;
    for (int i = 0; i <= 96; ++i) {
        const double z = -6 + i / 8.0;
        const double cur = i == 96 ? 1.0 : normal_cdf(z + 1 / 16.0);
        value.push_back(d * std::max(0.0, mean + sd * z));
        weight.push_back(cur - prev);
        prev = cur;
    }
}

void HiccupLaw::add_independent(const std::vector<double>& value,
                                const std::vector<double>& weight) {
    if (value.empty()) return;
    std::vector<std::pair<double, double>> both;
    both.reserve(shift_s_.size() * value.size());
    for (std::size_t j = 0; j < shift_s_.size(); ++j) {
        for (std::size_t i = 0; i < value.size(); ++i) {
            both.emplace_back(shift_s_[j] + value[i], weight_[j] * weight[i]);
        }
    }
    std::sort(both.begin(), both.end());
    shift_s_.clear();
    weight_.clear();
    for (const auto& [v, w] : both) {
        if (!shift_s_.empty() && v == shift_s_.back()) {
            weight_.back() += w;
        } else {
            shift_s_.push_back(v);
            weight_.push_back(w);
        }
    }
    set_shift_moments();
}

void HiccupLaw::set_shift_moments() {
    e_mean_ = 0;
    e_var_ = 0;
    for (std::size_t j = 0; j < shift_s_.size(); ++j) {
        e_mean_ += weight_[j] * shift_s_[j];
        e_var_ += weight_[j] * shift_s_[j] * shift_s_[j];
    }
    e_var_ = std::max(0.0, e_var_ - e_mean_ * e_mean_);
}

void add_hiccups(std::vector<double>& steps, const HiccupLaw& law, std::uint64_t seed,
                 std::uint64_t point_index) {
    if (!law.active()) return;
    for (std::size_t k = 0; k < steps.size(); ++k) {
        Stream rng(seed, point_index, StreamKind::hiccup, static_cast<std::uint32_t>(k));
        const double u_hiccup = rng.uniform();
        steps[k] += law.draw(u_hiccup, rng.uniform());
    }
}

HiccupStep::HiccupStep(const HiccupLaw& law, std::function<double(double)> s_cdf,
                       std::vector<double> s_nodes)
    : law_(law), s_cdf_(std::move(s_cdf)), s_nodes_(std::move(s_nodes)) {
    std::sort(s_nodes_.begin(), s_nodes_.end());
}

double HiccupStep::cdf(double t) const {
    // per shift e of E: G(0) F_S(t - e) + E_S[G(t - e - S) - G(0); S < t - e]
    const double p0 = law_.p0();
    const auto& shift = law_.shift_s();
    const auto& weight = law_.shift_weight();
    double f = 0;
    for (std::size_t j = 0; j < shift.size(); ++j) {
        const double x = t - shift[j];
        double continuous = 0;
        if (p0 < 1) {
            for (double s : s_nodes_) {
                if (s >= x) break;
                continuous += law_.hiccup_cdf(x - s) - p0;
            }
        }
        f += weight[j] * (p0 * s_cdf_(x) + continuous / static_cast<double>(s_nodes_.size()));
    }
    return f;
}

double HiccupStep::quantile(double prob) const {
    const double s_lo = s_nodes_.front(), s_hi = s_nodes_.back();
    double width = std::max({s_hi - s_lo, law_.quantile(0.5 * (1 + law_.p0())), 1e-9 * s_hi});
    double lo = s_lo, hi = s_hi + law_.quantile(1 - 0.5 * (1 - prob));
    for (int i = 0; i < 200 && cdf(lo) > prob; ++i, width *= 2) lo -= width;
    width = std::max(width, hi - lo);
    for (int i = 0; i < 200 && cdf(hi) < prob; ++i, width *= 2) hi += width;
    // Illinois regula falsi (the CDF is smooth where S is), a bisection step whenever the
    // bracket did not halve: a few CDF evaluations instead of ~45 bisections
    double flo = cdf(lo) - prob, fhi = cdf(hi) - prob;
    int side = 0;
    double width_before = hi - lo;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * std::max(std::fabs(hi), 1e-300); ++i) {
        double x = fhi > flo ? (flo * hi - fhi * lo) / (flo - fhi) : 0.5 * (lo + hi);
        if (i % 3 == 2) {
            if (hi - lo > 0.5 * width_before) x = 0.5 * (lo + hi);
            width_before = hi - lo;
        }
        if (!(x > lo && x < hi)) x = 0.5 * (lo + hi);
        const double fx = cdf(x) - prob;
        if (fx < 0) {
            lo = x;
            flo = fx;
            if (side == -1) fhi *= 0.5;
            side = -1;
        } else {
            hi = x;
            fhi = fx;
            if (side == 1) flo *= 0.5;
            side = 1;
        }
    }
    return 0.5 * (lo + hi);
}

}  // namespace prism::stochastic::detail
