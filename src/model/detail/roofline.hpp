#pragma once

// Kernel time from a roofline with a size-dependent GEMM efficiency (DESIGN.md section 1).

#include <algorithm>

#include "src/model/spec.hpp"

namespace prism::detail {

/// eff(F) = eff_max F / (F + F_half): small GEMMs cannot fill the GPU.
inline double gemm_efficiency(const GemmEfficiency& curve, double flops) {
    return curve.max_efficiency * flops / (flops + curve.half_flops);
}

/// max(FLOPs / (peak eff(F)), bytes / (HBM bandwidth x HBM efficiency)) with the GEMM curve
/// `curve`; `flops` = 0 for purely memory-bound kernels.
inline double roofline_time_s(const GpuSpec& gpu, const GemmEfficiency& curve,
                              double peak_flop_per_s, double flops, double bytes) {
    double compute = 0;
    if (flops > 0) compute = flops / (peak_flop_per_s * gemm_efficiency(curve, flops));
    const double memory = bytes / (gpu.hbm_bytes_per_s * gpu.hbm_efficiency);
    return std::max(compute, memory);
}

/// The same with the GPU's bf16 GEMM curve.
inline double roofline_time_s(const GpuSpec& gpu, double peak_flop_per_s, double flops,
                              double bytes) {
    return roofline_time_s(gpu, gpu.gemm, peak_flop_per_s, flops, bytes);
}

}  // namespace prism::detail
