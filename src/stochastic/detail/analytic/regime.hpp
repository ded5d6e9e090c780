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

/// The regime's cells with their tail nodes (valid until the next call on this thread). A
/// normal part of the tail with sd below `collapse_sd` is collapsed onto its mean.
std::vector<Cell> regime_cells(const StepModel& m, const StageCurves& c, double collapse_sd);

}  // namespace prism::stochastic::detail::ssta
