#pragma once

// The step's CDF (DESIGN.md section 3, "sum = convolution"): step = shift(R) + tail(R) + D with
// D (the max over replicas, F_D on the x grid) independent of the regime part V = shift(R) +
// tail(R) (regime.hpp). V is put on a lattice as point masses and convolved with F_D; between
// lattice points the CDF is a monotone cubic, inverted for the quantiles.
// Approximations: V's masses at a lattice of the x grid's step (or a multiple r of it when V
// spreads over more than 4096 such steps; F_D then read at every r-th grid point), each piece of
// a cell's smear split between its two lattice neighbours keeping its mean: second order in the
// lattice step against the wider of D and V; the cubic interpolant (Fritsch-Carlson).
// With a folded tail normal (regime.hpp: sd sigma, wider than D) the lattice step is sigma / 16
// (or V's range / 4096), D's grid cells are split onto it as atoms at their midpoints, and the
// normal's CDF is sampled at the lattice offsets with its variance less what the splits of D
// and V add (so that the step's variance is kept exactly): the CDF is then within 1e-5 of the
// exact convolution (the closed forms of NarrowSteps: 2.2e-6 to 9.3e-6).

#include <vector>

#include "src/stochastic/detail/analytic/common.hpp"
#include "src/stochastic/detail/analytic/regime.hpp"

namespace prism::stochastic::detail::ssta {

class StepCdf {
  public:
    /// The CDF of shift(R) + tail(R) + D + N(0, folded_sd^2) from the regime's cells and F_D on
    /// the grid x (d_mean: D's mean, where an atom-like D is put).
    StepCdf(const RegimePart& regime, const std::vector<double>& FD, const Grid& x, double d_mean);

    double cdf(double t) const;
    /// the t with cdf(t) = prob (to 2^-40 of a lattice step)
    double quantile(double prob) const;

  private:
    /// F_ and t0_, hl_: D on its grid's lattice (or a multiple of it), V's masses on it
    void plain_lattice(const std::vector<Cell>& cells, const std::vector<double>& FD, const Grid& x,
                       double d_mean, double v_lo, double v_hi);
    /// the same with D convolved with the normal of sd `sigma` (regime.hpp)
    void folded_lattice(const std::vector<Cell>& cells, double sigma, const std::vector<double>& FD,
                        const Grid& x, double v_lo, double v_hi);
    /// the monotone cubic between lattice points i and i + 1, at fraction f
    double hermite(int i, double f) const {
        const double f2 = f * f, f3 = f2 * f;
        return (2 * f3 - 3 * f2 + 1) * F_[i] + (f3 - 2 * f2 + f) * slope_[i] +
               (-2 * f3 + 3 * f2) * F_[i + 1] + (f3 - f2) * slope_[i + 1];
    }
    double t0_ = 0, hl_ = 0;
    std::vector<double> F_;      ///< at t_i = t0 + i hl
    std::vector<double> slope_;  ///< dF / di at the lattice points
};

/// Mean and sd of the step: shift(R) + tail(R) over the cells, plus D's mean and variance.
void step_moments(const std::vector<Cell>& cells, double d_mean, double d_var, double& mean_s,
                  double& std_s);

}  // namespace prism::stochastic::detail::ssta
