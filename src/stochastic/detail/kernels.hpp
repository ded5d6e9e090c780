#pragma once

// The analytic evaluator's inner loops (banded convolutions), compiled for several x86-64
// instruction sets and chosen at load time. Each sum is taken in a fixed order of eight
// partial sums, so every clone gives bit-identical results.

namespace prism::stochastic::detail {

/// For i < n: out[i] = base[i] + sum_{k = lo[i]}^{hi[i] - 1} a[k] * b[off[i] + k].
/// Empty ranges (hi <= lo) give base[i].
void banded_dot(int n, const int* lo, const int* hi, const int* off, const double* a,
                const double* b, const double* base, double* out);

}  // namespace prism::stochastic::detail
