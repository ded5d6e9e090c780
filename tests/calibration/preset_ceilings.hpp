// GPU presets' kernel ceilings for the calibration tests, and fused attention's forward +
// backward by hand from them (docs/attention_exp.md): shared by attention_exp_test.cpp and
// h200_kernels_test.cpp.
#pragma once

#include <algorithm>
#include <string>

#include "io/experiment_loader.hpp"

namespace prism::test {

/// The GPU preset's ceilings for one attention kernel family, every stack factor at 1.
inline GpuSpec preset_ceilings(const std::string& gpu, const std::string& kernel) {
    return io::parse_experiment(
               "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n"
               "[hardware.h]\npreset = \"" +
                   gpu +
                   "\"\n[stack]\npreset = \"megatron-core\"\n"
                   "attention_kernel = \"" +
                   kernel +
                   "\"\ngemm_efficiency = 1\nfp8_gemm_efficiency = 1\n"
                   "attention_efficiency = 1\nhbm_efficiency = 1\n",
               "preset.toml")
        .hardware.at(0)
        .gpu;
}

/// Hand calculation, per score element and head: forward 4 d FLOPs (QK^T and PV), backward
/// 2.5 x that; one exponential in each pass; the two resources combined as max + (1 - w) min.
struct AttentionPass {
    double flops, seconds;
};
inline AttentionPass attention_pass(const GpuSpec& g, double d, double flop_scale) {
    const double flops = flop_scale * 4 * d;
    const double mma = flops / (g.peak_bf16_flop_per_s * g.attention_efficiency);
    const double exp = 1.0 / g.exp_per_s;
    const double w = g.attention_exp_overlap;
    return {flops, std::max(mma, exp) + (1 - w) * std::min(mma, exp)};
}

/// The fraction of the bf16 peak of forward + backward together (docs/calibration.md's table).
inline double attention_combined(const GpuSpec& g, double d) {
    const AttentionPass f = attention_pass(g, d, 1), b = attention_pass(g, d, 2.5);
    return (f.flops + b.flops) / (f.seconds + b.seconds) / g.peak_bf16_flop_per_s;
}

}  // namespace prism::test
