// Analytic evaluator: block-based statistical timing (DESIGN.md section 3) on the reduced model
// of step_model.hpp. Approximations, each checked against Monte Carlo by the accuracy tests:
//  * a replica's pipeline time is linearized in its group factors g around the typical g_ref:
//      T = T(g=1, R) + [T(g_ref) - T(1)] + sum_{s != smax} a_s c_s (g_s - g_ref) + W + eps,
//    a_s the critical path's content of stage s, smax the stage it dwells on; W = the max over
//    stages of each stage's own term: smax's makespan curve, and for the others the path
//    families that dwell on them once they are slow enough (convex, piecewise linear, found
//    exactly on the schedule DAG; see run()). The other stages' families pass smax with
//    content beta, so W is taken conditional on smax's factor (w_masses: the CDF of the max of
//    the others' terms is the product of their CDFs); the sum is normal (moments of the group
//    factor), eps the transient noise along the critical path (normal);
//  * lockstep pipelines with slow units: the number of slow units of smax's pattern is
//    enumerated (binomial scenarios), the other patterns enter through their joint PGF;
//  * replicas are independent given R: the max over d of them has CDF F^d, in log space;
//  * R (shared by all collectives of a step) is integrated over cells of its quantile function,
//    the shift T(g=1, R) being linear inside a cell; the DP sync and optimizer by Gauss-Hermite.
// Numerics: one replica's Delta on a 257-point grid (kAnalyticGridPoints; converged to ~2e-3 in
// the CDF against 2049 points, tested); the step's CDF on a lattice of the same step (or of a
// multiple of it, when the regime spreads the step over more than 4096 such steps), as the
// discrete convolution of F_D with the regime and tail masses, interpolated by a monotone cubic.
// Speed (sweeps evaluate millions of points): group-factor log CDFs are tabulated once per law
// and cached across points (law_table), as are the slow-unit patterns of a layout
// (unit_patterns); replica types share the base type's per-stage terms (w_masses); when each
// slow unit touches one replica the PGF is linear in the types' CDFs and their mixture takes one
// convolution (mixture_sf); the stage terms come from two or three multi-lane passes over the
// schedule (FlatPipeline::makespan_stage_lanes) and the regime shifts from a few DAG runs;
// the inner loops are in kernels.cpp (instruction-set clones, bit-identical).

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>

#include "src/stochastic/detail/analytic/common.hpp"
#include "src/stochastic/detail/analytic/group_law.hpp"
#include "src/stochastic/detail/analytic/replica_types.hpp"
#include "src/stochastic/detail/analytic/stage_curves.hpp"
#include "src/stochastic/detail/analytic/unit_patterns.hpp"
#include "src/stochastic/detail/evaluators.hpp"
#include "src/stochastic/detail/kernels.hpp"
#include "src/stochastic/step_distribution.hpp"

namespace prism::stochastic::detail {

namespace {

using ssta::binomial_pmf;
using ssta::Grid;
using ssta::GroupLaw;
using ssta::grow;
using ssta::law_table;
using ssta::log_spatial_cdf;
using ssta::ReplicaType;
using ssta::trim_law_cache;
using ssta::unit_patterns;
using ssta::UnitPgf;

// probabilists' Gauss-Hermite, 8 nodes (physicists' nodes * sqrt 2, weights / sqrt pi)
constexpr std::array<double, 8> kGhZ{-4.1445471861258945, -2.8024858612875416, -1.6365190424351083,
                                     -0.5390798113513751, 0.5390798113513751,  1.6365190424351083,
                                     2.8024858612875416,  4.1445471861258945};
constexpr std::array<double, 8> kGhW{
    1.1261453837536784e-4, 9.635220120788266e-3, 0.11723990766175913,  0.3730122576790774,
    0.3730122576790774,    0.11723990766175913,  9.635220120788266e-3, 1.1261453837536784e-4};

class Analytic {
  public:
    Analytic(const StepModel& m, const PersistentLayout& l, int grid_points)
        : m_(m), l_(l), grid_points_(std::max(17, grid_points)) {}

    void run(const EvaluationSpec& eval, int clusters, StepDistribution& out,
             const std::vector<double>* query, std::vector<double>* cdf_out);

  private:
    /// makespan of the mean durations at g = 1 and regime r
    double makespan_at(double r) const {
        double end = 0;
        makespans_at(&r, 1, &end);
        return end;
    }
    /// makespan_at for up to four regimes r[0 .. lanes) in one pass
    void makespans_at(const double* r, size_t lanes, double* end) const;
    /// group factor of stage st that puts the replica's stage term at w (+infinity: the stage
    /// never bounds W, e.g. FSDP layers whose gather outlasts the compute, or a stage that
    /// does not become critical in the relevant range)
    double g_of(int st, double w) const {
        double d = std::numeric_limits<double>::infinity();
        for (const auto& [inv, b] : lines_[st]) d = std::min(d, (w - b) * inv);
        return g_ref_ + d;
    }
    /// log CDF of W for a replica type at w (sum over stages)
    double log_cdf_w(const ReplicaType& t, double w) const {
        double s = 0;
        for (int st = 0; st < m_.stages; ++st) {
            s += t.stage_law[st]->log_cdf(g_of(st, w));
            if (s < -700) return s;
        }
        if (t.pgf != nullptr) s += pgf_log_term(*t.pgf, w);
        return s + other_pgf_log(w);
    }
    /// lockstep: the stage's largest GPU factor max G of its factor g (phi_0^-1)
    double raw_g(double g) const {
        return m_.effective && std::isfinite(g) ? m_.effective->inverse(0, g) : g;
    }
    /// lockstep, disjoint patterns (run()): the joint factor of the slow-unit patterns other
    /// than smax's at W = w, sum over them of units f log(1 - q + q prod ratio_s^c_s) (exact:
    /// each pattern's units are its own)
    double other_pgf_log(double w) const {
        double total = 0;
        for (const auto& [nf, pat] : other_patterns_) {
            double l = 0;
            for (const auto& [st, c] : pat) {
                const double g = raw_g(g_of(st, w));
                if (!std::isfinite(g)) continue;
                l += c * (log_spatial_cdf(m_.spatial, g / m_.slow_factor) -
                          log_spatial_cdf(m_.spatial, g));
            }
            const double q = m_.slow_probability;
            total += nf * std::log(std::max(1e-300, 1.0 - q + q * std::exp(l)));
        }
        return total;
    }
    /// lockstep: the slow units' factor of the CDF of W, log (1 - q + q B(w))^units
    double pgf_log_term(const UnitPgf& u, double w) const {
        {
            // ratio of a stage's CDF with c slow members to the clean one: F(g/sf)^c / F(g)^c
            auto log_ratio = [&](int st, int c) {
                const double g = raw_g(g_of(st, w));
                return c * (log_spatial_cdf(m_.spatial, g / m_.slow_factor) -
                            log_spatial_cdf(m_.spatial, g));
            };
            double b = 0;
            if (u.random) {
                double b1 = 0;
                for (int st = 0; st < m_.stages; ++st) b1 += std::exp(log_ratio(st, 1));
                b1 /= m_.stages;
                b = std::pow(1.0 - u.phi + u.phi * b1, u.unit_gpus);
            } else {
                for (const auto& [f, pat] : u.patterns) {
                    double l = 0;
                    for (const auto& [st, c] : pat) l += log_ratio(st, c);
                    b += f * std::exp(l);
                }
            }
            return u.units * std::log(std::max(1e-300, 1.0 - u.q + u.q * b));
        }
    }
    /// a mixture's W masses, grouped by their offset (extra mean), before the smoothing by the
    /// noise: what the sf with and without the noise share
    struct MixtureMasses {
        double total_weight = 0;
        int kw = 0;
        std::vector<std::pair<double, std::vector<double>>> groups;  ///< (offset, masses)
    };
    MixtureMasses mixture_masses(
        const std::vector<std::pair<double, const ReplicaType*>>& mix) const;
    /// sum over the mixture's (weight, type) of weight * the sf of the type's Delta on the x
    /// grid, its persistent part smoothed by `noise_sd`: one convolution per distinct offset
    std::vector<double> mixture_sf(const MixtureMasses& mm, double noise_sd) const;
    /// adds to sf the Gaussian-smoothed sf of the W masses pj (kw cells) shifted by extra_mean
    void convolve_add(const std::vector<double>& pj, int kw, double extra_mean, double noise_sd,
                      std::vector<double>& sf) const;
    /// probability masses of W in the kw cells of width hw above w_lo_ (memoized per type)
    const std::vector<double>& w_masses(const ReplicaType& t, int kw, double hw) const;
    /// the per-(kw, hw) state of w_masses: base rows, the conditional form's lattices
    void w_masses_prepare(int kw, double hw) const;
    void stage_row_at(const GroupLaw& law, int st, double w0, int n, double hw, double* row) const;
    /// whether w_masses takes type t conditional on smax's factor
    bool conditional(const ReplicaType& t) const;
    /// the conditional form: the others' sf on the y lattice, and the masses from a (weighted
    /// sum of) sf_Y with smax's law `ulaw`
    void y_sf(const ReplicaType& t, int kw, double hw, std::vector<double>& ysf) const;
    void cond_masses(const GroupLaw* ulaw, const double* ysf, double weight, int kw, double hw,
                     std::vector<double>& pj) const;

    const StepModel& m_;
    const PersistentLayout& l_;
    int grid_points_;
    double r_bar_ = 1;
    double mu_o_ = 0, var_o_ = 0, var_eps_ = 0;
    double w_lo_ = 0, w_hi_ = 0;
    /// W depends on the persistent factors: they are random and some stage has compute
    bool w_random_ = false;
    /// per stage: the critical path's content in units of the stage's compute (its slope for
    /// a small change)
    std::vector<double> rest_;
    /// per stage: its W term as the max of lines in d = g - g_ref, each as (1 / slope,
    /// intercept); none: the term never bounds W
    std::vector<std::vector<std::pair<double, double>>> lines_;
    double g_ref_ = 1;
    int smax_ = 0;
    Grid x_;
    const ReplicaType* base_type_ = nullptr;
    mutable int mass_kw_ = -1;
    mutable double mass_hw_ = 0;
    mutable std::vector<double> base_stage_, base_total_;
    /// The paths that dwell on a stage other than smax pass smax with compute content beta_
    /// (seconds per unit of its g): W is taken conditional on smax's factor (w_masses) when
    /// beta_ > 0. u_lo_, u_hi_: the range of smax's g - g_ref over the types' laws.
    double beta_ = 0, u_lo_ = 0, u_hi_ = 0;
    /// (units, pattern) of the lockstep slow-unit patterns other than smax's (other_pgf_log)
    std::vector<std::pair<double, std::vector<std::pair<int, int>>>> other_patterns_;
    /// the conditional form's lattices for the current (kw, hw): U cells from u_base_ (n0_
    /// steps of hw / beta_), ku_ of them; the others' log CDF rows on y_k = w_lo - hw / 2 +
    /// hw k, k in [ky0_, ky0_ + ky_), per stage (base type) and summed
    mutable int n0_ = 0, ku_ = 0, ky0_ = 0, ky_ = 0;
    mutable std::vector<double> base_ystage_, base_ytotal_;
    /// sf_Y on the y lattice of the types whose stages other than smax act as the base type's
    /// (empty until y_sf computes it)
    mutable std::vector<double> base_ysf_;
    /// per law of smax's factor, for the current (kw, hw): U cell masses; per cell edge j of
    /// W, P(U > u*), the partial cell's mass and y index (-1: none), and banded_dot's bounds
    struct UCache {
        std::vector<double> pu, sf, part;
        std::vector<int> at, lo, hi, off;
    };
    mutable std::map<const GroupLaw*, UCache> ucache_;
    mutable std::map<const ReplicaType*, std::vector<double>> mass_;
    /// the last Gaussian kernel of convolve_add (reversed) and what it was built for
    mutable std::vector<double> kern_rev_;
    /// per op of the schedule: the mean compute and communication of one microbatch's chunk
    /// (thread-local rows filled by run())
    const double* op_comp_ = nullptr;
    const double* op_comm_ = nullptr;
    mutable double kern_off_ = 0, kern_sd_ = -1;
    mutable int kern_len_ = -1, kern_reach_ = -1;
};

void Analytic::makespans_at(const double* r, size_t lanes, double* end) const {
    // the durations are op_comp_ + r op_comm_ (ChunkCost::mean at g = 1)
    std::array<double, 4> tr{}, start{};
    for (size_t k = 0; k < lanes; ++k) {
        tr[k] = m_.p2p.mean(1.0, r[k]);
        start[k] = m_.dataloader.mean(1.0, r[k]);
    }
    m_.pipeline.makespan_affine_lanes(op_comp_, op_comm_, r, tr.data(), start.data(), lanes, end);
}

void Analytic::stage_row_at(const GroupLaw& law, int st, double w0, int n, double hw,
                            double* row) const {
    // log CDF of stage st's term at w0 + hw j, j = 0 .. n - 1
    const auto& ls = lines_[st];
    if (ls.empty()) {
        std::fill(row, row + n, 0.0);
        return;
    }
    if (law.table != nullptr) {
        // g_of(st, w) is the min of affine maps of w and the log CDF is increasing: the row is
        // the min of the affine rows
        law.table->fill_affine(g_ref_ + (w0 - ls[0].second) * ls[0].first, hw * ls[0].first, n,
                               row);
        thread_local std::vector<double> other;
        grow(other, static_cast<size_t>(n));
        for (size_t k = 1; k < ls.size(); ++k) {
            law.table->fill_affine(g_ref_ + (w0 - ls[k].second) * ls[k].first, hw * ls[k].first, n,
                                   other.data());
            for (int j = 0; j < n; ++j) row[j] = std::min(row[j], other[j]);
        }
        return;
    }
    for (int j = 0; j < n; ++j) row[j] = law.log_cdf(g_of(st, w0 + hw * j));
}

void Analytic::w_masses_prepare(int kw, double hw) const {
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
            if (st == smax_) continue;
            double* row = base_ystage_.data() + static_cast<size_t>(st) * ky_;
            stage_row_at(*base.stage_law[st], st, y0, ky_, hw, row);
            for (int k = 0; k < ky_; ++k) base_ytotal_[k] += row[k];
        }
        if (!other_patterns_.empty()) {
            for (int k = 0; k < ky_; ++k) base_ytotal_[k] += other_pgf_log(y0 + hw * k);
        }
    }
}

bool Analytic::conditional(const ReplicaType& t) const { return beta_ > 0 && t.pgf == nullptr; }

const std::vector<double>& Analytic::w_masses(const ReplicaType& t, int kw, double hw) const {
    w_masses_prepare(kw, hw);
    auto it = mass_.find(&t);
    if (it != mass_.end()) return it->second;
    std::vector<double>& pj = mass_[&t];
    pj.resize(kw);
    if (conditional(t)) {
        thread_local std::vector<double> ysf;
        y_sf(t, kw, hw, ysf);
        cond_masses(t.stage_law[smax_], ysf.data(), 1.0, kw, hw, pj);
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
        if (!other_patterns_.empty()) {
            for (int j = 0; j <= kw; ++j) base_total_[j] += other_pgf_log(w_lo_ + hw * j);
        }
    }
    thread_local std::vector<double> total_row, stage;
    total_row.assign(base_total_.begin(), base_total_.end());
    grow(stage, kw + 1);
    for (int st = 0; st < m_.stages; ++st) {
        if (t.stage_law[st] == base_type_->stage_law[st] || lines_[st].empty()) continue;
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

void Analytic::y_sf(const ReplicaType& t, int kw, double hw, std::vector<double>& ysf) const {
    w_masses_prepare(kw, hw);
    // the sf of the max of the stages other than smax on the y lattice
    const double y0 = w_lo_ - 0.5 * hw + hw * ky0_;
    thread_local std::vector<double> total_row, stage;
    total_row.assign(base_ytotal_.begin(), base_ytotal_.end());
    grow(stage, static_cast<size_t>(ky_));
    bool differs = false;
    for (int st = 0; st < m_.stages; ++st) {
        // a stage without lines never bounds W: its row is 0 under every law
        if (st == smax_ || t.stage_law[st] == base_type_->stage_law[st] || lines_[st].empty()) {
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

void Analytic::cond_masses(const GroupLaw* ulaw, const double* ysf, double weight, int kw,
                           double hw, std::vector<double>& pj) const {
    // Z = max(phi_smax(U), Y + beta U), U = g_smax - g_ref, Y the max of the other stages'
    // terms (independent of U): sf_Z(z) = P(U > u*(z)) + E[1(U <= u*(z)) sf_Y(z - beta U)],
    // u*(z) = g_of(smax, z) - g_ref, over U cells (sf_Y at the cell centres; the cell holding
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
            ulog[i] = std::min(0.0, ulaw->log_cdf(g_ref_ + ub + du * i));
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
            const double us = g_of(smax_, w_lo_ + hw * j) - g_ref_;
            const double lc = std::min(0.0, ulaw->log_cdf(g_ref_ + us));
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

Analytic::MixtureMasses Analytic::mixture_masses(
    const std::vector<std::pair<double, const ReplicaType*>>& mix) const {
    MixtureMasses mm;
    for (const auto& [w, t] : mix) mm.total_weight += w;
    if (!w_random_) return mm;
    // W cells on the x grid's spacing (hw = h), so that every (x_i - x_j) is a whole number of
    // steps plus one fixed offset: the Gaussian kernel is tabulated once per call. Atoms at the
    // cell midpoints, smoothed by the cell width.
    const double hw = x_.h;
    const int kw = std::clamp(static_cast<int>(std::ceil((w_hi_ - w_lo_) / hw)), 1, 4 * x_.n);
    mm.kw = kw;
    // the sf is linear in the masses: types with the same extra mean (offset) are summed first
    std::vector<std::uint8_t> done(mix.size(), 0);
    std::vector<double> summed;
    auto& groups = mm.groups;
    for (size_t first = 0; first < mix.size(); ++first) {
        if (done[first]) continue;
        const double extra = mix[first].second->extra_mean;
        if (mix.size() > 1 && conditional(*mix[first].second)) {
            // linear in sf_Y too: types with the same offset and smax law share one
            // conditional sum
            const GroupLaw* ulaw = mix[first].second->stage_law[smax_];
            thread_local std::vector<double> ysum, ysf;
            ysum.clear();
            double wsum = 0;
            for (size_t k = first; k < mix.size(); ++k) {
                const ReplicaType& t = *mix[k].second;
                if (done[k] || !conditional(t) || t.extra_mean != extra ||
                    t.stage_law[smax_] != ulaw) {
                    continue;
                }
                done[k] = 1;
                y_sf(t, kw, hw, ysf);
                if (ysum.empty()) ysum.assign(ysf.size(), 0.0);
                for (size_t y = 0; y < ysf.size(); ++y) ysum[y] += mix[k].first * ysf[y];
                wsum += mix[k].first;
            }
            cond_masses(ulaw, ysum.data(), wsum, kw, hw, summed);
            groups.push_back({extra, summed});
            continue;
        }
        const std::vector<double>* pjp = &w_masses(*mix[first].second, kw, hw);
        if (mix.size() > 1 || mix[first].first != 1.0) {
            summed.assign(kw, 0.0);
            for (size_t k = first; k < mix.size(); ++k) {
                if (done[k] || mix[k].second->extra_mean != extra) continue;
                done[k] = 1;
                const auto& pk = w_masses(*mix[k].second, kw, hw);
                for (int j = 0; j < kw; ++j) summed[j] += mix[k].first * pk[j];
            }
            pjp = &summed;
        }
        groups.push_back({extra, *pjp});
    }
    return mm;
}

std::vector<double> Analytic::mixture_sf(const MixtureMasses& mm, double noise_sd) const {
    const double total_weight = mm.total_weight;
    std::vector<double> sf(x_.n, 0.0);
    if (!w_random_) {
        const double mu = mu_o_;
        for (int i = 0; i < x_.n; ++i) {
            const double x = x_.at(i);
            if (m_.single.present) {
                const auto& s = m_.single;
                const auto& X = m_.transient[s.cls];
                const double scale = s.base_s * (s.comm ? r_bar_ : 1.0);
                const double y = X.max_moments(s.n).mean + x / scale;
                sf[i] = total_weight * (1.0 - X.max_cdf(y, s.n));
            } else {
                sf[i] = total_weight *
                        (noise_sd > 0 ? normal_sf((x - mu) / noise_sd) : (x < mu ? 1.0 : 0.0));
            }
        }
        return sf;
    }
    const int kw = mm.kw;
    const double hw = x_.h;
    const auto& groups = mm.groups;
    if (groups.size() == 1) {
        convolve_add(groups[0].second, kw, groups[0].first, noise_sd, sf);
    } else {
        // One Gaussian convolution for all: each group's masses move by its offset / hw cells,
        // split linearly between the two nearest (the mean kept, a variance of at most hw^2 / 4
        // added, against the hw^2 / 12 of a cell's own smoothing)
        double lo = 0, hi = 0;
        for (const auto& g : groups) {
            lo = std::min(lo, std::floor(g.first / hw));
            hi = std::max(hi, std::floor(g.first / hw) + 1);
        }
        const int shift0 = static_cast<int>(lo);
        const int kc = kw + static_cast<int>(hi - lo);
        std::vector<double> all(kc, 0.0);
        for (const auto& [extra, pj] : groups) {
            const double cells = extra / hw;
            const double base = std::floor(cells);
            const double f = cells - base;
            const int at = static_cast<int>(base) - shift0;
            for (int j = 0; j < kw; ++j) {
                all[j + at] += (1.0 - f) * pj[j];
                all[j + at + 1] += f * pj[j];
            }
        }
        convolve_add(all, kc, shift0 * hw, noise_sd, sf);
    }
    for (double& x : sf) x = std::min(1.0, x);
    return sf;
}

void Analytic::convolve_add(const std::vector<double>& pj, int kw, double extra_mean,
                            double noise_sd, std::vector<double>& sf) const {
    const double hx = x_.h;
    const double hw = hx;
    const double x0 = w_lo_ + 0.5 * hw + mu_o_ + extra_mean;  // atom j: x0 + j hx
    const double sd = std::sqrt(noise_sd * noise_sd + hx * hx / 12.0);
    // x_i - x_j = (x_.lo - x0) + (i - j) hx; kernel over k = i - j in [-(kw-1), n-1]
    const double off = x_.lo - x0;
    // atoms more than 7.5 sd away count as fully above / below: Phi(-7.5) = 3e-14 of their mass,
    // i.e. < d * 3e-14 on F^d (3e-11 at d = 1024 replicas), far below any reported quantile
    const int reach = static_cast<int>(std::ceil(7.5 * sd / hx)) + 1;
    std::vector<double> above(kw + 1, 0.0);
    for (int j = kw - 1; j >= 0; --j) above[j] = above[j + 1] + pj[j];
    const int kmin = -(kw - 1);
    const int kshift = static_cast<int>(std::floor(off / hx));
    const int klen = x_.n + kw - 1;
    // kernel reversed so that the inner product runs forward in both arrays (vectorizes):
    // kernel[k - kmin] = rev[klen - 1 - (k - kmin)]; types with the same offset share it
    if (!(off == kern_off_ && sd == kern_sd_ && klen == kern_len_ && reach == kern_reach_)) {
        kern_off_ = off;
        kern_sd_ = sd;
        kern_len_ = klen;
        kern_reach_ = reach;
        kern_rev_.assign(static_cast<size_t>(klen), 0.0);
        const int k_lo = std::max(kmin, static_cast<int>(std::floor(-off / hx)) - reach - 2);
        const int k_hi = std::min(x_.n - 1, static_cast<int>(std::ceil(-off / hx)) + reach + 2);
        for (int k = k_lo; k <= k_hi; ++k) {
            const double dx = off + k * hx;
            if (std::fabs(dx) > (reach + 1) * hx) continue;
            kern_rev_[klen - 1 - (k - kmin)] = normal_sf(dx / sd);
        }
    }
    const std::vector<double>& rev = kern_rev_;
    // The support of the masses, less a total of 1e-17 at either end (the common W range is
    // wide for one type): such atoms still count through `above` when a whole reach away, and
    // near them the sf is off by at most 1e-17 (a relative 1e-17 d on F^d).
    constexpr double kTrim = 1e-17;
    int jfirst = 0, jlast = kw;
    while (jfirst < kw && above[0] - above[jfirst + 1] <= kTrim) ++jfirst;
    while (jlast > jfirst && above[jlast - 1] <= kTrim) --jlast;
    thread_local std::vector<int> band_lo, band_hi, band_off;
    thread_local std::vector<double> base;
    grow(band_lo, x_.n);
    grow(band_hi, x_.n);
    grow(band_off, x_.n);
    grow(base, x_.n);
    for (int i = 0; i < x_.n; ++i) {
        // atoms with x_i - x_j > reach steps contribute 0, with x_i - x_j < -reach contribute 1
        const int centre = i + kshift;  // j with x_j ~ x_i
        band_lo[i] = std::clamp(centre - reach - 1, jfirst, std::max(jfirst, jlast));
        band_hi[i] = std::clamp(centre + reach + 2, band_lo[i], std::max(band_lo[i], jlast));
        base[i] = sf[i] + above[std::clamp(centre + reach + 2, 0, kw)];
        // kernel[i - j - kmin] = rev[klen - 1 - (i - kmin) + j]
        band_off[i] = klen - 1 - (i - kmin);
    }
    banded_dot(x_.n, band_lo.data(), band_hi.data(), band_off.data(), pj.data(), rev.data(),
               base.data(), sf.data());
}

void Analytic::run(const EvaluationSpec& eval, int clusters, StepDistribution& out,
                   const std::vector<double>* query, std::vector<double>* cdf_out) {
    const int p = m_.stages;
    r_bar_ = m_.regime.mean();
    other_patterns_.clear();

    // group laws, stage curves, replica types and scenarios (analytic/)
    ssta::GroupLaws group_laws;
    ssta::group_laws(m_, l_, group_laws);
    const bool pgf_mode = group_laws.pgf_mode;
    const ssta::StageCurves curves = ssta::stage_curves(m_, group_laws.clean);
    r_bar_ = curves.r_bar;
    rest_ = curves.rest;
    lines_ = curves.lines;
    g_ref_ = curves.g_ref;
    smax_ = curves.smax;
    mu_o_ = curves.mu_o;
    var_o_ = curves.var_o;
    var_eps_ = curves.var_eps;
    w_random_ = curves.w_random;
    beta_ = curves.beta;
    op_comp_ = curves.op_comp;
    op_comm_ = curves.op_comm;
    const double g_ref = g_ref_;
    const int smax = smax_;
    const double noise_sd = curves.noise_sd();
    const ssta::ReplicaSet set(m_, l_, curves, group_laws);
    const auto& types = set.types;
    const auto& scenarios = set.scenarios;
    const auto& unit_pgf = set.unit_pgf;
    const auto& rep_patterns = set.rep_patterns;
    const auto& one_slow_at_stage = set.one_slow_at_stage;
    other_patterns_ = set.other_patterns;
    // W range over all types: from CDF_W = 1e-13 (base type) to sf_W = 1e-15 (slowest type)
    if (w_random_) {
        const double sfmax = std::max(1.0, m_.slow_probability > 0 ? m_.slow_factor : 1.0);
        const double sfmin = std::min(1.0, m_.slow_probability > 0 ? m_.slow_factor : 1.0);
        const double n_all = m_.group_gpus * (m_.lockstep ? m_.dp : 1);
        double lo = 1e300, hi = -1e300;
        const double glo = m_.spatial.max_quantile(1e-14, 1) * sfmin *
                           (m_.effective ? m_.effective->lower_ratio() : 1.0);
        const double ghi = m_.spatial.max_quantile(1 - 1e-15, n_all) * sfmax;
        for (int st = 0; st < p; ++st) {
            double tlo = -1e300, thi = -1e300;  // the term at glo and ghi
            for (const auto& [inv, b] : lines_[st]) {
                tlo = std::max(tlo, (glo - g_ref_) / inv + b);
                thi = std::max(thi, (ghi - g_ref_) / inv + b);
            }
            if (lines_[st].empty()) continue;
            lo = std::min(lo, tlo);
            hi = std::max(hi, thi);
        }
        if (!(hi > lo)) {
            lo = hi - 1e-9;
        }
        // tighten: bisection on the base type's CDF (lower) and all types' sf (upper)
        // Every type is stochastically at least the base type when slow units are slower
        // (slow_factor >= 1), so F_D <= F_base^d over d replicas: below the point where the
        // base type's W has CDF 1e-16^(1/d), F_D < 1e-16 and the grid need not go.
        const bool slower = !(m_.slow_probability > 0) || m_.slow_factor >= 1.0;
        const double log_cut =
            slower ? std::max(std::log(1e-13), std::log(1e-16) / m_.replicas) : std::log(1e-13);
        auto tighten_lo = [&](double a, double b) {
            for (int i = 0; i < 24; ++i) {
                const double mid = 0.5 * (a + b);
                (log_cdf_w(types[0], mid) < log_cut ? a : b) = mid;
            }
            return a;
        };
        // the largest sf over types; a type differs from the base type in a few stages only
        std::vector<std::vector<int>> differ(types.size());
        for (size_t t = 1; t < types.size(); ++t) {
            for (int st = 0; st < p; ++st) {
                if (types[t].stage_law[st] != types[0].stage_law[st]) differ[t].push_back(st);
            }
        }
        std::vector<double> base_terms(p);
        auto min_log_cdf = [&](double w) {
            double base = 0;
            for (int st = 0; st < p; ++st) {
                base_terms[st] = types[0].stage_law[st]->log_cdf(g_of(st, w));
                base += base_terms[st];
            }
            base += other_pgf_log(w);
            double s = 0;
            for (size_t t = 0; t < types.size(); ++t) {
                double total = base;
                for (const int st : differ[t]) {
                    total += types[t].stage_law[st]->log_cdf(g_of(st, w)) - base_terms[st];
                }
                if (types[t].pgf != nullptr) total += pgf_log_term(*types[t].pgf, w);
                s = std::min(s, total);
            }
            return s;  // the smallest log CDF over types
        };
        // sf > 1e-15 for some type <=> its log CDF < log(1 - 1e-15)
        const double log_sf_cut = std::log1p(-1e-15);
        auto tighten_hi = [&](double a, double b) {
            for (int i = 0; i < 24; ++i) {
                const double mid = 0.5 * (a + b);
                (min_log_cdf(mid) < log_sf_cut ? a : b) = mid;
            }
            return b;
        };
        w_lo_ = tighten_lo(lo, hi);
        w_hi_ = tighten_hi(w_lo_, hi);
        if (!(w_hi_ > w_lo_)) w_hi_ = w_lo_ + 1e-9 * std::max(1.0, std::fabs(w_lo_));
        // lockstep slow units through the PGF act on all stages at once: no conditional form
        if (types[0].pgf != nullptr) beta_ = 0;
        if (beta_ > 0) {
            // the range of smax's g - g_ref over the types' laws (CDF 1e-17 to sf 1e-17), and
            // W's range widened for Z = max(phi_smax(U), Y + beta U) (w_masses):
            // Z <= W + beta max(U, 0) and Z >= W + beta min(U, 0) there
            u_lo_ = 1e300;
            u_hi_ = -1e300;
            std::vector<const GroupLaw*> seen;
            for (const auto& t : types) {
                const GroupLaw* law = t.stage_law[smax];
                if (std::find(seen.begin(), seen.end(), law) != seen.end()) continue;
                seen.push_back(law);
                double a = law->table != nullptr ? law->table->lo : 0.5 * g_ref;
                double b = law->table != nullptr ? law->table->hi : 3.0 * g_ref;
                const double cut_lo = std::log(1e-17), cut_hi = std::log1p(-1e-17);
                double x0 = a, x1 = b;
                for (int i = 0; i < 60; ++i) {
                    const double mid = 0.5 * (x0 + x1);
                    (law->log_cdf(mid) < cut_lo ? x0 : x1) = mid;
                }
                u_lo_ = std::min(u_lo_, x0 - g_ref);
                x0 = a;
                x1 = b;
                for (int i = 0; i < 60; ++i) {
                    const double mid = 0.5 * (x0 + x1);
                    (law->log_cdf(mid) < cut_hi ? x0 : x1) = mid;
                }
                u_hi_ = std::max(u_hi_, x1 - g_ref);
            }
            w_lo_ += beta_ * std::min(u_lo_, 0.0);
            w_hi_ += beta_ * std::max(u_hi_, 0.0);
        }
    } else {
        w_lo_ = w_hi_ = 0.0;
    }
    // x grid for Delta
    {
        double lo = w_lo_ + mu_o_ - 9.0 * noise_sd;
        double hi = w_hi_ + mu_o_ + 9.0 * noise_sd;
        // with d replicas only F_Delta >= 1e-15^(1/d) matters for the max
        const double d = m_.replicas;
        const double p_lo = std::pow(1e-15, 1.0 / d);
        if (m_.single.present) {
            const auto& s = m_.single;
            const auto& X = m_.transient[s.cls];
            const double scale = s.base_s * (s.comm ? r_bar_ : 1.0);
            const double mean = X.max_moments(s.n).mean;
            lo = scale * (X.max_quantile(p_lo, s.n) - mean);
            hi = scale * (X.quantile_upper(1e-16 / (d * s.n)) - mean);
        } else if (!w_random_ && noise_sd > 0) {
            lo = mu_o_ + noise_sd * normal_quantile(p_lo);
            hi = mu_o_ - noise_sd * normal_quantile(1e-16 / d);
        }
        if (!(hi > lo)) {
            lo -= 1e-12;
            hi += 1e-12;
        }
        x_.n = grid_points_;
        x_.lo = lo;
        x_.hi = hi;
        x_.h = (hi - lo) / (x_.n - 1);
    }
    base_type_ = &types[0];
    // When a slow unit touches one replica (or, with random placement, one GPU joins one
    // stage), the PGF's A is linear in the types' CDFs: A = sum_t f_t F_t / F_h = (1 - sf_mix) /
    // F_h with sf_mix the sf of the mixture of types, one convolution instead of one per type.
    const bool linear_pgf =
        pgf_mode && !m_.lockstep &&
        (unit_pgf.random || std::all_of(rep_patterns.begin(), rep_patterns.end(),
                                        [](const auto& pat) { return pat.second.size() == 1; }));
    std::vector<std::vector<double>> sf_type(types.size());
    std::vector<std::vector<double>> sf_type_pers(types.size());
    std::vector<double> sf_mix, sf_mix_pers, sf_mix_w, sf_mix_w_pers;
    if (linear_pgf) {
        std::vector<std::pair<double, const ReplicaType*>> mix;
        if (unit_pgf.random) {
            for (const int t : one_slow_at_stage) mix.push_back({1.0 / p, &types[t]});
        } else {
            for (const auto& [f, idx] : rep_patterns) mix.push_back({f, &types[idx[0]]});
        }
        const MixtureMasses mm = mixture_masses(mix);
        sf_mix = mixture_sf(mm, noise_sd);
        if (clusters > 1) sf_mix_pers = mixture_sf(mm, 0.0);
        if (unit_pgf.random) {
            // the same mixture without the types' offsets: the stage terms of one slow GPU
            // alone (random_replicas below)
            MixtureMasses w_only = mm;
            for (auto& g : w_only.groups) g.first = 0.0;
            sf_mix_w = mixture_sf(w_only, noise_sd);
            if (clusters > 1) sf_mix_w_pers = mixture_sf(w_only, 0.0);
        }
    }
    // each type's sf with and without the noise, from its masses once (in PGF mode the
    // scenario counts name the base type only)
    for (size_t t = 0; t < (linear_pgf ? 1 : types.size()); ++t) {
        const MixtureMasses mt = mixture_masses({{1.0, &types[t]}});
        sf_type[t] = mixture_sf(mt, noise_sd);
        if (clusters > 1) sf_type_pers[t] = mixture_sf(mt, 0.0);
    }
    // Slow units that each touch one replica, the same number u in every replica: replicas
    // are independent, each with K ~ Binomial(u, q) slow units. A replica with K >= 2 takes the
    // one-unit mixture shifted by the mean linear effect of the K - 1 others (additive when the
    // slow stages stay off the critical path's dwell, as with fewer microbatches than stages);
    // the PGF's product of CDF ratios would take their maximum instead.
    const double units_per_replica =
        linear_pgf && !unit_pgf.random ? unit_pgf.units / m_.replicas : 0.0;
    const bool per_replica = linear_pgf && !unit_pgf.random && units_per_replica >= 1 &&
                             units_per_replica == std::floor(units_per_replica);
    std::vector<double> binom_k;
    double lin_shift_mix = 0;
    if (per_replica) {
        double fsum = 0;
        for (const auto& [f, idx] : rep_patterns) {
            lin_shift_mix += f * types[idx[0]].extra_mean;
            fsum += f;
        }
        if (fsum > 0) lin_shift_mix /= fsum;
        const double u = units_per_replica, q = unit_pgf.q;
        double tail = 1.0;
        for (int k = 0; k <= u; ++k) {
            const double pk = binomial_pmf(u, k, q);
            binom_k.push_back(pk);
            tail -= pk;
            if (tail * m_.replicas < 1e-8) break;  // F_D off by less than 1e-8
        }
    }
    // Random placement: the N slow GPUs of the job land in uniformly random groups, so a
    // replica may hold K >= 2 of them (from one slow node spread over its stages, or from
    // several nodes). As above, their linear effects add up while their stage terms combine
    // as a max: a replica with K slow GPUs takes F_K(x) = F_h(y) R(y)^K at y = x - s D(K),
    // R = F_w / F_h the ratio of one slow GPU's stage terms alone (the mixture without the
    // types' offsets) to the healthy replica, s the mean offset of one slow GPU and D(K) =
    // p (1 - (1 - 1/p)^K) the expected number of distinct stages K GPUs hit (two in one group
    // slow it once). K = 1 is the mixture itself. The product over replicas given N is the
    // PGF's F_h^d r^N (r = F_1 / F_h, exact in N) times the corrections c_K = F_K / (F_h r^K)
    // of the replicas with K >= 2, taken as (E c_K)^d with K ~ Binomial(N, 1/d) (exact for
    // d = 1 and when collisions are rare). N = the slow GPUs in the job: J ~ Binomial(units,
    // q) slow units, each with Binomial(u, phi) of its GPUs in the job.
    const bool random_replicas = linear_pgf && unit_pgf.random;
    std::vector<double> p_n;                  // P(N = n)
    std::vector<std::vector<double>> k_of_n;  // per node count, P(K = k | N), k < size
    size_t n_lo = 0, n_step = 1;              // node j: N = n_lo + j n_step
    std::vector<double> shift_k;              // s D(k)
    int k_cap = 1;
    if (random_replicas) {
        double s_mean = 0;
        for (const int t : one_slow_at_stage) s_mean += types[t].extra_mean / p;
        const auto u = static_cast<int>(unit_pgf.unit_gpus);
        std::vector<double> per_unit(u + 1);
        for (int j = 0; j <= u; ++j) per_unit[j] = binomial_pmf(u, j, unit_pgf.phi);
        std::vector<double> conv{1.0}, next;  // law of N given J, J = 0, 1, ...
        double cum = 0;
        for (int j = 0; j <= unit_pgf.units && cum < 1.0 - 1e-16; ++j) {
            const double pj = binomial_pmf(unit_pgf.units, j, unit_pgf.q);
            cum += pj;
            if (p_n.size() < conv.size()) p_n.resize(conv.size(), 0.0);
            for (size_t n = 0; n < conv.size(); ++n) p_n[n] += pj * conv[n];
            next.assign(conv.size() + u, 0.0);
            for (size_t n = 0; n < conv.size(); ++n) {
                if (conv[n] < 1e-300) continue;
                for (int a = 0; a <= u; ++a) next[n + a] += conv[n] * per_unit[a];
            }
            conv.swap(next);
        }
        while (p_n.size() > 1 && p_n.back() < 1e-17) p_n.pop_back();
        // The correction's exponent L(n) = d log E[c_K | N = n] is smooth in n: it is computed
        // at node counts (every count when there are few, else kRandomNodes evenly spaced
        // ones over the counts of probability >= 1e-17) and interpolated between them by cubic
        // Lagrange polynomials. Per node, P(K = k | N = n) for k < kMaxK (the rest lumped at
        // kMaxK), by the recurrence of the binomial pmf in log space (no log-gamma per term).
        constexpr size_t kRandomNodes = 32;
        while (n_lo + 1 < p_n.size() && !(p_n[n_lo] >= 1e-17)) ++n_lo;
        const size_t span = p_n.size() - 1 - n_lo;
        n_step = std::max<size_t>(1, (span + kRandomNodes - 1) / kRandomNodes);
        const size_t nodes = span / n_step + 1 + (n_step > 1 ? 3 : 0);  // cubic: past the end
        const double d = m_.replicas;
        constexpr int kMaxK = 256;  // a replica's K beyond it counts as kMaxK
        k_of_n.resize(nodes);
        const double lq = std::log(1.0 / d), l1q = d > 1 ? std::log1p(-1.0 / d) : -HUGE_VAL;
        for (size_t j = 0; j < nodes; ++j) {
            const double n = static_cast<double>(n_lo + j * n_step);
            auto& row = k_of_n[j];
            double left = 1.0;
            if (d == 1) {
                row.assign(static_cast<size_t>(std::min<double>(n, kMaxK)) + 1, 0.0);
                row.back() = 1.0;  // K = N (capped)
                left = 0;
            } else {
                double lp = n * l1q;  // log P(K = 0)
                for (int k = 0; k <= n && k < kMaxK && left > 1e-15; ++k) {
                    if (k > 0) lp += std::log((n - k + 1) / k) + lq - l1q;
                    const double pk = std::exp(lp);
                    row.push_back(pk);
                    left -= pk;
                }
            }
            if (left > 1e-15) row.push_back(left);
            k_cap = std::max(k_cap, static_cast<int>(row.size()) - 1);
        }
        for (int k = 0; k <= k_cap; ++k) {
            shift_k.push_back(s_mean * p * (1.0 - std::pow(1.0 - 1.0 / p, k)));
        }
    }
    auto max_table = [&](const std::vector<std::vector<double>>& sft,
                         const std::vector<double>& sfm, const std::vector<double>& sfw) {
        std::vector<double> F(x_.n, 0.0);
        // log F_t once per type used, then per scenario a sum and one (vectorized) exp
        std::vector<std::vector<double>> log_f(sft.size());
        for (const auto& sc : scenarios) {
            for (const auto& [t, c] : sc.counts) {
                if (!log_f[t].empty()) continue;
                log_f[t].resize(x_.n);
                for (int i = 0; i < x_.n; ++i) {
                    const double s = sft[t][i];
                    log_f[t][i] = s < 0.5 ? std::log1p(-s) : std::log(std::max(1e-300, 1.0 - s));
                }
            }
        }
        std::vector<double> lf(x_.n), ef(x_.n);
        for (const auto& sc : scenarios) {
            std::fill(lf.begin(), lf.end(), 0.0);
            for (const auto& [t, c] : sc.counts) {
                for (int i = 0; i < x_.n; ++i) lf[i] += c * log_f[t][i];
            }
            exp_nonpositive_n(lf.data(), x_.n, ef.data());
            for (int i = 0; i < x_.n; ++i) F[i] += sc.weight * ef[i];
        }
        const int n = x_.n;
        // linear interpolation of src at i - off (0 below the grid's start, its last value
        // above its end); the middle run, where both neighbours are on the grid, as one
        // plain loop
        auto shifted = [&](const std::vector<double>& src, double off, std::vector<double>& dst) {
            const double base = std::floor(off);
            const double fr = off - base;
            const int k0 = static_cast<int>(base);
            auto at = [&](int j) { return j < 0 ? 0.0 : src[std::min(j, n - 1)]; };
            // src at j - fr, j = i - k0: between src[j - 1] and src[j], both on the grid
            // for i in [a, b)
            const int a = std::clamp(k0 + 1, 0, n);
            const int b = std::clamp(n + k0, a, n);
            for (int i = 0; i < a; ++i) {
                dst[i] = (1.0 - fr) * at(i - k0) + fr * at(i - k0 - 1);
            }
            for (int i = a; i < b; ++i) {
                dst[i] = (1.0 - fr) * src[i - k0] + fr * src[i - k0 - 1];
            }
            for (int i = b; i < n; ++i) {
                dst[i] = (1.0 - fr) * at(i - k0) + fr * at(i - k0 - 1);
            }
        };
        // Per replica (per_replica): K ~ Binomial(u, q) of its units slow. A unit moves the
        // replica's linear part by s (lin_shift_mix: additive) and its stage terms as the
        // one-unit mixture does (their max: the PGF's ratio R): F_K(x) = F_h(y) R(y)^K at
        // y = x - K s, R(y) = F_1(y + s) / F_h(y); rep_sum = sum_k P(K = k) F_K / F_h. K = 1 is
        // the mixture itself at the grid point (no interpolation: F_D takes the d-th power).
        std::vector<double> rep_sum;
        if (per_replica) {
            std::vector<double> fh(n), f1(n);
            for (int i = 0; i < n; ++i) {
                fh[i] = std::max(0.0, 1.0 - sft[0][i]);
                f1[i] = std::max(0.0, 1.0 - sfm[i]);
            }
            rep_sum.assign(n, binom_k[0]);
            if (binom_k.size() > 1) {
                for (int i = 0; i < n; ++i) {
                    if (fh[i] > 1e-300) rep_sum[i] += binom_k[1] * f1[i] / fh[i];
                }
            }
            const double sc = lin_shift_mix / x_.h;  // s in grid steps
            std::vector<double> fhy(n), f1y(n);
            for (size_t k = 2; k < binom_k.size(); ++k) {
                shifted(fh, k * sc, fhy);
                shifted(f1, (k - 1.0) * sc, f1y);
                const double bk = binom_k[k];
                for (int i = 0; i < n; ++i) {
                    // without a branch (the loop vectorizes); where F_h or F_h(y) is 0 no term
                    const bool ok = fh[i] > 1e-300 && fhy[i] > 1e-300;
                    const double fy = ok ? fhy[i] : 1.0;
                    const double r = std::min(1.0, f1y[i] / fy);
                    double rk = r;  // r^k by products (k is small)
                    for (size_t e = 1; e < k; ++e) rk *= r;
                    const double term = bk * fy * rk / (ok ? fh[i] : 1.0);
                    rep_sum[i] += ok ? term : 0.0;
                }
            }
        }
        // random placement (random_replicas): sum over N of P(N) r^N (E c_K)^d per grid point
        std::vector<double> rand_factor;
        if (random_replicas) {
            std::vector<double> fh(n), lfh(n), lr(n), fw(n);
            for (int i = 0; i < n; ++i) {
                fh[i] = std::max(0.0, 1.0 - sft[0][i]);
                const double f1 = std::max(0.0, 1.0 - sfm[i]);
                fw[i] = std::max(0.0, 1.0 - sfw[i]);
                lfh[i] = fh[i] > 1e-300 ? std::log(fh[i]) : -HUGE_VAL;
                lr[i] = fh[i] > 1e-300 && f1 > 1e-300 ? std::log(f1) - lfh[i] : -HUGE_VAL;
            }
            // c_k on the grid, k = 2 .. k_cap (1 where F_h or F_1 is 0: no replica is below x
            // then, or none with a slow GPU): c_k = F_h(y) / F_h (R(y) / r)^k, capped at 1
            std::vector<double> rlin(n);
            for (int i = 0; i < n; ++i) rlin[i] = lr[i] > -HUGE_VAL ? std::exp(lr[i]) : 0.0;
            std::vector<std::vector<double>> ck(static_cast<size_t>(k_cap) + 1);
            std::vector<double> fhy(n), fwy(n);
            for (int k = 2; k <= k_cap; ++k) {
                shifted(fh, shift_k[k] / x_.h, fhy);
                shifted(fw, shift_k[k] / x_.h, fwy);
                auto& c = ck[k];
                c.assign(n, 1.0);
                for (int i = 0; i < n; ++i) {
                    if (!(lfh[i] > -HUGE_VAL) || !(lr[i] > -HUGE_VAL)) continue;
                    if (!(fhy[i] > 1e-300) || !(fwy[i] > 1e-300)) {
                        c[i] = 0.0;  // F_K(x) = 0
                        continue;
                    }
                    const double rho = fwy[i] / (fhy[i] * rlin[i]);
                    double rk = rho;  // rho^k by products (k is at most a few dozen)
                    for (int e = 1; e < k; ++e) rk *= rho;
                    c[i] = std::min(1.0, fhy[i] / fh[i] * rk);
                }
            }
            // L at the nodes, then per count with P(N) >= 1e-17 (F_D off by less than the
            // rest) the term P(N) exp(N log r + L(N)), in log space
            const double d = m_.replicas;
            std::vector<std::vector<double>> lnode(k_of_n.size(), std::vector<double>(n));
            for (size_t j = 0; j < k_of_n.size(); ++j) {
                const auto& row = k_of_n[j];
                const double c01 = row[0] + (row.size() > 1 ? row[1] : 0.0);
                for (int i = 0; i < n; ++i) {
                    double e = c01;
                    for (size_t k = 2; k < row.size(); ++k) e += row[k] * ck[k][i];
                    lnode[j][i] = d * std::log(std::max(e, 1e-300));
                }
            }
            rand_factor.assign(n, 0.0);
            std::vector<double> xs(n), es(n);
            for (size_t nn = n_lo; nn < p_n.size(); ++nn) {
                if (!(p_n[nn] >= 1e-17)) continue;
                // at a node its value (one tap), else cubic Lagrange through the nodes
                // j0 .. j0 + 3 around nn
                const size_t rel = nn - n_lo;
                double w[4] = {1.0, 0.0, 0.0, 0.0};
                size_t j0 = rel / n_step;
                int taps = 1;
                if (rel % n_step != 0) {
                    taps = 4;
                    j0 = j0 > 0 ? j0 - 1 : 0;
                    const double t = static_cast<double>(rel) / static_cast<double>(n_step) -
                                     static_cast<double>(j0);  // in (0, 3)
                    for (int a = 0; a < 4; ++a) {
                        w[a] = 1.0;
                        for (int b = 0; b < 4; ++b) {
                            if (b != a) w[a] *= (t - b) / (a - b);
                        }
                    }
                }
                const double lp = std::log(p_n[nn]);
                const double fn = static_cast<double>(nn);
                for (int i = 0; i < n; ++i) {
                    double l = 0;
                    for (int a = 0; a < taps; ++a) l += w[a] * lnode[j0 + a][i];
                    // N log r: 0 at N = 0; a count of slow GPUs where F_1 = 0 adds nothing
                    const double lt = nn == 0 ? 0.0 : fn * lr[i];
                    xs[i] = lt > -HUGE_VAL ? lp + lt + std::min(0.0, l) : -HUGE_VAL;
                }
                exp_nonpositive_n(xs.data(), n, es.data());
                for (int i = 0; i < n; ++i) {
                    rand_factor[i] += xs[i] > 0 ? std::exp(xs[i]) : es[i];  // (> 0: rounding)
                }
            }
        }
        if (pgf_mode && !m_.lockstep) {
            // F_D = F_h^d (1 - q + q A)^units, A = E over a slow unit's pattern of the product
            // of its replicas' CDF ratios to the healthy replica
            // the CDF ratios F_t / F_h directly (one division, no log / exp per type and point)
            std::vector<double> ratio(sft.size(), 1.0);
            for (int i = 0; i < x_.n; ++i) {
                const double fh = std::max(1e-300, 1.0 - sft[0][i]);
                if (fh < 1e-304) {  // log F_h < -700
                    F[i] = 0;
                    continue;
                }
                if (per_replica) {
                    F[i] *= std::exp(m_.replicas * std::log(std::max(1e-300, rep_sum[i])));
                    continue;
                }
                if (random_replicas) {
                    F[i] *= rand_factor[i];
                    continue;
                }
                // (random placement is linear and takes random_replicas above)
                double a = 0;
                if (linear_pgf) {
                    a = std::max(1e-300, 1.0 - sfm[i]) / fh;
                } else {
                    for (size_t t = 1; t < sft.size(); ++t) {
                        ratio[t] = std::max(1e-300, 1.0 - sft[t][i]) / fh;
                    }
                    for (const auto& [f, idx] : rep_patterns) {
                        double prod = 1;
                        for (const int t : idx) prod *= ratio[t];
                        a += f * prod;
                    }
                }
                F[i] *= std::exp(unit_pgf.units *
                                 std::log(std::max(1e-300, 1.0 - unit_pgf.q + unit_pgf.q * a)));
            }
        }
        F.back() = std::max(F.back(), 1.0 - 1e-15);
        return F;
    };
    const std::vector<double> FD = max_table(sf_type, sf_mix, sf_mix_w);
    // the moments of F_D
    auto table_moments = [&](const std::vector<double>& F, double& mean, double& var) {
        double m1 = 0, m2 = 0;
        for (int i = 1; i < x_.n; ++i) {
            const double a = 1.0 - F[i - 1], b = 1.0 - F[i];
            const double xa = x_.h * (i - 1), xb = x_.h * i;
            m1 += 0.5 * x_.h * (a + b);
            m2 += x_.h * (xa * a + xb * b);
        }
        mean = x_.lo + m1;
        var = std::max(0.0, m2 - m1 * m1);
    };
    double d_mean, d_var;
    table_moments(FD, d_mean, d_var);
    // regime cells (in normal-score space) and tail nodes per cell
    struct Cell {
        double w, shift_a, shift_b;
        double shift_mean;  ///< E[shift | cell] (the shift is affine in R inside a cell)
        /// the cell is two uniform halves of [shift_a, shift_b]; the lower one's share of the
        /// weight, chosen to keep shift_mean (lattice, CDF and moments all use it)
        double lo_share = 0.5;
        std::span<const std::pair<double, double>> tail;  // (value, weight), in node_store
        double tail_var = 0;  ///< variance of a normal part collapsed onto its mean
        size_t first = 0, count = 0;
    };
    thread_local std::vector<std::pair<double, double>> node_store;
    node_store.clear();
    // A normal part of the tail with sd sigma small against the x grid step or against the sd S
    // of D is collapsed onto its mean (one node instead of 8): the CDF moves by about
    // sigma^2 / 2 |f'| <= 0.12 (sigma / S)^2 for a unimodal D (< 5e-5 at sigma = 0.02 S), or
    // by a fraction of one grid step's mass; its variance still enters the moments (tail_var).
    const double collapse_sd = std::max(0.05 * x_.h, 0.02 * std::sqrt(d_var));
    double tail_var = 0;
    std::vector<Cell> cells;
    // appends the nodes for regime value r to node_store; returns how many
    auto tail_nodes = [&](double r) -> size_t {
        const size_t first = node_store.size();
        auto& nodes = node_store;
        tail_var = 0;
        auto node_count = [&](double sd) {
            if (!(sd > 0)) return 1;
            if (sd < collapse_sd) {
                tail_var += sd * sd;
                return 1;
            }
            return 8;
        };
        const double sm = m_.sync.mean(1.0, r), ssd = std::sqrt(m_.sync.var(1.0, r));
        const double om = m_.optimizer.mean(1.0, r), osd = std::sqrt(m_.optimizer.var(1.0, r));
        if (sm - m_.sync_overlap_s > 6.0 * ssd && om > 6.0 * osd) {
            // no rectification in reach: the sum of two normals is normal
            const double sd = std::sqrt(ssd * ssd + osd * osd);
            const int n = node_count(sd);
            for (int a = 0; a < n; ++a) {
                const double z = n > 1 ? kGhZ[a] : 0.0;
                nodes.push_back({sm - m_.sync_overlap_s + om + sd * z, n > 1 ? kGhW[a] : 1.0});
            }
            return nodes.size() - first;
        }
        if (sm - m_.sync_overlap_s < -6.0 * ssd && om > 6.0 * osd) {
            // the sync stays hidden
            const int n = node_count(osd);
            for (int a = 0; a < n; ++a) {
                nodes.push_back({om + osd * (n > 1 ? kGhZ[a] : 0.0), n > 1 ? kGhW[a] : 1.0});
            }
            return nodes.size() - first;
        }
        const int ns = ssd > 0 ? 8 : 1;
        const int no = om > 6.0 * osd ? node_count(osd) : (osd > 0 ? 8 : 1);
        for (int a = 0; a < ns; ++a) {
            for (int b = 0; b < no; ++b) {
                const double s = ns > 1 ? sm + ssd * kGhZ[a] : sm;
                const double o = no > 1 ? om + osd * kGhZ[b] : om;
                const double w = (ns > 1 ? kGhW[a] : 1.0) * (no > 1 ? kGhW[b] : 1.0);
                nodes.push_back({std::max(0.0, s - m_.sync_overlap_s) + std::max(0.0, o), w});
            }
        }
        return nodes.size() - first;
    };
    if (m_.regime.is_constant()) {
        const double r = m_.regime.mean();
        const double s = makespan_at(r);
        const size_t first = node_store.size();
        const size_t count = tail_nodes(r);
        cells.push_back({1.0, s, s, s, 0.5, {}, tail_var, first, count});
    } else {
        constexpr int kCells = 96;
        constexpr double kZ = 6.0;
        // normal scores of the cell edges and mid-points, and the cells' probabilities (the
        // outermost cells take the tails beyond +-kZ): the same for every point
        struct CellGrid {
            std::array<double, kCells + 1> z{};
            std::array<double, kCells> mid{}, w{};
            CellGrid() {
                for (int i = 0; i <= kCells; ++i) z[i] = -kZ + 2.0 * kZ * i / kCells;
                for (int i = 0; i < kCells; ++i) {
                    mid[i] = 0.5 * (z[i] + z[i + 1]);
                    w[i] = normal_cdf(z[i + 1]) - normal_cdf(z[i]);
                }
                w[0] += normal_cdf(-kZ);
                w[kCells - 1] += normal_cdf(-kZ);
            }
        };
        static const CellGrid grid;
        // the regime at the cell edges and mid-points and its mean in each cell: a function of
        // the regime law alone, which a sweep shares across points
        struct RegimeCells {
            std::array<double, kCells + 1> edge{};
            std::array<double, kCells> mid{}, mean{};
        };
        thread_local std::unordered_map<std::uint64_t, RegimeCells> regime_cache;
        if (regime_cache.size() > 64) regime_cache.clear();
        auto [slot, fresh] = regime_cache.try_emplace(m_.regime_id);
        RegimeCells& rc = slot->second;
        if (fresh) {
            for (int i = 0; i <= kCells; ++i) rc.edge[i] = m_.regime.quantile_of_score(grid.z[i]);
            for (int i = 0; i < kCells; ++i) {
                rc.mid[i] = m_.regime.quantile_of_score(grid.mid[i]);
                // the outer cells take the tails beyond +-kZ
                const double z1 = i == 0 ? -HUGE_VAL : grid.z[i];
                const double z2 = i == kCells - 1 ? HUGE_VAL : grid.z[i + 1];
                rc.mean[i] = m_.regime.partial_mean_of_scores(z1, z2) / grid.w[i];
            }
        }
        std::array<double, kCells + 1> shift{};
        const std::array<double, kCells + 1>& rs = rc.edge;
        // The mean-duration makespan is a longest path, a max of functions affine in R with
        // non-negative slopes: convex in R. A convex function that meets its chord at an
        // interior point is affine on the whole interval (and within 2 tol of it if within tol
        // of the chord there), so intervals are split only where the critical path changes:
        // a few DAG runs instead of one per cell edge.
        // the ends and the middle in one pass (the first split's three DAG runs)
        {
            const std::array<double, 3> r3{rs[0], rs[kCells / 2], rs[kCells]};
            std::array<double, 3> s3{};
            makespans_at(r3.data(), 3, s3.data());
            shift[0] = s3[0];
            shift[kCells / 2] = s3[1];
            shift[kCells] = s3[2];
        }
        auto fill = [&](auto&& self, int a, int b) -> void {
            if (b - a < 2) return;
            const int mid = (a + b) / 2;
            if (!(a == 0 && b == kCells)) shift[mid] = makespan_at(rs[mid]);
            const double f = (rs[mid] - rs[a]) / (rs[b] - rs[a]);
            const double chord = shift[a] + f * (shift[b] - shift[a]);
            if (std::fabs(shift[mid] - chord) <= 1e-12 * std::fabs(shift[mid]) && rs[b] > rs[a]) {
                for (int i = a + 1; i < b; ++i) {
                    if (i == mid) continue;
                    const double fi = (rs[i] - rs[a]) / (rs[b] - rs[a]);
                    shift[i] = shift[a] + fi * (shift[b] - shift[a]);
                }
                return;
            }
            self(self, a, mid);
            self(self, mid, b);
        };
        fill(fill, 0, kCells);
        cells.reserve(kCells);
        for (int i = 0; i < kCells; ++i) {
            const double rmid = rc.mid[i];
            const size_t first = node_store.size();
            const size_t count = tail_nodes(rmid);
            // the cell's mean of R mapped through the shift, affine in R inside the cell
            const double r_mean = rc.mean[i];
            double mean = 0.5 * (shift[i] + shift[i + 1]);
            if (rs[i + 1] > rs[i]) {
                mean =
                    shift[i] + (r_mean - rs[i]) / (rs[i + 1] - rs[i]) * (shift[i + 1] - shift[i]);
                mean = std::clamp(mean, std::min(shift[i], shift[i + 1]),
                                  std::max(shift[i], shift[i + 1]));
            }
            // the shift is non-decreasing in R: shift[i] <= shift[i + 1]
            const double half = 0.5 * (shift[i + 1] - shift[i]);
            const double hi_mean = 0.5 * (0.5 * (shift[i] + shift[i + 1]) + shift[i + 1]);
            const double lo_share = half > 0 ? std::clamp((hi_mean - mean) / half, 0.0, 1.0) : 0.5;
            cells.push_back(
                {grid.w[i], shift[i], shift[i + 1], mean, lo_share, {}, tail_var, first, count});
        }
    }
    for (auto& c : cells) c.tail = {node_store.data() + c.first, c.count};
    // The step's CDF on a lattice: V = shift(R) + tail(R) is put on a lattice of step hl as
    // point masses (a uniform cell smear cut at the lattice points, each piece's mass split
    // between its two lattice neighbours so that its mean is kept: for an atom this is exactly
    // linear interpolation of F_D), then F_step[i] = sum_k mass[k] F_D(i - k). hl is the x
    // grid's step h, or when V spreads over more than kMaxLattice such steps (D narrow against
    // the regime's spread, e.g. without persistent variability) the multiple r h that keeps it
    // within kMaxLattice, F_D read at every r-th grid point: the error is second order in hl
    // against the wider of D and V (hl is at most 1/4096 of V's range).
    constexpr int kMaxLattice = 4096;
    double v_lo = 1e300, v_hi = -1e300;
    for (const auto& c : cells) {
        for (const auto& [y, wy] : c.tail) {
            v_lo = std::min(v_lo, std::min(c.shift_a, c.shift_b) + y);
            v_hi = std::max(v_hi, std::max(c.shift_a, c.shift_b) + y);
        }
    }
    // stride: F_D read at every stride-th grid point; 0 when D fits in one lattice step, then a
    // uniform over one step around D's mean (e.g. D an atom: no persistent variability and one
    // replica's noise ~1e-12 wide)
    int stride = 1;
    double hl = x_.h;
    double d_lo = x_.lo;  // where F_D's lattice starts
    if (const double steps = (v_hi - v_lo) / x_.h; !(steps <= kMaxLattice)) {
        const double r = std::ceil(steps / kMaxLattice);
        if (r < x_.n - 1) {
            stride = static_cast<int>(r);
            hl = stride * x_.h;
        } else {
            stride = 0;
            hl = (v_hi - v_lo) / kMaxLattice;
            d_lo = d_mean - 0.5 * hl;
        }
    }
    const double span = (v_hi - v_lo) / hl;
    std::vector<double> step_cdf;  // at t_i = t0 + i hl
    double t0 = 0;
    {
        const int nv = static_cast<int>(std::ceil(span)) + 2;
        std::vector<double> mass(nv, 0.0);
        // in lattice units u = (t - v_lo) / hl, all pieces lie in [0, span], span <= nv - 2
        const double inv_hl = 1.0 / hl;
        auto add_atom = [&](double u, double w) {
            const int k = std::min(static_cast<int>(u), nv - 2);  // u >= 0: truncation = floor
            const double f = std::min(1.0, u - k);
            mass[k] += w * (1.0 - f);
            mass[k + 1] += w * f;
        };
        // a uniform smear of mass w over [ua, ub], cut at the lattice points; each piece's mass
        // at its centroid. A whole lattice interval [k, k + 1] puts half its mass on each end,
        // the same for every one of a smear's whole intervals: they go into a difference array
        // (summed once below), so that a smear costs O(1), not its length (a regime spread
        // over thousands of lattice steps)
        std::vector<double> halves(nv + 1, 0.0);
        auto add_smear = [&](double ua, double ub, double w) {
            if (!(w > 0)) return;
            if (!(ub - ua > 1e-9)) {
                add_atom(0.5 * (ua + ub), w);
                return;
            }
            const double dens = w / (ub - ua);
            auto piece = [&](int k, double lo, double hi) {
                const double m = dens * (hi - lo);
                const double f = std::clamp(0.5 * (lo + hi) - k, 0.0, 1.0);
                mass[k] += m * (1.0 - f);
                mass[k + 1] += m * f;
            };
            const int k0 = std::min(static_cast<int>(ua), nv - 2);
            const double e0 = std::min(ub, static_cast<double>(k0 + 1));
            piece(k0, ua, e0);
            if (!(ub > e0)) return;
            // whole intervals k1 <= k < k2, then the piece [k2, ub]
            const int k1 = k0 + 1;
            const int k2 = std::clamp(static_cast<int>(ub), k1, nv - 2);
            if (k2 > k1) {
                const double half = 0.5 * dens;
                halves[k1] += half;  // mass[k], k1 <= k < k2
                halves[k2] -= half;
                halves[k1 + 1] += half;  // mass[k + 1]
                halves[k2 + 1] -= half;
            }
            if (ub > k2) piece(k2, k2, ub);
        };
        for (const auto& c : cells) {
            const double a0 = std::min(c.shift_a, c.shift_b);
            const double b0 = std::max(c.shift_a, c.shift_b);
            // two uniform halves weighted to keep the cell's mean shift
            const double mid = 0.5 * (a0 + b0);
            const double frac_lo = c.lo_share;
            for (const auto& [y, wy] : c.tail) {
                const double w = c.w * wy;
                const double ua = std::max(0.0, (a0 + y - v_lo) * inv_hl);
                const double um = std::max(ua, (mid + y - v_lo) * inv_hl);
                const double ub = std::max(um, (b0 + y - v_lo) * inv_hl);
                add_smear(ua, um, w * frac_lo);
                add_smear(um, ub, w * (1.0 - frac_lo));
            }
        }
        double run = 0;
        for (int k = 0; k < nv; ++k) {
            run += halves[k];
            mass[k] = std::max(0.0, mass[k] + run);
        }
        // F_D on the lattice: every stride-th grid point, then 1 (F_D's last value is within
        // 1e-15 of 1)
        const int nx = stride > 0 ? (x_.n - 1 + stride - 1) / stride + 1 : 2;
        std::vector<double> fl(nx);  // F_D at d_lo + j hl
        for (int j = 0; j < nx; ++j) {
            const int g = j * stride;
            fl[j] = stride == 0 ? static_cast<double>(j) : g < x_.n ? FD[g] : 1.0;
        }
        const int nt = nx + nv - 1;
        t0 = d_lo + v_lo;
        std::vector<double> below(nv + 1, 0.0);  // below[k] = mass[0] + ... + mass[k - 1]
        for (int k = 0; k < nv; ++k) below[k + 1] = below[k] + mass[k];
        std::vector<double> rd(fl.rbegin(), fl.rend());  // rd[j] = fl[nx - 1 - j]
        // F_D is 0 below ja and taken as 1 from jb on (it is within 1e-15 of 1 there)
        int ja = 0, jb = nx;
        while (ja < nx && fl[ja] <= 0) ++ja;
        while (jb > ja && fl[jb - 1] >= 1.0 - 1e-15) --jb;
        step_cdf.resize(nt);
        thread_local std::vector<int> lo, hi, off;
        thread_local std::vector<double> base;
        grow(lo, nt);
        grow(hi, nt);
        grow(off, nt);
        grow(base, nt);
        for (int i = 0; i < nt; ++i) {
            // F_D[i - k] is 1 for k <= i - jb and 0 for k > i - ja
            lo[i] = std::max(0, i - jb + 1);
            hi[i] = std::max(lo[i], std::min(nv - 1, i - ja) + 1);
            base[i] = below[std::clamp(lo[i], 0, nv)];
            off[i] = nx - 1 - i;  // rd[off + k] = fl[i - k]
        }
        banded_dot(nt, lo.data(), hi.data(), off.data(), mass.data(), rd.data(), base.data(),
                   step_cdf.data());
        for (double& f : step_cdf) f = std::clamp(f, 0.0, 1.0);
        for (int i = 1; i < nt; ++i) step_cdf[i] = std::max(step_cdf[i], step_cdf[i - 1]);
    }
    // Between lattice points the CDF is the monotone cubic (Fritsch-Carlson) interpolant: on a
    // 257-point grid linear interpolation is off by ~5e-5 of the step in the tail quantiles
    // of a smooth CDF, the cubic by < 2e-6 (tests: exact order statistics).
    const int nt = static_cast<int>(step_cdf.size());
    std::vector<double> slope(nt, 0.0);  // dF / di at lattice points
    for (int i = 0; i < nt; ++i) {
        const double dl = i > 0 ? step_cdf[i] - step_cdf[i - 1] : -1.0;
        const double dr = i + 1 < nt ? step_cdf[i + 1] - step_cdf[i] : -1.0;
        if (dl < 0) {
            slope[i] = std::max(0.0, dr);
        } else if (dr < 0) {
            slope[i] = dl;
        } else {
            slope[i] = dl > 0 && dr > 0 ? 2.0 / (1.0 / dl + 1.0 / dr) : 0.0;
        }
    }
    auto hermite = [&](int i, double f) {
        const double f2 = f * f, f3 = f2 * f;
        return (2 * f3 - 3 * f2 + 1) * step_cdf[i] + (f3 - 2 * f2 + f) * slope[i] +
               (-2 * f3 + 3 * f2) * step_cdf[i + 1] + (f3 - f2) * slope[i + 1];
    };
    auto cdf = [&](double t) {
        const double u = (t - t0) / hl;
        if (u <= 0) return step_cdf.front() * std::max(0.0, 1.0 + u);
        if (u >= nt - 1) return 1.0;
        const int i = static_cast<int>(u);
        return std::clamp(hermite(i, u - i), step_cdf[i], step_cdf[i + 1]);
    };
    // moments: step = shift(R) + D + tail(R), D independent of (R, tail)
    double m1 = 0, m2 = 0;
    for (const auto& c : cells) {
        double ty = 0, ty2 = 0;
        for (const auto& [y, wy] : c.tail) {
            ty += wy * y;
            ty2 += wy * y * y;
        }
        // the cell as two uniform halves weighted to its mean (as on the lattice)
        const double sh = c.shift_mean;
        const double width = std::fabs(c.shift_b - c.shift_a);
        const double lo_mean = std::min(c.shift_a, c.shift_b) + 0.25 * width;
        const double hi_mean = lo_mean + 0.5 * width;
        const double f_lo = c.lo_share;
        const double shv = width * width / 48.0 + f_lo * (lo_mean - sh) * (lo_mean - sh) +
                           (1.0 - f_lo) * (hi_mean - sh) * (hi_mean - sh);
        m1 += c.w * (sh + ty);
        m2 += c.w * (sh * sh + shv + 2 * sh * ty + ty2 + c.tail_var);
    }
    out.mean_s = m1 + d_mean;
    out.std_s = std::sqrt(std::max(0.0, m2 - m1 * m1) + d_var);

    if (query != nullptr && cdf_out != nullptr) {
        cdf_out->clear();
        for (double t : *query) cdf_out->push_back(cdf(t));
    }

    // quantiles: the lattice CDF's monotone cubic inverted
    auto quantile = [&](double prob) {
        // the lattice CDF is non-decreasing: find the lattice cell, then invert the cubic there
        const auto it = std::lower_bound(step_cdf.begin(), step_cdf.end(), prob);
        if (it == step_cdf.begin()) return t0;
        if (it == step_cdf.end()) return t0 + hl * static_cast<double>(step_cdf.size() - 1);
        const auto i = static_cast<int>(it - step_cdf.begin()) - 1;
        // the interpolant is monotone in the cell: bisection to 2^-40 of a lattice step
        double a = 0, b = 1;
        for (int k = 0; k < 40; ++k) {
            const double mid = 0.5 * (a + b);
            (hermite(i, mid) < prob ? a : b) = mid;
        }
        return t0 + hl * (static_cast<double>(i) + 0.5 * (a + b));
    };
    out.p50_s = quantile(0.5);
    out.p90_s = quantile(0.9);
    out.p95_s = quantile(0.95);
    out.p99_s = quantile(0.99);
    out.p999_s = quantile(0.999);
    out.p_slow.clear();
    for (double delta : eval.slow_deltas) {
        out.p_slow.push_back(1.0 - cdf((1.0 + delta) * m_.deterministic_s));
    }
    out.histogram.clear();
    if (eval.histogram && eval.histogram_bins > 0) {
        out.histogram_lo_s = quantile(0.0005);
        out.histogram_hi_s = quantile(0.9995);
        if (!(out.histogram_hi_s > out.histogram_lo_s)) {
            out.histogram_hi_s = out.histogram_lo_s * (1 + 1e-12) + 1e-300;
        }
        const int nb = eval.histogram_bins;
        const double w = (out.histogram_hi_s - out.histogram_lo_s) / nb;
        double prev = 0;
        for (int b = 0; b < nb; ++b) {
            const double cur = b == nb - 1 ? 1.0 : cdf(out.histogram_lo_s + w * (b + 1));
            out.histogram.push_back(static_cast<float>(cur - prev));
            prev = cur;
        }
    }
    // cluster realizations: strata of the persistent-only max D_p at quantiles (k + 1/2) / K
    out.cluster_mean_s.assign(clusters, out.mean_s);
    out.cluster_var_s2.assign(clusters, out.std_s * out.std_s);
    if (clusters > 1) {
        const std::vector<double> FP = max_table(sf_type_pers, sf_mix_pers, sf_mix_w_pers);
        double p_mean, p_var;
        table_moments(FP, p_mean, p_var);
        std::vector<double> qs(clusters);
        double between = 0;
        for (int k = 0; k < clusters; ++k) {
            const double u = (k + 0.5) / clusters;
            // invert the tabulated CDF
            const auto it = std::lower_bound(FP.begin(), FP.end(), u);
            const auto i = std::clamp<long>(it - FP.begin(), 1, x_.n - 1);
            const double f0 = FP[i - 1], f1 = FP[i];
            const double frac = f1 > f0 ? (u - f0) / (f1 - f0) : 0.5;
            qs[k] = x_.at(static_cast<int>(i - 1)) + frac * x_.h - p_mean;
        }
        double qm = 0;
        for (double q : qs) qm += q / clusters;
        for (double& q : qs) q -= qm;
        for (double q : qs) between += q * q / clusters;
        const double within = std::max(0.0, out.std_s * out.std_s - between);
        for (int k = 0; k < clusters; ++k) {
            out.cluster_mean_s[k] = out.mean_s + qs[k];
            out.cluster_var_s2[k] = within;
        }
    }
}

}  // namespace

void analytic(const StepModel& model, const PersistentLayout& layout, const EvaluationSpec& eval,
              int clusters, StepDistribution& out, const std::vector<double>* query,
              std::vector<double>* cdf_out, int grid_points) {
    trim_law_cache();
    Analytic a(model, layout, grid_points);
    a.run(eval, clusters, out, query, cdf_out);
}

}  // namespace prism::stochastic::detail
