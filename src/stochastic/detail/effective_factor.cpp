#include "src/stochastic/detail/effective_factor.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "src/stochastic/detail/hash.hpp"

namespace prism::stochastic::detail {

namespace {

/// ln F(x), accurate where F is near 1 (through the upper tail); -inf where F = 0.
double log_cdf(const Distribution& s, double x) {
    const double f = s.cdf(x);
    if (!(f > 0)) return -std::numeric_limits<double>::infinity();
    const double up = s.sf(x);
    return up < 0.5 ? std::log1p(-up) : std::log(f);
}

constexpr int kNodes = 24;      ///< quantile-spaced nodes of a truncated member law
constexpr int kSteps = 80;      ///< trapezoid steps of the t integral
constexpr double kTop = 1e-15;  ///< upper tail left out of the t range (per member)

/// E[max(g X_0, G_1 X_1, ...)] over the others (slow ones: slow_factor times the spatial law,
/// each truncated at g) and its value with every member at g, on the same t grid.
struct CaseMean {
    double mean = 0, equal = 0;
};

CaseMean case_mean(const Distribution& spatial, double sf, const Distribution& x, double g,
                   int slow_others, int healthy_others) {
    // nodes of each truncated law: u = F^-1(v F(g)), v at the midpoints of kNodes cells
    std::array<double, kNodes> uh{}, us{};
    const double fh = spatial.cdf(g), fs = spatial.cdf(g / sf);
    for (int i = 0; i < kNodes; ++i) {
        const double v = (i + 0.5) / kNodes;
        uh[i] = healthy_others > 0 && fh > 0 ? std::min(g, spatial.quantile(v * fh)) : g;
        us[i] = slow_others > 0 && fs > 0 ? std::min(g, sf * spatial.quantile(v * fs)) : g;
    }
    const int n = 1 + slow_others + healthy_others;
    const double ta = g * x.quantile(1e-13);
    const double tb = g * x.quantile_upper(kTop / n);
    const double dt = (tb - ta) / kSteps;
    double sum = 0, sum_eq = 0;
    for (int j = 0; j <= kSteps; ++j) {
        const double t = ta + dt * j;
        const double own = x.cdf(t / g);
        double c = own;
        if (healthy_others > 0) {
            double h = 0;
            for (const double u : uh) h += x.cdf(t / u);
            c *= std::pow(h / kNodes, healthy_others);
        }
        if (slow_others > 0) {
            double h = 0;
            for (const double u : us) h += x.cdf(t / u);
            c *= std::pow(h / kNodes, slow_others);
        }
        const double ceq = std::pow(own, n);
        const double w = j == 0 || j == kSteps ? 0.5 : 1.0;
        sum += w * (1.0 - c);
        sum_eq += w * (1.0 - ceq);
    }
    return {ta + dt * sum, ta + dt * sum_eq};
}

/// phi_k / g per (spatial id, slow factor, n, class id, k) on the common g grid, per thread:
/// the mixes of a sweep's points share them.
const std::vector<double>& class_table(const Distribution& spatial, std::uint64_t spatial_id,
                                       double sf, int n, const EffectiveFactor::Component& c, int k,
                                       const std::vector<double>& knots) {
    using Key = std::tuple<std::uint64_t, std::uint64_t, int, std::uint64_t, int>;
    thread_local std::map<Key, std::vector<double>> cache;
    const Key key{spatial_id, hash_bits(sf), n, c.x_id, k};
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    if (cache.size() > 4096) cache.clear();
    std::vector<double> r(knots.size(), 1.0);
    if (!c.x.is_constant()) {
        for (std::size_t j = 0; j < knots.size(); ++j) {
            r[j] = EffectiveFactor::exact_ratio(spatial, sf, n, k, c.x, knots[j]);
        }
    }
    return cache.emplace(key, std::move(r)).first->second;
}

}  // namespace

double EffectiveFactor::exact_ratio(const Distribution& spatial, double sf, int n, int k,
                                    const Distribution& x, double g) {
    if (x.is_constant() || n <= 1) return 1.0;
    // which member is the largest: slow with weight k f_s(g) / F_s(g), healthy (n - k)
    // f_h(g) / F_h(g) (d/dg ln F by central differences; an infinite one wins outright)
    double wa = 0, wb = 0;
    const double dg = 1e-6 * g;
    if (k > 0) wa = k * (log_cdf(spatial, (g + dg) / sf) - log_cdf(spatial, (g - dg) / sf));
    if (k < n) wb = (n - k) * (log_cdf(spatial, g + dg) - log_cdf(spatial, g - dg));
    if (std::isinf(wa) && !std::isinf(wb)) {
        wa = 1;
        wb = 0;
    } else if (std::isinf(wb) && !std::isinf(wa)) {
        wa = 0;
        wb = 1;
    }
    if (!(std::isfinite(wa) && std::isfinite(wb) && wa >= 0 && wb >= 0 && wa + wb > 0)) {
        // outside both laws' densities (atoms, the ends of the support): the slow members
        // hold the largest factor when they are slower
        const bool slow_top = k == n || (k > 0 && sf >= 1.0);
        wa = slow_top ? 1 : 0;
        wb = slow_top ? 0 : 1;
    }
    double ratio = 0;
    if (wa > 0) {
        const CaseMean a = case_mean(spatial, sf, x, g, k - 1, n - k);
        ratio += wa * a.mean / a.equal;
    }
    if (wb > 0) {
        const CaseMean b = case_mean(spatial, sf, x, g, k, n - k - 1);
        ratio += wb * b.mean / b.equal;
    }
    return std::min(1.0, ratio / (wa + wb));
}

EffectiveFactor::EffectiveFactor(const Distribution& spatial, double slow_factor, int n,
                                 std::vector<Component> components)
    : spatial_(spatial), sf_(slow_factor), n_(n), comps_(std::move(components)) {
    const double lo1 = std::max(1e-6, spatial_.quantile(1e-12));
    const double hi1 = spatial_.quantile_upper(1e-16);
    // the healthy members' range and the slow ones' (sf times it): one grid where they overlap,
    // a grid over each where they lie apart
    double lo[2] = {std::min(1.0, sf_) * lo1, 0}, hi[2] = {std::max(1.0, sf_) * hi1, 0};
    const double a_lo = std::min(lo1, sf_ * lo1), a_hi = std::min(hi1, sf_ * hi1);
    const double b_lo = std::max(lo1, sf_ * lo1), b_hi = std::max(hi1, sf_ * hi1);
    if (b_lo > a_hi) {
        segments_ = 2;
        lo[0] = a_lo, hi[0] = a_hi, lo[1] = b_lo, hi[1] = b_hi;
    }
    // as many knots in all as one range had (each table costs a quadrature per knot)
    per_ = segments_ == 2 ? (kGrid + 1) / 2 : kGrid;
    for (int s = 0; s < segments_; ++s) {
        if (!(hi[s] > lo[s])) hi[s] = lo[s] * (1 + 1e-9) + 1e-12;
        lo_[s] = lo[s];
        inv_h_[s] = (per_ - 1) / (hi[s] - lo[s]);
        for (int j = 0; j < per_; ++j) knots_.push_back(lo[s] + (hi[s] - lo[s]) * j / (per_ - 1));
    }
    lower_ratio_ = 1.0;
    for (const auto& c : comps_) {
        if (c.x.is_constant()) continue;
        lower_ratio_ = std::min(lower_ratio_, c.x.mean() / c.x.max_moments(n_).mean);
    }
    tables_.resize(static_cast<size_t>(n_) + 1);
}

std::shared_ptr<const EffectiveFactor> EffectiveFactor::cached(const Distribution& spatial,
                                                               std::uint64_t spatial_id,
                                                               double slow_factor, int n,
                                                               std::vector<Component> components) {
    // merge the classes with one law, weights quantized to 1/64 of the total
    std::map<std::uint64_t, Component> merged;
    double total = 0;
    for (auto& c : components) {
        if (!(c.weight > 0)) continue;
        total += c.weight;
        auto [it, fresh] = merged.try_emplace(c.x_id, c);
        if (!fresh) it->second.weight += c.weight;
    }
    if (!(total > 0) || n <= 1) return nullptr;
    std::vector<Component> comps;
    std::uint64_t key = hash_mix(spatial_id, hash_bits(slow_factor));
    key = hash_mix(key, static_cast<std::uint64_t>(n));
    bool random = false;
    for (auto& [id, c] : merged) {
        c.weight = std::round(64.0 * c.weight / total);
        if (c.weight <= 0) continue;
        random = random || !c.x.is_constant();
        key = hash_mix(hash_mix(key, id), hash_bits(c.weight));
        comps.push_back(c);
    }
    if (!random) return nullptr;
    double wsum = 0;
    for (const auto& c : comps) wsum += c.weight;
    for (auto& c : comps) c.weight /= wsum;  // the same inputs give the same bits (cache key)
    thread_local std::map<std::uint64_t, std::vector<std::shared_ptr<EffectiveFactor>>> cache;
    thread_local std::uint64_t next_id = 1;
    auto& bucket = cache[key];
    for (const auto& e : bucket) {
        if (e->spatial_id_ != spatial_id || e->sf_ != slow_factor || e->n_ != n ||
            e->comps_.size() != comps.size()) {
            continue;
        }
        bool same = true;
        for (size_t i = 0; i < comps.size() && same; ++i) {
            same = e->comps_[i].x_id == comps[i].x_id && e->comps_[i].weight == comps[i].weight;
        }
        if (same) return e;
    }
    if (cache.size() > 1024) {
        cache.clear();
        return cached(spatial, spatial_id, slow_factor, n, std::move(components));
    }
    auto e = std::make_shared<EffectiveFactor>(spatial, slow_factor, n, std::move(comps));
    e->spatial_id_ = spatial_id;
    e->id_ = next_id++;
    cache[key].push_back(e);
    return e;
}

double EffectiveFactor::position(double g) const {
    const int last = static_cast<int>(knots_.size()) - 1;
    double u = 0;
    if (segments_ == 2 && g >= knots_[per_]) {
        u = per_ + (g - lo_[1]) * inv_h_[1];
    } else if (segments_ == 2 && g > knots_[per_ - 1]) {
        // between the two ranges: one segment
        u = (per_ - 1) + (g - knots_[per_ - 1]) / (knots_[per_] - knots_[per_ - 1]);
    } else {
        u = (g - lo_[0]) * inv_h_[0];
    }
    if (!(u > 0)) return 0;
    return std::min(u, static_cast<double>(last));
}

double EffectiveFactor::ratio(int k, double g) const {
    k = std::clamp(k, 0, n_);
    auto& t = tables_[k];
    const int size = static_cast<int>(knots_.size());
    if (t.empty()) {
        t.assign(knots_.size(), 0.0);
        for (const auto& c : comps_) {
            const auto& r = class_table(spatial_, spatial_id_, sf_, n_, c, k, knots_);
            for (int j = 0; j < size; ++j) t[j] += c.weight * r[j];
        }
        // phi = g r increasing (quadrature noise must not break it)
        for (int j = 1; j < size; ++j) {
            t[j] = std::max(t[j], t[j - 1] * knots_[j - 1] / knots_[j]);
        }
    }
    const double u = position(g);
    const int j = std::min(static_cast<int>(u), size - 2);
    const double f = u - j;
    return t[j] + f * (t[j + 1] - t[j]);
}

double EffectiveFactor::operator()(int k, double g) const { return g * ratio(k, g); }

double EffectiveFactor::inverse(int k, double y) const {
    // phi_k(g) = g r(g) with r piecewise linear between the knots g_j (constant outside): on a
    // segment, phi(g_j + z) = phi_j + C z + B z^2 (B = the slope of r, C = r(g_j) + B g_j) is a
    // quadratic, solved in closed form (the root that grows from z = 0), the segment found by
    // bisection on the knots' phi_j (increasing: the table keeps g r monotone). The same function
    // the bisection on g inverted before, in O(log kGrid).
    k = std::clamp(k, 0, n_);
    ratio(k, knots_.front());  // builds the table
    const auto& t = tables_[k];
    const int last = static_cast<int>(knots_.size()) - 1;
    auto knot = [&](int j) { return knots_[static_cast<std::size_t>(j)]; };
    if (!(y > knot(0) * t.front())) return y / t.front();
    if (y >= knot(last) * t.back()) return y / t.back();
    int a = 0, b = last;  // phi(a) < y <= phi(b)
    while (b - a > 1) {
        const int mid = (a + b) / 2;
        (knot(mid) * t[mid] < y ? a : b) = mid;
    }
    const double gj = knot(a);
    const double slope = (t[a + 1] - t[a]) / (knot(a + 1) - knot(a));
    const double c = t[a] + slope * gj;
    const double delta = y - gj * t[a];
    const double disc = std::max(0.0, c * c + 4.0 * slope * delta);
    const double z = 2.0 * delta / (c + std::sqrt(disc));
    return std::clamp(gj + z, gj, knot(a + 1));
}

}  // namespace prism::stochastic::detail
