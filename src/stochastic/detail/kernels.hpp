#pragma once

// The analytic evaluator's inner loops (banded convolutions), compiled for several x86-64
// instruction sets and chosen at load time. Each sum is taken in a fixed order of eight
// partial sums, so every clone gives bit-identical results.

namespace prism::stochastic::detail {

/// For i < n: out[i] = base[i] + sum_{k = lo[i]}^{hi[i] - 1} a[k] * b[off[i] + k].
/// Empty ranges (hi <= lo) give base[i].
void banded_dot(int n, const int* lo, const int* hi, const int* off, const double* a,
                const double* b, const double* base, double* out);

/// out[j] = 1 - exp(t[j]) for t[j] <= 0, to a relative 1e-14 (exactly 1 below t = -40, where
/// exp(t) < 4.3e-18 is below half an ulp of 1). Above t = -0.01 a Taylor series (no
/// cancellation); below, exp by range reduction t = n ln 2 + r, |r| <= ln 2 / 2, and a
/// degree-13 polynomial (truncation < 1e-17 relative).
void one_minus_exp_n(const double* t, int n, double* out);

/// out[j] = exp(x[j]) for x[j] <= 0, to a relative 1e-15 (0 below x = -708, where exp(x) is
/// subnormal); the same range reduction and polynomial as one_minus_exp_n.
void exp_nonpositive_n(const double* x, int n, double* out);

/// out[j] = linear interpolation at g = g0 + dg j of y, tabulated at lo + i / inv_h for
/// i < points; -1e300 at g <= lo and y[points - 1] at g >= hi = lo + (points - 1) / inv_h.
void interp_affine(const double* y, int points, double lo, double hi, double inv_h, double g0,
                   double dg, int n, double* out);

}  // namespace prism::stochastic::detail
