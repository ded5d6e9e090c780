#include "src/stochastic/detail/kernels.hpp"

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

}  // namespace prism::stochastic::detail
