#pragma once

// Kernel time from a roofline with a size-dependent GEMM efficiency (DESIGN.md section 1).

#include <algorithm>

#include "src/model/spec.hpp"

namespace prism::detail {

/// eff(F) = eff_max F / (F + F_half): small GEMMs cannot fill the GPU.
inline double gemm_efficiency(const GemmEfficiency& curve, double flops) {
    return curve.max_efficiency * flops / (flops + curve.half_flops);
}

/// max(FLOPs / (peak eff(F)), bytes / (HBM bandwidth x HBM efficiency)); `flops` = 0 for
/// purely memory-bound kernels.
inline double roofline_time_s(const GpuSpec& gpu, double peak_flop_per_s, double flops,
                              double bytes) {
    double compute = 0;
    if (flops > 0) compute = flops / (peak_flop_per_s * gemm_efficiency(gpu.gemm, flops));
    const double memory = bytes / (gpu.hbm_bytes_per_s * gpu.hbm_efficiency);
    return std::max(compute, memory);
}

}  // namespace prism::detail
