#pragma once

// The communication regime and the step's tail (DESIGN.md section 2: "R a communication regime
// per step, shared by all collectives of that step"; section 3: the DP gradient sync starts when
// the last replica finishes). The step is shift(R) + D + tail(R): shift(R) the mean-duration
// makespan at g = 1 (convex in R: found by a few DAG runs where the critical path changes,
// linear in between), D the max over replicas (independent of R given its mean), tail(R) the
// exposed part of the DP sync plus the optimizer.
// Approximations: R integrated over 96 cells of its quantile function in normal-score space
// (the shift affine inside a cell: two uniform halves weighted to keep the cell's mean); the
// sync and optimizer normal given R, by 8-point Gauss-Hermite (rectified at 0), a narrow normal
// part collapsed onto its mean (its variance kept for the moments); D taken at the regime's
// mean (its dependence on R through the collectives inside a replica is left out).
// A tail normal wide against what smooths it (D, and the regime's shift) is not put on 8
// Gauss-Hermite atoms: their CDF is a staircase that D no longer fills in (8 atoms smoothed by
// a normal of sd rho times theirs are off by 1.7e-5 in the CDF at rho = 1, 0.013 at 0.4 and
// 0.13 at 0.1; the 256-GPU MLPerf point with transient noise only, a DP sync of 0.77 s whose
// one collective draw has an sd of 5.9 ms and a max over replicas of sd 0.23 ms, had plateaus
// at 0.127 / 0.5 / 0.873 in its CDF and p90 = p95). When every cell's tail is one
// normal (no rectification in reach) and the smoothing sd is below the smallest of their sd,
// that smallest sd is taken out of every cell (folded_sd) and StepCdf convolves D with it
// (exact: the normal parts are independent of the rest); the cells keep the rest of their
// variance (Gauss-Hermite nodes or collapsed as above). The rectified case keeps its nodes.

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "src/stochastic/detail/analytic/stage_curves.hpp"

namespace prism::stochastic::detail::ssta {

/// One cell of R: its weight, the shift at its edges and its mean shift, and the tail nodes.
struct Cell {
    double w, shift_a, shift_b;
    double shift_mean;  ///< E[shift | cell] (the shift is affine in R inside a cell)
    /// the cell is two uniform halves of [shift_a, shift_b]; the lower one's share of the
    /// weight, chosen to keep shift_mean (lattice, CDF and moments all use it)
    double lo_share = 0.5;
    std::span<const std::pair<double, double>> tail;  ///< (value, weight), thread-local store
    double tail_var = 0;  ///< variance of a normal part collapsed onto its mean
    std::size_t first = 0, count = 0;
};

/// The regime's cells, and the sd of a normal part that every cell's tail shares and that was
/// taken out of them (0: none): D is to be convolved with it (StepCdf), and its variance added
/// to D's (step_moments).
struct RegimePart {
    std::vector<Cell> cells;
    double folded_sd = 0;
};

/// The regime's cells with their tail nodes (valid until the next call on this thread), for
/// D of sd `d_sd` on an x grid of step `grid_h`. A normal part of the tail with sd small
/// against the x grid step or against the sd S of what it meets (D, convolved with folded_sd
/// where the tails share one) is collapsed onto its mean (one node instead of 8): the CDF moves
/// by about sigma^2 / 2 |f'| <= 0.12 (sigma / S)^2 for a unimodal D (< 5e-5 at sigma = 0.02 S),
/// or by a fraction of one grid step's mass; its variance still enters the moments (tail_var).
RegimePart regime_cells(const StepModel& m, const StageCurves& c, double d_sd, double grid_h);

}  // namespace prism::stochastic::detail::ssta
