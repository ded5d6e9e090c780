#pragma once

// One replica's law (DESIGN.md section 3, "DP replicas are independent until they synchronize"):
// the distribution of a replica type's Delta = (linear part - its mean) + W + noise on a common x
// grid, as survival functions (sf) the max over replicas then takes.
//
// W, the max of the stage terms (stage_curves.hpp), has the CDF prod_s F_{g_s}(g_of(s, w)), the
// stages' group laws read through each term's inverse; lockstep slow units multiply it by their
// PGF factor. Where smax's term is passed by the other stages' path families (beta > 0), W is
// taken conditional on smax's factor U: Z = max(phi_smax(U), Y + beta U), Y the max of the other
// terms (independent of U). W's masses are taken in cells of the x grid's step; the normal part
// (the linear part's spread and the transient noise along the critical path) smooths them by one
// Gaussian convolution per distinct offset (the types' mean shifts), the types of a mixture
// summed first (the sf is linear in the masses).
// Approximations: the linear part and the noise normal; a cell's mass at its midpoint, smoothed
// by the cell width (variance h^2 / 12); a mixture's offsets split between the two nearest cells.
// The caches behind it: per (cell count, cell width) the base type's stage rows, per type its
// masses, per law of smax's factor its cell masses (UCache), the last Gaussian kernel.

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "src/stochastic/detail/analytic/common.hpp"
#include "src/stochastic/detail/analytic/replica_types.hpp"
#include "src/stochastic/detail/analytic/stage_curves.hpp"

namespace prism::stochastic::detail::ssta {

class ReplicaLaw {
  public:
    /// W's range over all types of `set` and the x grid of `grid_points` points (at least 17).
    ReplicaLaw(const StepModel& m, const StageCurves& c, const ReplicaSet& set, int grid_points);
    ReplicaLaw(const ReplicaLaw&) = delete;
    ReplicaLaw& operator=(const ReplicaLaw&) = delete;

    /// the x grid of Delta
    const Grid& grid() const { return x_; }

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

  private:
    void set_w_range();
    void set_u_range();
    void set_x_grid(int grid_points);
    /// log CDF of W for a replica type at w (sum over stages)
    double log_cdf_w(const ReplicaType& t, double w) const;
    /// the smallest log CDF of W at w over the types (a type differs from the base type in a
    /// few stages only: `differ`)
    double min_log_cdf_w(double w, const std::vector<std::vector<int>>& differ) const;
    /// lockstep: the stage's largest GPU factor max G of its factor g (phi_0^-1)
    double raw_g(double g) const {
        return m_.effective && std::isfinite(g) ? m_.effective->inverse(0, g) : g;
    }
    /// lockstep, disjoint patterns: the joint factor of the slow-unit patterns other than
    /// smax's at W = w, sum over them of units f log(1 - q + q prod ratio_s^c_s) (exact: each
    /// pattern's units are its own)
    double other_pgf_log(double w) const;
    /// lockstep: the slow units' factor of the CDF of W, log (1 - q + q B(w))^units
    double pgf_log_term(const UnitPgf& u, double w) const;
    /// adds to sf the Gaussian-smoothed sf of the W masses pj (kw cells) shifted by extra_mean
    void convolve_add(const std::vector<double>& pj, int kw, double extra_mean, double noise_sd,
                      std::vector<double>& sf) const;
    /// probability masses of W in the kw cells of width hw above w_lo_ (memoized per type)
    const std::vector<double>& w_masses(const ReplicaType& t, int kw, double hw) const;
    /// the per-(kw, hw) state of w_masses: base rows, the conditional form's lattices
    void w_masses_prepare(int kw, double hw) const;
    void stage_row_at(const GroupLaw& law, int st, double w0, int n, double hw, double* row) const;
    /// whether w_masses takes type t conditional on smax's factor
    bool conditional(const ReplicaType& t) const { return beta_ > 0 && t.pgf == nullptr; }
    /// the conditional form: the others' sf on the y lattice, and the masses from a (weighted
    /// sum of) sf_Y with smax's law `ulaw`
    void y_sf(const ReplicaType& t, int kw, double hw, std::vector<double>& ysf) const;
    void cond_masses(const GroupLaw* ulaw, const double* ysf, double weight, int kw, double hw,
                     std::vector<double>& pj) const;

    const StepModel& m_;
    const StageCurves& c_;
    const ReplicaSet& set_;
    const ReplicaType* base_type_ = nullptr;
    Grid x_;
    double w_lo_ = 0, w_hi_ = 0;
    /// The paths that dwell on a stage other than smax pass smax with compute content beta_
    /// (seconds per unit of its g): W is taken conditional on smax's factor (w_masses) when
    /// beta_ > 0 (the stage curves' beta, 0 when lockstep slow units act through the PGF).
    /// u_lo_, u_hi_: the range of smax's g - g_ref over the types' laws.
    double beta_ = 0, u_lo_ = 0, u_hi_ = 0;

    mutable int mass_kw_ = -1;
    mutable double mass_hw_ = 0;
    mutable std::vector<double> base_stage_, base_total_;
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
    mutable double kern_off_ = 0, kern_sd_ = -1;
    mutable int kern_len_ = -1, kern_reach_ = -1;
    mutable bool kern_docs_ = false;
    /// The documents' term (StageCurves::doc_x): the sd of the normal rest of the noise (with
    /// a cell's smoothing), and P(N(0, sd) + D > dx).
    double documents_sd(double noise_sd) const;
    double documents_sf(double dx, double sd) const;
};

/// Each replica type's sf on the x grid, with the noise and (clusters > 1) without it: the
/// persistent part alone, for the cluster strata. When a slow unit touches one replica, the
/// PGF is linear in the types' CDFs and their mixture takes one convolution (linear_pgf: `mix`);
/// the types' sf are then the base type's only.
struct ReplicaSfs {
    bool linear_pgf = false;
    std::vector<std::vector<double>> type, type_pers;
    std::vector<double> mix, mix_pers;
};
void replica_sfs(const StepModel& m, const ReplicaSet& set, const ReplicaLaw& law, int clusters,
                 double noise_sd, ReplicaSfs& out);

}  // namespace prism::stochastic::detail::ssta
