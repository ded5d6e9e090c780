#include "src/stochastic/detail/analytic/replica_types.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "src/stochastic/detail/analytic/common.hpp"
#include "src/stochastic/detail/analytic/unit_patterns.hpp"

namespace prism::stochastic::detail::ssta {

ReplicaSet::ReplicaSet(const StepModel& m, const PersistentLayout& l, const StageCurves& c,
                       const GroupLaws& group)
    : m_(m), l_(l), c_(c), g_(group) {
    const int p = m.stages;
    pgf_mode = group.pgf_mode;
    ReplicaType base_type;
    base_type.stage_law.assign(p, &group.clean);
    types.push_back(base_type);
    if (pgf_mode) {
        unit_pgf.q = m.slow_probability;
        unit_pgf.units = static_cast<double>(l.job_units);
    }
    const auto* lock_patterns = pgf_mode && m.lockstep ? &unit_patterns(m, l).lockstep : nullptr;
    // patterns touching disjoint sets of stages (each stage in at most one)
    std::vector<int> stage_pattern(p, -1);
    bool disjoint = lock_patterns != nullptr && p > 1;
    for (size_t f = 0; disjoint && f < lock_patterns->size(); ++f) {
        for (const auto& [st, cnt] : (*lock_patterns)[f].second) {
            if (stage_pattern[st] >= 0 && stage_pattern[st] != static_cast<int>(f))
                disjoint = false;
            stage_pattern[st] = static_cast<int>(f);
        }
    }
    if (disjoint) {
        disjoint_lockstep_scenarios(*lock_patterns, stage_pattern);
    } else if (pgf_mode && m.lockstep) {
        if (lock_patterns != nullptr) unit_pgf.patterns = *lock_patterns;
        types[0].pgf = &unit_pgf;
        scenarios.push_back({1.0, {{0, 1}}});
    } else if (pgf_mode) {
        unit_types();
        scenarios.push_back({1.0, {{0, m.replicas}}});
    } else if (!group.aware) {
        scenarios.push_back({1.0, {{0, m.replicas}}});
    } else {
        aware_scenarios();
    }
}

double ReplicaSet::mean_g(int slow_members) {
    auto it = mean_g_cache_.find(slow_members);
    if (it != mean_g_cache_.end()) return it->second;
    GroupLaw law = g_.clean;
    law.slow_members = slow_members;
    law.table = law_table(law);
    double mg = 1, vg2 = 0;
    moments_of_g(m_, law, mg, vg2);
    mean_g_cache_[slow_members] = mg;
    return mg;
}

double ReplicaSet::law_shift(int st, const GroupLaw& law) const {
    double mg = 1, vg2 = 0;
    moments_of_g(m_, law, mg, vg2);
    return c_.rest[st] * m_.stage_comp_s[st] * (mg - c_.eg);
}

int ReplicaSet::type_for_sig(const std::vector<int>& sig) {
    auto it = sig_type_.find(sig);
    if (it != sig_type_.end()) return it->second;
    ReplicaType t;
    double sum = 0;
    for (int st = 0; st < m_.stages; ++st) {
        if (sig[st] == 0) {
            t.stage_law.push_back(&g_.clean);
        } else {
            GroupLaw law = g_.clean;
            law.slow_members = sig[st];
            law.table = law_table(law);
            laws.push_back(law);
            t.stage_law.push_back(&laws.back());
            // a slow stage other than smax moves the others' sum by its mean (smax's law is
            // in W)
            if (st != c_.smax) {
                sum += c_.rest[st] * m_.stage_comp_s[st] * (mean_g(sig[st]) - c_.eg);
            }
        }
    }
    t.extra_mean = sum;
    types.push_back(t);
    sig_type_.emplace(sig, static_cast<int>(types.size()) - 1);
    return static_cast<int>(types.size()) - 1;
}

void ReplicaSet::unit_types() {
    for (const auto& [f, pat] : unit_patterns(m_, l_).replicas) {
        std::vector<int> idx;
        for (const auto& sig : pat) idx.push_back(type_for_sig(sig));
        rep_patterns.push_back({f, idx});
    }
}

void ReplicaSet::disjoint_lockstep_scenarios(
    const std::vector<std::pair<double, std::vector<std::pair<int, int>>>>& patterns,
    const std::vector<int>& stage_pattern) {
    // Lockstep pipeline whose slow-unit patterns touch disjoint sets of stages: a pattern's
    // stages depend on each other only through its number K of slow units (Binomial(units f,
    // q)); given K, stage s has K c_s slow GPUs. smax's pattern is taken per K (one type each,
    // K >= 8 in bins about 20% wide at the bin's mean); the other patterns enter W's CDF
    // through their joint PGF factors (other_pgf_log). Each type carries the others' mean
    // shift (from each stage's marginal law), and the conditional form of w_masses applies.
    const int p = m_.stages;
    const int smax = c_.smax;
    const int fs = stage_pattern[smax];
    std::vector<int> per_stage(p, 0);
    for (const auto& pat : patterns) {
        for (const auto& [st, cnt] : pat.second) per_stage[st] += cnt;
    }
    // the other patterns act through their joint factor (other_pgf_log) on clean stage laws;
    // their stages' mean shifts from each stage's marginal law
    ReplicaType base_k;
    base_k.stage_law.assign(p, &g_.clean);
    for (size_t f = 0; f < patterns.size(); ++f) {
        if (static_cast<int>(f) == fs) continue;
        const double nf = unit_pgf.units * patterns[f].first;
        other_patterns.push_back({nf, patterns[f].second});
        for (int st = 0; st < p; ++st) {
            if (stage_pattern[st] != static_cast<int>(f) || st == smax) continue;
            GroupLaw law = g_.clean;
            law.lock_units = nf;
            law.lock_c = per_stage[st];
            law.table = law_table(law);
            base_k.extra_mean += law_shift(st, law);
        }
    }
    types[0] = base_k;
    const double n_units = fs >= 0 ? unit_pgf.units * patterns[fs].first : 0.0;
    const double q = unit_pgf.q;
    std::vector<std::pair<int, double>> pk;  // (K, probability), pk >= 1e-13
    double cum = 0;
    for (int k = 0; k <= n_units && cum < 1.0 - 1e-15; ++k) {
        const double w = binomial_pmf(n_units, k, q);
        cum += w;
        if (w >= 1e-13) pk.push_back({k, w});
    }
    if (pk.empty()) pk.push_back({0, 1.0});
    for (size_t i = 0; i < pk.size();) {
        size_t j = i + 1;
        double w = pk[i].second, wk = pk[i].second * pk[i].first;
        if (pk[i].first >= 8) {
            for (; j < pk.size() && pk[j].first <= 1.2 * pk[i].first; ++j) {
                w += pk[j].second;
                wk += pk[j].second * pk[j].first;
            }
        }
        const int k = static_cast<int>(std::lround(wk / w));
        int idx = 0;
        if (k > 0) {
            ReplicaType t = base_k;
            for (int st = 0; st < p; ++st) {
                if (stage_pattern[st] != fs || per_stage[st] == 0) continue;
                GroupLaw law = g_.clean;
                law.lock_slow = k * per_stage[st];
                law.table = law_table(law);
                laws.push_back(law);
                t.stage_law[st] = &laws.back();
                if (st != smax) t.extra_mean += law_shift(st, laws.back());
            }
            types.push_back(t);
            idx = static_cast<int>(types.size()) - 1;
        }
        scenarios.push_back({w, {{idx, 1}}});
        i = j;
    }
    double total = 0;
    for (const auto& sc : scenarios) total += sc.weight;
    for (auto& sc : scenarios) sc.weight /= total;
}

void ReplicaSet::pack_slow_units(std::int64_t e, std::vector<std::vector<int>>& per_rep,
                                 std::vector<int>& touched) const {
    // fill groups in preference order; only the replicas touched carry slow members
    const int p = m_.stages;
    std::int64_t slow_gpus = e * l_.unit_gpus;
    per_rep.assign(m_.dp, {});
    touched.clear();
    for (const auto gi : l_.preference) {
        if (slow_gpus <= 0) break;
        const int cnt = static_cast<int>(std::min<std::int64_t>(m_.group_gpus, slow_gpus));
        auto& sig = per_rep[gi % m_.dp];
        if (sig.empty()) {
            sig.assign(p, 0);
            touched.push_back(gi % m_.dp);
        }
        sig[gi / m_.dp] = cnt;
        slow_gpus -= cnt;
    }
    for (auto& sig : per_rep) {
        if (sig.empty() && m_.lockstep) sig.assign(p, 0);
    }
}

void ReplicaSet::aware_scenarios() {
    // slow units that must be used ~ max(0, Binomial(machine_units, q) - spare)
    const int p = m_.stages;
    const int smax = c_.smax;
    const double q = m_.slow_probability;
    const auto units = static_cast<double>(l_.machine_units);
    const std::int64_t spare = l_.machine_units - l_.job_units;
    std::map<std::vector<int>, int> type_of;  // per-stage slow members -> type index
    std::map<std::pair<int, double>, const GroupLaw*> law_of;  // (slow members, power)
    auto law_for = [&](int slow_members, double power) -> const GroupLaw* {
        const auto key = std::make_pair(slow_members, power);
        auto found = law_of.find(key);
        if (found != law_of.end()) return found->second;
        GroupLaw law = g_.healthy;
        law.slow_members = slow_members;
        law.power = power;
        law.table = law_table(law);
        laws.push_back(law);
        law_of.emplace(key, &laws.back());
        return &laws.back();
    };
    double mass_zero = 0;
    const int kmax = static_cast<int>(
        std::min<double>(units, units * q + 12.0 * std::sqrt(units * q * (1 - q)) + 12.0));
    std::vector<std::vector<int>> per_rep;
    std::vector<int> touched;
    for (int k = 0; k <= kmax; ++k) {
        const double pk = binomial_pmf(units, k, q);
        const std::int64_t e = std::max<std::int64_t>(0, k - spare);
        if (e == 0) {
            mass_zero += pk;
            continue;
        }
        if (pk < 1e-12) continue;
        pack_slow_units(e, per_rep, touched);
        Scenario sc{pk, {}};
        if (m_.lockstep) {
            // one replica: each stage's law is the product over its dp groups
            std::vector<int> key;
            for (int s = 0; s < p; ++s) {
                for (int r = 0; r < m_.dp; ++r) key.push_back(per_rep[r][s]);
            }
            auto it = type_of.find(key);
            if (it == type_of.end()) {
                // approximate the product by its dominant factor: the most-slow group
                ReplicaType t;
                for (int s = 0; s < p; ++s) {
                    int worst = 0;
                    for (int r = 0; r < m_.dp; ++r) worst = std::max(worst, per_rep[r][s]);
                    t.stage_law.push_back(worst == 0 ? &g_.clean : law_for(worst, 1.0));
                    if (worst > 0 && s != smax) t.extra_mean += law_shift(s, *t.stage_law[s]);
                }
                it = type_of.emplace(key, static_cast<int>(types.size())).first;
                types.push_back(t);
            }
            sc.counts.push_back({it->second, 1});
        } else {
            std::map<int, int> count;
            count[0] = m_.dp - static_cast<int>(touched.size());
            for (const int r : touched) {
                auto it = type_of.find(per_rep[r]);
                if (it == type_of.end()) {
                    ReplicaType t;
                    bool any = false;
                    for (int s = 0; s < p; ++s) {
                        const int cnt = per_rep[r][s];
                        any = any || cnt > 0;
                        t.stage_law.push_back(cnt == 0 ? &g_.clean : law_for(cnt, 1.0));
                        if (cnt > 0 && s != smax) t.extra_mean += law_shift(s, *t.stage_law[s]);
                    }
                    const int idx = any ? static_cast<int>(types.size()) : 0;
                    if (any) types.push_back(t);
                    it = type_of.emplace(per_rep[r], idx).first;
                }
                count[it->second]++;
            }
            for (const auto& [t, cnt] : count) {
                if (cnt > 0) sc.counts.push_back({t, cnt});
            }
        }
        scenarios.push_back(sc);
    }
    scenarios.push_back({mass_zero, {{0, m_.replicas}}});
    double total = 0;
    for (const auto& s : scenarios) total += s.weight;
    for (auto& s : scenarios) s.weight /= total;
}

}  // namespace prism::stochastic::detail::ssta
