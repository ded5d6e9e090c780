#pragma once

// The step's CDF (DESIGN.md section 3, "sum = convolution"): step = shift(R) + tail(R) + D with
// D (the max over replicas, F_D on the x grid) independent of the regime part V = shift(R) +
// tail(R) (regime.hpp). V is put on a lattice as point masses and convolved with F_D; between
// lattice points the CDF is a monotone cubic, inverted for the quantiles.
// Approximations: V's masses at a lattice of the x grid's step (or a multiple r of it when V
// spreads over more than 4096 such steps; F_D then read at every r-th grid point), each piece of
// a cell's smear split between its two lattice neighbours keeping its mean: second order in the
// lattice step against the wider of D and V; the cubic interpolant (Fritsch-Carlson).

#include <vector>

#include "src/stochastic/detail/analytic/common.hpp"
#include "src/stochastic/detail/analytic/regime.hpp"

namespace prism::stochastic::detail::ssta {

class StepCdf {
  public:
    /// The CDF of shift(R) + tail(R) + D from the regime's cells and F_D on the grid x (d_mean:
    /// D's mean, where an atom-like D is put).
    StepCdf(const std::vector<Cell>& cells, const std::vector<double>& FD, const Grid& x,
            double d_mean);

    double cdf(double t) const;
    /// the t with cdf(t) = prob (to 2^-40 of a lattice step)
    double quantile(double prob) const;

  private:
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
