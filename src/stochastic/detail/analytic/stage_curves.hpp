#pragma once

// Stage curves: a replica's makespan as a function of its TP groups' factors g (DESIGN.md
// section 3, "composing a step"), found on the schedule DAG. The first stage of the analytic
// evaluator after the group laws; everything downstream reads a replica through this linear
// part plus W, the max of the stage terms.
//
// T(g) = max over the schedule's paths P of (B_P + sum_s A_Ps c_s g_s) is convex in g. It is
// linearized at the reference g_ref (every stage at the typical factor):
//  * the critical path there passes stage s with content a_s (`rest`, in units of c_s, the
//    stage's compute per microbatch); its value moves by sum_s a_s c_s (g_s - g_ref);
//  * a stage that is slowed enough makes the paths that dwell on it critical: phi_s(g) =
//    T(g_s = g, the others at g_ref) - T(g_ref) is convex and piecewise linear, its first
//    segment the critical path's (slope a_s c_s) and each later one a family of paths that
//    dwells longer on s. Those families pass the other stages as the critical path does (fill
//    and drain), except the stage the critical path dwells on, smax (the largest a_s c_s, the
//    last stage in 1F1B), which they pass briefly with content beta. So
//      T = T(g_ref) + sum_{s != smax} a_s c_s (g_s - g_ref) + W,
//      W = max(phi_smax(g_smax), max_{s != smax} (phi_s^+(g_s) - a_s c_s (g_s - g_ref))),
//    phi_s^+ the max of phi_s's later segments (negative below the point where s becomes
//    critical). The sum is normal (moments of g, `mu_o`, `var_o`), the transient noise along the
//    critical path too (`var_eps`); W's CDF is the product of the stages' CDFs through the
//    inverse of each term (g_of).
// Approximations: one critical path's contents for the linear part; the families' content on
// smax (beta) taken once per point, at the job's typical largest factor; the tangents found in
// one probing round (a lower bound of a term, off by at most its chord gap).

#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "src/stochastic/detail/analytic/group_law.hpp"
#include "src/stochastic/detail/step_model.hpp"

namespace prism::stochastic::detail::ssta {

struct StageCurves {
    double r_bar = 1;       ///< the regime's mean, where the curves are taken
    double eg = 1, vg = 0;  ///< mean and variance of the base group law's factor
    double g_ref = 1;       ///< the reference factor of the linearization
    int smax = 0;           ///< the stage the critical path dwells on
    /// per stage: the critical path's content in units of the stage's compute (its slope for
    /// a small change)
    std::vector<double> rest;
    /// per stage: its W term as the max of lines in d = g - g_ref, each as (1 / slope,
    /// intercept); none: the term never bounds W
    std::vector<std::vector<std::pair<double, double>>> lines;
    /// smax's content on the other stages' path families (seconds per unit of its g); 0: W is
    /// not taken conditional on smax's factor
    double beta = 0;
    /// mean and variance of the linear part besides W (T(g_ref) - T(1) included in the mean),
    /// and the transient noise's variance along the critical path
    double mu_o = 0, var_o = 0, var_eps = 0;
    /// The documents' term of one replica (step_model.hpp; none when inactive): the law of D,
    /// atoms doc_x with masses doc_w (mean 0), its variance (included in var_eps) and its
    /// largest |atom|. The replica law convolves it with the normal rest of the noise
    /// (replica_sf.cpp).
    std::vector<double> doc_x, doc_w;
    double doc_var = 0, doc_span = 0;
    /// W depends on the persistent factors: they are random and some stage has compute
    bool w_random = false;
    /// per op class of the schedule (PeriodicPipeline::class_of): the mean compute and
    /// communication of one microbatch's chunk (thread-local rows, valid for the current point)
    const double* op_comp = nullptr;
    const double* op_comm = nullptr;

    /// group factor of stage st that puts the replica's stage term at w (+infinity: the stage
    /// never bounds W, e.g. FSDP layers whose gather outlasts the compute, or a stage that
    /// does not become critical in the relevant range)
    double g_of(int st, double w) const {
        double d = std::numeric_limits<double>::infinity();
        for (const auto& [inv, b] : lines[st]) d = std::min(d, (w - b) * inv);
        return g_ref + d;
    }
    /// sd of the normal part of one replica's Delta (the linear part and the noise)
    double noise_sd() const { return std::sqrt(var_o + var_eps); }
};

/// The stage curves of the point's schedule, with the base group law `base_law` (no slow
/// member) setting the typical factor.
StageCurves stage_curves(const StepModel& m, const GroupLaw& base_law);

/// makespan of the mean durations at g = 1 and regime r[k] for k < lanes (at most four), in
/// one pass over the schedule (PeriodicPipeline::makespan_affine_lanes)
void makespans_at(const StepModel& m, const StageCurves& c, const double* r, std::size_t lanes,
                  double* end);
inline double makespan_at(const StepModel& m, const StageCurves& c, double r) {
    double end = 0;
    makespans_at(m, c, &r, 1, &end);
    return end;
}

}  // namespace prism::stochastic::detail::ssta
