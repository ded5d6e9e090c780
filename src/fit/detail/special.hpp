#pragma once

// Special functions the fits need beyond <cmath>: digamma and the regularized incomplete beta
// function.

namespace prism::fit::detail {

/// psi(x) = d ln Gamma(x) / dx for x > 0: the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 6,
/// then the asymptotic series (Abramowitz and Stegun 6.3.18), absolute error below 1e-13.
double digamma(double x);

/// I_x(a, b), the regularized incomplete beta function, for a, b > 0 and x in [0, 1]: Lentz's
/// continued fraction (Numerical Recipes 6.4) on the side where it converges fast.
double incomplete_beta(double a, double b, double x);

}  // namespace prism::fit::detail
