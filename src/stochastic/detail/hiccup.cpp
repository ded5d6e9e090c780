#include "src/stochastic/detail/hiccup.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "src/stochastic/distribution.hpp"
#include "src/stochastic/random.hpp"

namespace prism::stochastic::detail {

namespace {

constexpr double kInvSqrt2Pi = 0.3989422804014327;

}  // namespace

HiccupLaw::HiccupLaw(const HiccupSpec& spec, double nodes) {
    active_ = spec.active() && nodes >= 1;
    if (!active_) return;
    n_ = nodes;
    q_ = std::min(spec.probability, 1.0);
    mu_ = std::log(spec.delay_median_s);
    sigma_ = spec.delay_sigma;
    p0_ = q_ >= 1 ? 0.0 : std::exp(n_ * std::log1p(-q_));
    if (sigma_ <= 0) {
        // a fixed delay d: H = d unless no node stalls
        const double d = std::exp(mu_);
        mean_ = (1 - p0_) * d;
        var_ = p0_ * (1 - p0_) * d * d;
        return;
    }
    // E[H^k] = int e^(k (mu + sigma z)) dG/dz dz, dG/dz = n q phi(z) (1 - q Q(z))^(n-1) with
    // Q the normal upper tail: Simpson's rule on z in [-12, 12 + 2 sigma] (the lognormal's
    // second moment peaks at z = 2 sigma; the max over nodes moves the mass up by at most
    // Q^-1(1 / (n q)) < 12)
    const double lo = -12, hi = 12 + 2 * sigma_;
    const int steps = 2 * static_cast<int>(std::ceil((hi - lo) / 0.02 / 2));
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
    if (!active_) return h >= 0 ? 1.0 : 0.0;
    if (h < 0) return 0;
    if (h == 0) return p0_;
    if (sigma_ <= 0) return h >= std::exp(mu_) ? 1.0 : p0_;
    const double sf = normal_sf((std::log(h) - mu_) / sigma_);  // P(D > h)
    return std::exp(n_ * std::log1p(-q_ * sf));
}

double HiccupLaw::quantile(double u) const {
    if (!active_ || u <= p0_) return 0;
    if (sigma_ <= 0) return std::exp(mu_);
    // q P(D > h) = 1 - u^(1/n)
    const double tail = -std::expm1(std::log(u) / n_) / q_;
    if (!(tail > 0)) return std::exp(mu_ + sigma_ * 40);  // u = 1: past any finite draw
    return std::exp(mu_ + sigma_ * normal_quantile(1 - std::min(tail, 1.0)));
}

double job_nodes(const DesignPoint& point, const HardwareSpec& hardware) {
    const double per = std::max(1, hardware.gpus_per_node);
    return std::ceil(static_cast<double>(point.gpus()) / per);
}

void add_hiccups(std::vector<double>& steps, const HiccupLaw& law, std::uint64_t seed,
                 std::uint64_t point_index) {
    if (!law.active()) return;
    for (std::size_t k = 0; k < steps.size(); ++k) {
        Stream rng(seed, point_index, StreamKind::hiccup, static_cast<std::uint32_t>(k));
        steps[k] += law.quantile(rng.uniform());
    }
}

HiccupStep::HiccupStep(const HiccupLaw& law, std::function<double(double)> s_cdf,
                       std::vector<double> s_nodes)
    : law_(law), s_cdf_(std::move(s_cdf)), s_nodes_(std::move(s_nodes)) {
    std::sort(s_nodes_.begin(), s_nodes_.end());
}

double HiccupStep::cdf(double t) const {
    // G(0) F_S(t) + E_S[G(t - S) - G(0); S < t]
    const double p0 = law_.p0();
    double continuous = 0;
    for (double s : s_nodes_) {
        if (s >= t) break;
        continuous += law_.cdf(t - s) - p0;
    }
    return p0 * s_cdf_(t) + continuous / static_cast<double>(s_nodes_.size());
}

double HiccupStep::quantile(double prob) const {
    const double s_lo = s_nodes_.front(), s_hi = s_nodes_.back();
    double width = std::max({s_hi - s_lo, law_.quantile(0.5 * (1 + law_.p0())), 1e-9 * s_hi});
    double lo = s_lo, hi = s_hi + law_.quantile(1 - 0.5 * (1 - prob));
    for (int i = 0; i < 200 && cdf(lo) > prob; ++i, width *= 2) lo -= width;
    width = std::max(width, hi - lo);
    for (int i = 0; i < 200 && cdf(hi) < prob; ++i, width *= 2) hi += width;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * std::max(std::fabs(hi), 1e-300); ++i) {
        const double mid = 0.5 * (lo + hi);
        (cdf(mid) < prob ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

}  // namespace prism::stochastic::detail
