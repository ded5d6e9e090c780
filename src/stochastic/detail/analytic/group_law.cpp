#include "src/stochastic/detail/analytic/group_law.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <unordered_map>

#include "src/stochastic/detail/hash.hpp"

namespace prism::stochastic::detail::ssta {

namespace {

struct LawEntry {
    // the full key, compared on a hash hit (spatial: the spec's id; effective: its id, 0 none)
    std::uint64_t spatial, effective;
    double slow_factor, q, power;
    int group_gpus, slow_members, lock_slow;
    double lock_units;
    int lock_c;
    std::vector<std::pair<int, int>> unit_members;
    LawTable table;
};

std::unordered_map<std::uint64_t, std::unique_ptr<LawEntry>>& law_cache() {
    thread_local std::unordered_map<std::uint64_t, std::unique_ptr<LawEntry>> cache;
    return cache;
}

}  // namespace

void trim_law_cache() {
    if (law_cache().size() > 1024) law_cache().clear();
}

const LawTable* law_table(const GroupLaw& law) {
    const StepModel& m = *law.m;
    const std::uint64_t eff = m.effective ? m.effective->id() : 0;
    std::uint64_t h = hash_mix(m.spatial_id, hash_bits(m.slow_factor));
    h = hash_mix(h, eff);
    h = hash_mix(h, hash_bits(m.slow_probability));
    h = hash_mix(h, static_cast<std::uint64_t>(m.group_gpus));
    h = hash_mix(h, static_cast<std::uint64_t>(law.slow_members + 1));
    h = hash_mix(h, hash_bits(law.power));
    h = hash_mix(h, static_cast<std::uint64_t>(law.lock_slow));
    h = hash_mix(h, hash_bits(law.lock_units));
    h = hash_mix(h, static_cast<std::uint64_t>(law.lock_c));
    for (const auto& [c, k] : law.unit_members) {
        h = hash_mix(h, static_cast<std::uint64_t>(c));
        h = hash_mix(h, static_cast<std::uint64_t>(k));
    }
    auto& cache = law_cache();
    auto it = cache.find(h);
    if (it != cache.end()) {
        const LawEntry& e = *it->second;
        if (e.spatial == m.spatial_id && e.effective == eff && e.slow_factor == m.slow_factor &&
            e.q == m.slow_probability && e.power == law.power && e.group_gpus == m.group_gpus &&
            e.slow_members == law.slow_members && e.lock_slow == law.lock_slow &&
            e.lock_units == law.lock_units && e.lock_c == law.lock_c &&
            e.unit_members == law.unit_members) {
            return &e.table;
        }
        return nullptr;  // a hash collision: evaluate exactly
    }
    auto e = std::make_unique<LawEntry>(LawEntry{m.spatial_id,
                                                 eff,
                                                 m.slow_factor,
                                                 m.slow_probability,
                                                 law.power,
                                                 m.group_gpus,
                                                 law.slow_members,
                                                 law.lock_slow,
                                                 law.lock_units,
                                                 law.lock_c,
                                                 law.unit_members,
                                                 {}});
    GroupLaw exact = law;
    exact.table = nullptr;
    const double sfmax = std::max(1.0, m.slow_probability > 0 ? m.slow_factor : 1.0);
    double top = std::max(2.0, 2.0 * m.spatial.quantile_upper(1e-300) * sfmax);
    for (int i = 0; i < 200 && exact.exact_log_cdf(top) < -1e-22; ++i) top *= 2;
    auto solve = [&](double target) {
        double a = 0, b = top;
        for (int i = 0; i < 200; ++i) {
            const double mid = 0.5 * (a + b);
            if (!(mid > a && mid < b)) break;
            (exact.exact_log_cdf(mid) < target ? a : b) = mid;
        }
        return b;
    };
    LawTable& t = e->table;
    t.lo = solve(-800.0);
    t.hi = solve(-1e-22);
    if (!(t.hi > t.lo)) t.hi = t.lo + 1e-12 * std::max(1.0, t.lo);
    const double hstep = (t.hi - t.lo) / (LawTable::kPoints - 1);
    t.inv_h = 1.0 / hstep;
    t.y.resize(LawTable::kPoints);
    for (int i = 0; i < LawTable::kPoints; ++i) t.y[i] = exact.exact_log_cdf(t.lo + hstep * i);
    const LawTable* out = &e->table;
    cache.emplace(h, std::move(e));
    return out;
}

double GroupLaw::exact_log_cdf(double y) const {
    const EffectiveFactor* e = m->effective.get();
    if (e == nullptr) return raw_log_cdf(y);
    return raw_log_cdf(e->inverse(m->lockstep ? 0 : std::max(slow_members, 0), y));
}

double GroupLaw::raw_log_cdf(double g) const {
    const auto& S = m->spatial;
    const int n = m->group_gpus;
    auto logf = [&](double x) { return log_spatial_cdf(S, x); };
    double total;
    if (slow_members >= 0) {
        total = (n - slow_members) * logf(g);
        if (slow_members > 0) total += slow_members * logf(g / m->slow_factor);
    } else if (m->slow_probability <= 0 || m->slow_factor == 1.0) {
        total = n * logf(g);
    } else {
        const double q = m->slow_probability;
        const double a = logf(g);
        const double b = logf(g / m->slow_factor);
        total = 0;
        for (const auto& [c, count] : unit_members) {
            const double la = std::log1p(-q) + c * a;
            const double lb = std::log(q) + c * b;
            const double hi = std::max(la, lb);
            total += count * (hi + std::log(std::exp(la - hi) + std::exp(lb - hi)));
        }
    }
    total = power * std::max(total, -1e300);
    if (lock_slow > 0 && total > -1e300) {
        const double b = logf(g / m->slow_factor);
        total = b <= -1e300 ? -1e300 : total + lock_slow * (b - logf(g));
    }
    if (lock_units > 0 && lock_c > 0 && total > -1e300) {
        const double b = logf(g / m->slow_factor);
        const double r = b <= -1e300 ? 0.0 : std::exp(lock_c * (b - logf(g)));
        const double q = m->slow_probability;
        total += lock_units * std::log(std::max(1e-300, 1.0 - q + q * r));
    }
    return std::max(total, -1e300);
}

void moments_of_g(const StepModel& m, const GroupLaw& law, double& mean, double& var) {
    if (m.persistent_deterministic) {
        mean = 1;
        var = 0;
        return;
    }
    if (law.table != nullptr && law.table->has_moments) {
        mean = law.table->mean;
        var = law.table->var;
        return;
    }
    // integrate over a g grid: E[g] = g_lo + int (1 - H), E[(g-g_lo)^2] = int 2 (g-g_lo)(1-H)
    const double sfmax = std::max(1.0, m.slow_probability > 0 ? m.slow_factor : 1.0);
    const double sfmin = std::min(1.0, m.slow_probability > 0 ? m.slow_factor : 1.0);
    const double n = m.group_gpus * law.power;
    // (the effective factor is between c max G and max G)
    const double lo = m.spatial.max_quantile(1e-14, 1.0) * sfmin *
                      (m.effective ? m.effective->lower_ratio() : 1.0);
    const double hi = m.spatial.max_quantile(1.0 - 1e-14, n) * sfmax;
    constexpr int kN = 2000;
    const double h = (hi - lo) / kN;
    double m1 = 0, m2 = 0;
    double prev = 1.0 - std::exp(law.log_cdf(lo));
    for (int i = 1; i <= kN; ++i) {
        const double g = lo + h * i;
        const double cur = -std::expm1(law.log_cdf(g));
        m1 += 0.5 * h * (prev + cur);
        m2 += h * ((g - h - lo) * prev + (g - lo) * cur);
        prev = cur;
    }
    mean = lo + m1;
    var = std::max(0.0, m2 - m1 * m1);
    if (law.table != nullptr) {
        law.table->mean = mean;
        law.table->var = var;
        law.table->has_moments = true;
    }
}

void group_laws(const StepModel& m, const PersistentLayout& l, GroupLaws& out) {
    GroupLaw& healthy = out.healthy;
    healthy.m = &m;
    healthy.power = m.lockstep ? m.dp : 1;
    if (!m.persistent_deterministic) {
        // node-random placement has ordered placement's unit pattern (persistent.hpp)
        std::map<int, int> per_unit;
        for (int j = 0; j < m.group_gpus; ++j) per_unit[l.gpu_of[j] / l.unit_gpus]++;
        std::map<int, int> hist;
        for (const auto& [unit, c] : per_unit) hist[c]++;
        for (const auto& [c, k] : hist) healthy.unit_members.push_back({c, k});
    }
    out.slow_active = !m.persistent_deterministic && m.slow_probability > 0 && m.slow_factor != 1.0;
    out.aware = l.kind == PlacementKind::variability_aware && out.slow_active;
    out.pgf_mode = out.slow_active && !out.aware;
    out.clean = healthy;
    out.clean.slow_members = 0;
    if (!m.persistent_deterministic) out.clean.table = law_table(out.clean);
}

}  // namespace prism::stochastic::detail::ssta
