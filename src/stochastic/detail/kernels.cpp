#include "src/stochastic/detail/kernels.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PRISM_KERNEL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PRISM_KERNEL_CLONES
#endif

namespace prism::stochastic::detail {

PRISM_KERNEL_CLONES
void banded_dot(int n, const int* lo, const int* hi, const int* off, const double* a,
                const double* b, const double* base, double* out) {
    for (int i = 0; i < n; ++i) {
        const double* bb = b + off[i];
        double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int k = lo[i];
        const int end = hi[i];
        for (; k + 8 <= end; k += 8) {
            for (int q = 0; q < 8; ++q) s[q] += a[k + q] * bb[k + q];
        }
        for (int q = 0; k < end; ++k, ++q) s[q] += a[k] * bb[k];
        out[i] = base[i] + (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])));
    }
}

namespace {

/// exp(x) for x in [-708, 0]: x = k ln 2 + r (Cody-Waite), e^r by a degree-13 polynomial
/// (|r| <= ln 2 / 2: truncation < 1e-17 relative), 2^k through the exponent field.
inline double exp_reduced(double x) {
    constexpr double kLog2e = 1.4426950408889634074;
    constexpr double kLn2Hi = 6.93147180369123816490e-01;
    constexpr double kLn2Lo = 1.90821492927058770002e-10;
    constexpr double kShifter = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to integer
    const double kd = x * kLog2e + kShifter;
    const auto bits = std::bit_cast<std::uint64_t>(kd);  // low bits: k (two's complement)
    const double k = kd - kShifter;
    const double r = (x - k * kLn2Hi) - k * kLn2Lo;
    double p = 1.0 / 6227020800.0;  // 1/13!
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    // 2^k, k in [-1022, 0]: the exponent field k + 1023 (the low 12 bits of bits + 1023)
    return p * std::bit_cast<double>((bits + 1023u) << 52);
}

}  // namespace

PRISM_KERNEL_CLONES
void exp_nonpositive_n(const double* x, int n, double* out) {
    for (int j = 0; j < n; ++j) {
        const double e = exp_reduced(std::clamp(x[j], -708.0, 0.0));
        out[j] = x[j] < -708.0 ? 0.0 : e;
    }
}

PRISM_KERNEL_CLONES
void one_minus_exp_n(const double* t, int n, double* out) {
    for (int j = 0; j < n; ++j) {
        const double x = std::max(t[j], -40.0);
        const double far = 1.0 - exp_reduced(x);
        // near 0: -expm1(x) by Taylor, six terms
        const double near =
            -x * (1.0 + x * (0.5 + x * (1.0 / 6 + x * (1.0 / 24 + x * (1.0 / 120 + x / 720)))));
        const double v = x < -0.01 ? far : near;
        out[j] = t[j] < -40.0 ? 1.0 : v;
    }
}

PRISM_KERNEL_CLONES
void interp_affine(const double* y, int points, double lo, double hi, double inv_h, double g0,
                   double dg, int n, double* out) {
    const double top = y[points - 1];
    // with dg > 0 the points below lo and at or above hi are two runs at the ends: only the
    // middle run interpolates (the bounds are widened by one and rechecked per point)
    int j0 = 0, j1 = n;
    if (dg > 0) {
        const double a = std::floor((lo - g0) / dg) - 1.0;
        const double b = std::ceil((hi - g0) / dg) + 1.0;
        j0 = static_cast<int>(std::clamp(a, 0.0, static_cast<double>(n)));
        j1 = static_cast<int>(std::clamp(b, static_cast<double>(j0), static_cast<double>(n)));
    }
    for (int j = 0; j < j0; ++j) out[j] = -1e300;  // g <= lo there
    for (int j = j1; j < n; ++j) out[j] = top;     // g >= hi there
    for (int j = j0; j < j1; ++j) {
        const double g = g0 + dg * j;
        const double u = std::clamp((g - lo) * inv_h, 0.0, static_cast<double>(points - 1));
        const int i = std::min(static_cast<int>(u), points - 2);
        const double v = y[i] + (u - i) * (y[i + 1] - y[i]);
        out[j] = !(g > lo) ? -1e300 : (g >= hi ? top : v);
    }
}

}  // namespace prism::stochastic::detail
