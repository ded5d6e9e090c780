#include "src/stochastic/detail/analytic/replica_law.hpp"

#include <algorithm>
#include <cmath>

#include "src/stochastic/detail/kernels.hpp"

namespace prism::stochastic::detail::ssta {

namespace {

/// Bisection for the g where a law's log CDF crosses `cut`, from [a, b]: (below, above).
std::pair<double, double> log_cdf_crossing(const GroupLaw& law, double a, double b, double cut) {
    double x0 = a, x1 = b;
    for (int i = 0; i < 60; ++i) {
        const double mid = 0.5 * (x0 + x1);
        (law.log_cdf(mid) < cut ? x0 : x1) = mid;
    }
    return {x0, x1};
}

}  // namespace

ReplicaLaw::ReplicaLaw(const StepModel& m, const StageCurves& c, const ReplicaSet& set,
                       int grid_points)
    : m_(m), c_(c), set_(set), base_type_(&set.types[0]), beta_(c.beta) {
    if (c.w_random) {
        set_w_range();
        // lockstep slow units through the PGF act on all stages at once: no conditional form
        if (set.types[0].pgf != nullptr) beta_ = 0;
        if (beta_ > 0) set_u_range();
    }
    set_x_grid(std::max(17, grid_points));
}

void ReplicaLaw::set_w_range() {
    // W range over all types: from CDF_W = 1e-13 (base type) to sf_W = 1e-15 (slowest type)
    const auto& types = set_.types;
    const int p = m_.stages;
    const double sfmax = std::max(1.0, m_.slow_probability > 0 ? m_.slow_factor : 1.0);
    const double sfmin = std::min(1.0, m_.slow_probability > 0 ? m_.slow_factor : 1.0);
    const double n_all = m_.group_gpus * (m_.lockstep ? m_.dp : 1);
    double lo = 1e300, hi = -1e300;
    const double glo = m_.spatial.max_quantile(1e-14, 1) * sfmin *
                       (m_.effective ? m_.effective->lower_ratio() : 1.0);
    const double ghi = m_.spatial.max_quantile(1 - 1e-15, n_all) * sfmax;
    for (int st = 0; st < p; ++st) {
        double tlo = -1e300, thi = -1e300;  // the term at glo and ghi
        for (const auto& [inv, b] : c_.lines[st]) {
            tlo = std::max(tlo, (glo - c_.g_ref) / inv + b);
            thi = std::max(thi, (ghi - c_.g_ref) / inv + b);
        }
        if (c_.lines[st].empty()) continue;
        lo = std::min(lo, tlo);
        hi = std::max(hi, thi);
    }
    if (!(hi > lo)) {
        lo = hi - 1e-9;
    }
    // tighten: bisection on the base type's CDF (lower) and all types' sf (upper)
    // Every type is stochastically at least the base type when slow units are slower
    // (slow_factor >= 1), so F_D <= F_base^d over d replicas: below the point where the base
    // type's W has CDF 1e-16^(1/d), F_D < 1e-16 and the grid need not go.
    const bool slower = !(m_.slow_probability > 0) || m_.slow_factor >= 1.0;
    const double log_cut =
        slower ? std::max(std::log(1e-13), std::log(1e-16) / m_.replicas) : std::log(1e-13);
    double a = lo, b = hi;
    for (int i = 0; i < 24; ++i) {
        const double mid = 0.5 * (a + b);
        (log_cdf_w(types[0], mid) < log_cut ? a : b) = mid;
    }
    w_lo_ = a;
    // the largest sf over types; a type differs from the base type in a few stages only
    std::vector<std::vector<int>> differ(types.size());
    for (size_t t = 1; t < types.size(); ++t) {
        for (int st = 0; st < p; ++st) {
            if (types[t].stage_law[st] != types[0].stage_law[st]) differ[t].push_back(st);
        }
    }
    // sf > 1e-15 for some type <=> its log CDF < log(1 - 1e-15)
    const double log_sf_cut = std::log1p(-1e-15);
    a = w_lo_;
    b = hi;
    for (int i = 0; i < 24; ++i) {
        const double mid = 0.5 * (a + b);
        (min_log_cdf_w(mid, differ) < log_sf_cut ? a : b) = mid;
    }
    w_hi_ = b;
    if (!(w_hi_ > w_lo_)) w_hi_ = w_lo_ + 1e-9 * std::max(1.0, std::fabs(w_lo_));
}

double ReplicaLaw::min_log_cdf_w(double w, const std::vector<std::vector<int>>& differ) const {
    const auto& types = set_.types;
    thread_local std::vector<double> base_terms;
    grow(base_terms, static_cast<size_t>(m_.stages));
    double base = 0;
    for (int st = 0; st < m_.stages; ++st) {
        base_terms[st] = types[0].stage_law[st]->log_cdf(c_.g_of(st, w));
        base += base_terms[st];
    }
    base += other_pgf_log(w);
    double s = 0;
    for (size_t t = 0; t < types.size(); ++t) {
        double total = base;
        for (const int st : differ[t]) {
            total += types[t].stage_law[st]->log_cdf(c_.g_of(st, w)) - base_terms[st];
        }
        if (types[t].pgf != nullptr) total += pgf_log_term(*types[t].pgf, w);
        s = std::min(s, total);
    }
    return s;  // the smallest log CDF over types
}

void ReplicaLaw::set_u_range() {
    // the range of smax's g - g_ref over the types' laws (CDF 1e-17 to sf 1e-17), and W's range
    // widened for Z = max(phi_smax(U), Y + beta U) (w_masses): Z <= W + beta max(U, 0) and
    // Z >= W + beta min(U, 0) there
    const double g_ref = c_.g_ref;
    u_lo_ = 1e300;
    u_hi_ = -1e300;
    std::vector<const GroupLaw*> seen;
    for (const auto& t : set_.types) {
        const GroupLaw* law = t.stage_law[c_.smax];
        if (std::find(seen.begin(), seen.end(), law) != seen.end()) continue;
        seen.push_back(law);
        const double a = law->table != nullptr ? law->table->lo : 0.5 * g_ref;
        const double b = law->table != nullptr ? law->table->hi : 3.0 * g_ref;
        const double cut_lo = std::log(1e-17), cut_hi = std::log1p(-1e-17);
        u_lo_ = std::min(u_lo_, log_cdf_crossing(*law, a, b, cut_lo).first - g_ref);
        u_hi_ = std::max(u_hi_, log_cdf_crossing(*law, a, b, cut_hi).second - g_ref);
    }
    w_lo_ += beta_ * std::min(u_lo_, 0.0);
    w_hi_ += beta_ * std::max(u_hi_, 0.0);
}

void ReplicaLaw::set_x_grid(int grid_points) {
    const double noise_sd = c_.noise_sd();
    double lo = w_lo_ + c_.mu_o - 9.0 * noise_sd;
    double hi = w_hi_ + c_.mu_o + 9.0 * noise_sd;
    // with d replicas only F_Delta >= 1e-15^(1/d) matters for the max
    const double d = m_.replicas;
    const double p_lo = std::pow(1e-15, 1.0 / d);
    if (m_.single.present) {
        const auto& s = m_.single;
        const auto& X = m_.transient[s.cls];
        const double scale = s.base_s * (s.comm ? c_.r_bar : 1.0);
        const double mean = X.max_moments(s.n).mean;
        lo = scale * (X.max_quantile(p_lo, s.n) - mean);
        hi = scale * (X.quantile_upper(1e-16 / (d * s.n)) - mean);
    } else if (!c_.w_random && noise_sd > 0) {
        lo = c_.mu_o + noise_sd * normal_quantile(p_lo);
        hi = c_.mu_o - noise_sd * normal_quantile(1e-16 / d);
    }
    if (!c_.doc_x.empty() && !m_.single.present) {
        // the documents' atoms may reach past the normal's range (a skewed sum of few S)
        const double rest = std::sqrt(std::max(0.0, noise_sd * noise_sd - c_.doc_var));
        lo = std::min(lo, w_lo_ + c_.mu_o - c_.doc_span - 7.5 * rest);
        hi = std::max(hi, w_hi_ + c_.mu_o + c_.doc_span + 7.5 * rest);
    }
    if (!(hi > lo)) {
        lo -= 1e-12;
        hi += 1e-12;
    }
    x_.n = grid_points;
    x_.lo = lo;
    x_.hi = hi;
    x_.h = (hi - lo) / (x_.n - 1);
}

double ReplicaLaw::log_cdf_w(const ReplicaType& t, double w) const {
    double s = 0;
    for (int st = 0; st < m_.stages; ++st) {
        s += t.stage_law[st]->log_cdf(c_.g_of(st, w));
        if (s < -700) return s;
    }
    if (t.pgf != nullptr) s += pgf_log_term(*t.pgf, w);
    return s + other_pgf_log(w);
}

double ReplicaLaw::other_pgf_log(double w) const {
    double total = 0;
    for (const auto& [nf, pat] : set_.other_patterns) {
        double l = 0;
        for (const auto& [st, c] : pat) {
            const double g = raw_g(c_.g_of(st, w));
            if (!std::isfinite(g)) continue;
            l += c *
                 (log_spatial_cdf(m_.spatial, g / m_.slow_factor) - log_spatial_cdf(m_.spatial, g));
        }
        const double q = m_.slow_probability;
        total += nf * std::log(std::max(1e-300, 1.0 - q + q * std::exp(l)));
    }
    return total;
}

double ReplicaLaw::pgf_log_term(const UnitPgf& u, double w) const {
    // ratio of a stage's CDF with c slow members to the clean one: F(g/sf)^c / F(g)^c
    auto log_ratio = [&](int st, int c) {
        const double g = raw_g(c_.g_of(st, w));
        return c *
               (log_spatial_cdf(m_.spatial, g / m_.slow_factor) - log_spatial_cdf(m_.spatial, g));
    };
    double b = 0;
    for (const auto& [f, pat] : u.patterns) {
        double l = 0;
        for (const auto& [st, c] : pat) l += log_ratio(st, c);
        b += f * std::exp(l);
    }
    return u.units * std::log(std::max(1e-300, 1.0 - u.q + u.q * b));
}

void ReplicaLaw::stage_row_at(const GroupLaw& law, int st, double w0, int n, double hw,
                              double* row) const {
    // log CDF of stage st's term at w0 + hw j, j = 0 .. n - 1
    const auto& ls = c_.lines[st];
    if (ls.empty()) {
        std::fill(row, row + n, 0.0);
        return;
    }
    if (law.table != nullptr) {
        // g_of(st, w) is the min of affine maps of w and the log CDF is increasing: the row is
        // the min of the affine rows
        law.table->fill_affine(c_.g_ref + (w0 - ls[0].second) * ls[0].first, hw * ls[0].first, n,
                               row);
        thread_local std::vector<double> other;
        grow(other, static_cast<size_t>(n));
        for (size_t k = 1; k < ls.size(); ++k) {
            law.table->fill_affine(c_.g_ref + (w0 - ls[k].second) * ls[k].first, hw * ls[k].first,
                                   n, other.data());
            for (int j = 0; j < n; ++j) row[j] = std::min(row[j], other[j]);
        }
        return;
    }
    for (int j = 0; j < n; ++j) row[j] = law.log_cdf(c_.g_of(st, w0 + hw * j));
}

void ReplicaLaw::w_masses_prepare(int kw, double hw) const {
    // Types differ from the base type in a few stages only: the base type's per-stage log CDFs
    // at the kw + 1 cell edges w_lo + hw j are computed once and a type adds its differing
    // stages' terms (and likewise on the conditional form's y lattice)
    if (kw == mass_kw_ && hw == mass_hw_) return;
    mass_kw_ = kw;
    mass_hw_ = hw;
    mass_.clear();
    ucache_.clear();
    base_ysf_.clear();
    const ReplicaType& base = *base_type_;
    base_stage_.clear();  // the W lattice's rows: on first use (w_masses)
    base_total_.clear();
    if (beta_ > 0) {
        // U cells of width du = hw / beta_ from u_base = n0 du: beta_ u_base is a whole number
        // of steps, so that z_j - beta_ u (cell centres) falls on the y lattice
        const double du = hw / beta_;
        n0_ = static_cast<int>(std::floor(u_lo_ / du));
        ku_ = std::max(1, static_cast<int>(std::ceil((u_hi_ - n0_ * du) / du)));
        // z_j - beta_ u_c(i) = y_{j - n0 - i}: k from -n0 - (ku - 1) to kw - n0
        ky0_ = -n0_ - (ku_ - 1);
        ky_ = kw + ku_;
        base_ystage_.resize(static_cast<size_t>(m_.stages) * ky_);
        base_ytotal_.assign(ky_, 0.0);
        const double y0 = w_lo_ - 0.5 * hw + hw * ky0_;
        for (int st = 0; st < m_.stages; ++st) {
            if (st == c_.smax) continue;
            double* row = base_ystage_.data() + static_cast<size_t>(st) * ky_;
            stage_row_at(*base.stage_law[st], st, y0, ky_, hw, row);
            for (int k = 0; k < ky_; ++k) base_ytotal_[k] += row[k];
        }
        if (!set_.other_patterns.empty()) {
            for (int k = 0; k < ky_; ++k) base_ytotal_[k] += other_pgf_log(y0 + hw * k);
        }
    }
}

const std::vector<double>& ReplicaLaw::w_masses(const ReplicaType& t, int kw, double hw) const {
    w_masses_prepare(kw, hw);
    auto it = mass_.find(&t);
    if (it != mass_.end()) return it->second;
    std::vector<double>& pj = mass_[&t];
    pj.resize(kw);
    if (conditional(t)) {
        thread_local std::vector<double> ysf;
        y_sf(t, kw, hw, ysf);
        cond_masses(t.stage_law[c_.smax], ysf.data(), 1.0, kw, hw, pj);
        return pj;
    }
    if (base_total_.empty()) {
        // the base type's rows on the W lattice, which only the types outside the conditional
        // form use
        const ReplicaType& base = *base_type_;
        base_stage_.resize(static_cast<size_t>(m_.stages) * (kw + 1));
        base_total_.assign(kw + 1, 0.0);
        for (int st = 0; st < m_.stages; ++st) {
            double* row = base_stage_.data() + static_cast<size_t>(st) * (kw + 1);
            stage_row_at(*base.stage_law[st], st, w_lo_, kw + 1, hw, row);
            for (int j = 0; j <= kw; ++j) base_total_[j] += row[j];
        }
        if (!set_.other_patterns.empty()) {
            for (int j = 0; j <= kw; ++j) base_total_[j] += other_pgf_log(w_lo_ + hw * j);
        }
    }
    thread_local std::vector<double> total_row, stage;
    total_row.assign(base_total_.begin(), base_total_.end());
    grow(stage, kw + 1);
    for (int st = 0; st < m_.stages; ++st) {
        if (t.stage_law[st] == base_type_->stage_law[st] || c_.lines[st].empty()) continue;
        stage_row_at(*t.stage_law[st], st, w_lo_, kw + 1, hw, stage.data());
        const double* base_row = base_stage_.data() + static_cast<size_t>(st) * (kw + 1);
        for (int j = 0; j <= kw; ++j) total_row[j] += stage[j] - base_row[j];
    }
    if (t.pgf != nullptr) {
        for (int j = 0; j <= kw; ++j) total_row[j] += pgf_log_term(*t.pgf, w_lo_ + hw * j);
    }
    for (double& x : total_row) x = std::min(0.0, x);
    one_minus_exp_n(total_row.data(), kw + 1, stage.data());  // sf at the cell edges
    for (int j = 0; j < kw; ++j) pj[j] = std::max(0.0, stage[j] - stage[j + 1]);
    return pj;
}

void ReplicaLaw::y_sf(const ReplicaType& t, int kw, double hw, std::vector<double>& ysf) const {
    w_masses_prepare(kw, hw);
    // the sf of the max of the stages other than smax on the y lattice
    const double y0 = w_lo_ - 0.5 * hw + hw * ky0_;
    thread_local std::vector<double> total_row, stage;
    total_row.assign(base_ytotal_.begin(), base_ytotal_.end());
    grow(stage, static_cast<size_t>(ky_));
    bool differs = false;
    for (int st = 0; st < m_.stages; ++st) {
        // a stage without lines never bounds W: its row is 0 under every law
        if (st == c_.smax || t.stage_law[st] == base_type_->stage_law[st] || c_.lines[st].empty()) {
            continue;
        }
        differs = true;
        stage_row_at(*t.stage_law[st], st, y0, ky_, hw, stage.data());
        const double* base_row = base_ystage_.data() + static_cast<size_t>(st) * ky_;
        for (int k = 0; k < ky_; ++k) total_row[k] += stage[k] - base_row[k];
    }
    // the types whose other stages all act as the base type's share its row
    if (!differs && !base_ysf_.empty()) {
        ysf = base_ysf_;
        return;
    }
    for (int k = 0; k < ky_; ++k) total_row[k] = std::min(0.0, total_row[k]);
    ysf.resize(ky_);
    one_minus_exp_n(total_row.data(), ky_, ysf.data());
    if (!differs) base_ysf_ = ysf;
}

void ReplicaLaw::cond_masses(const GroupLaw* ulaw, const double* ysf, double weight, int kw,
                             double hw, std::vector<double>& pj) const {
    // Z = max(phi_smax(U), Y + beta U), U = g_smax - g_ref, Y the max of the other stages'
    // terms (independent of U): sf_Z(z) = P(U > u*(z)) + E[1(U <= u*(z)) sf_Y(z - beta U)],
    // u*(z) = c_.g_of(smax, z) - g_ref, over U cells (sf_Y at the cell centres; the cell holding
    // u* by its exact mass below u*). It is linear in sf_Y: `ysf` may be a weighted sum of
    // types' sf_Y (weights summing to `weight`) sharing U's law. What depends on U's law alone
    // is kept per law; the sum over cells is one banded_dot.
    w_masses_prepare(kw, hw);
    auto uit = ucache_.find(ulaw);
    if (uit == ucache_.end()) {
        UCache uc;
        const double du = hw / beta_;
        const double ub = n0_ * du;
        std::vector<double> ulog(ku_ + 1);
        for (int i = 0; i <= ku_; ++i) {
            ulog[i] = std::min(0.0, ulaw->log_cdf(c_.g_ref + ub + du * i));
        }
        uc.pu.resize(ku_);
        for (int i = 0; i < ku_; ++i) {
            uc.pu[i] = std::max(0.0, std::exp(ulog[i + 1]) - std::exp(ulog[i]));
        }
        uc.sf.resize(kw + 1);
        uc.part.resize(kw + 1);
        uc.at.resize(kw + 1);
        uc.lo.assign(kw + 1, 0);
        uc.hi.resize(kw + 1);
        uc.off.resize(kw + 1);
        for (int j = 0; j <= kw; ++j) {
            const double us = c_.g_of(c_.smax, w_lo_ + hw * j) - c_.g_ref;
            const double lc = std::min(0.0, ulaw->log_cdf(c_.g_ref + us));
            const int is = static_cast<int>(
                std::clamp(std::floor((us - ub) / du), -1.0, static_cast<double>(ku_)));
            const int a = j - n0_ - ky0_;  // y index of cell 0's centre, less ky0
            uc.sf[j] = -std::expm1(lc);    // P(U > u*)
            uc.hi[j] = std::clamp(is, 0, ku_);
            uc.off[j] = ky_ - 1 - a;  // ysf[a - i] = reversed[off + i]
            uc.at[j] = is >= 0 && is < ku_ ? a - is : -1;
            uc.part[j] =
                is >= 0 && is < ku_ ? std::max(0.0, std::exp(lc) - std::exp(ulog[is])) : 0.0;
        }
        uit = ucache_.emplace(ulaw, std::move(uc)).first;
    }
    const UCache& uc = uit->second;
    thread_local std::vector<double> yrev, zbase, zsf;
    grow(yrev, static_cast<size_t>(ky_));
    for (int k = 0; k < ky_; ++k) yrev[ky_ - 1 - k] = ysf[k];
    grow(zbase, static_cast<size_t>(kw) + 1);
    grow(zsf, static_cast<size_t>(kw) + 1);
    for (int j = 0; j <= kw; ++j) {
        zbase[j] = weight * uc.sf[j] + (uc.at[j] >= 0 ? uc.part[j] * ysf[uc.at[j]] : 0.0);
    }
    banded_dot(kw + 1, uc.lo.data(), uc.hi.data(), uc.off.data(), uc.pu.data(), yrev.data(),
               zbase.data(), zsf.data());
    pj.resize(kw);
    for (int j = 0; j < kw; ++j) {
        pj[j] = std::max(0.0, std::min(weight, zsf[j]) - std::min(weight, zsf[j + 1]));
    }
}

}  // namespace prism::stochastic::detail::ssta
