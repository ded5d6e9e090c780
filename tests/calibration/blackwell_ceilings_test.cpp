// Blackwell kernel ceilings against Blackwell's own published rows (issue 34, item 4): the
// GB200 NVL72 preset's compute ceilings are the B200's at the throughput a GB200 sustains on the
// same configuration and software (NVIDIA Megatron-Bridge tables, tests/data/reference/
// blackwell_pairs.csv), not the B200's fraction of the GB200's datasheet peak (11% higher).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "io/experiment_loader.hpp"
#include "tools/calibration/reference_data.hpp"

namespace {

using namespace prism;

HardwareSpec preset(const std::string& name) {
    return io::parse_experiment(
               "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n"
               "[hardware.h]\npreset = \"" +
                   name + "\"\n",
               "preset.toml")
        .hardware.at(0);
}

/// GB200 / B200 tokens per GPU of each pair (same container, model, precision and layout).
std::vector<double> pair_ratios() {
    const calibration::Table t = calibration::read_table(std::string(PRISM_TEST_DATA_DIR) +
                                                         "/reference/blackwell_pairs.csv");
    std::vector<double> r;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        r.push_back(t.number(i, "gb200_tokens_per_s_per_gpu") /
                    t.number(i, "b200_tokens_per_s_per_gpu"));
    }
    return r;
}

double geometric_mean(const std::vector<double>& x, std::size_t skip = std::size_t(-1)) {
    double sum = 0;
    int n = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (i == skip) continue;
        sum += std::log(x[i]);
        ++n;
    }
    return std::exp(sum / n);
}

// Hand calculation from the table (Megatron-Bridge docs/performance-summary-archive.md):
// 31357/29994 = 1.0454, 29925/29388 = 1.0183, 578/622 = 0.9293, 31508/30624 = 1.0289,
// 29789/29521 = 1.0091; geometric mean 1.0053, far below the datasheet's 5000/4500 = 1.111.
// Each pair left out moves the mean by at most 2% (0.9956-1.0253): the pairs agree.
TEST(BlackwellCeilings, GB200SustainsAboutTheB200sThroughputOnTheSameConfiguration) {
    const std::vector<double> r = pair_ratios();
    ASSERT_EQ(r.size(), 5u);
    const double mean = geometric_mean(r);
    std::printf("  GB200 / B200 tokens per GPU: geometric mean %.4f (datasheet peak ratio 1.111)\n",
                mean);
    EXPECT_NEAR(mean, 1.0053, 5e-4);
    for (std::size_t i = 0; i < r.size(); ++i) {
        const double left_out = geometric_mean(r, i);
        std::printf("    pair %zu: ratio %.4f; the mean without it %.4f\n", i, r[i], left_out);
        EXPECT_NEAR(left_out / mean, 1.0, 0.02) << "pair " << i;
    }
    EXPECT_LT(*std::max_element(r.begin(), r.end()), 5000.0 / 4500.0 - 0.05);
}

// The presets: a GB200 GEMM / attention ceiling times its peak is the B200's times the mean
// ratio (1.0053), for BF16 and FP8 GEMMs and fused attention, and the GEMM curve's F_half is the
// B200's, so a GEMM of any size takes 1 / 1.0053 of its B200 time: t = (F + F_half) / (peak
// eff_max). The stack (megatron-core here) multiplies both presets by the same factors.
TEST(BlackwellCeilings, GB200PresetIsTheB200AtTheMeasuredRatioForEveryComputeCeiling) {
    const double mean = geometric_mean(pair_ratios());
    const HardwareSpec gb = preset("gb200-nvl72"), b = preset("b200");
    const double bf16 = gb.gpu.peak_bf16_flop_per_s * gb.gpu.gemm.max_efficiency /
                        (b.gpu.peak_bf16_flop_per_s * b.gpu.gemm.max_efficiency);
    const double fp8 = gb.gpu.peak_fp8_flop_per_s * gb.gpu.fp8_gemm_max_efficiency /
                       (b.gpu.peak_fp8_flop_per_s * b.gpu.fp8_gemm_max_efficiency);
    const double attention = gb.gpu.peak_bf16_flop_per_s * gb.gpu.attention_efficiency /
                             (b.gpu.peak_bf16_flop_per_s * b.gpu.attention_efficiency);
    std::printf("  GB200 / B200 sustained: bf16 GEMM %.4f, fp8 GEMM %.4f, attention %.4f\n", bf16,
                fp8, attention);
    EXPECT_NEAR(bf16, mean, 3e-4);  // the presets round to 4 digits
    EXPECT_NEAR(fp8, mean, 3e-4);
    EXPECT_NEAR(attention, mean, 3e-4);
    EXPECT_DOUBLE_EQ(gb.gpu.gemm.half_flops, b.gpu.gemm.half_flops);
    // A 4096 x 16384 x 13312 GEMM (Llama 3.1 405B's MLP up projection at tp 4): same ratio.
    const double f = 2.0 * 4096 * 16384 * 13312;
    const double t_gb =
        (f + gb.gpu.gemm.half_flops) / (gb.gpu.peak_bf16_flop_per_s * gb.gpu.gemm.max_efficiency);
    const double t_b =
        (f + b.gpu.gemm.half_flops) / (b.gpu.peak_bf16_flop_per_s * b.gpu.gemm.max_efficiency);
    EXPECT_NEAR(t_b / t_gb, mean, 3e-4);
    // Memory and links are the datasheet's, as the B200's.
    EXPECT_DOUBLE_EQ(gb.gpu.hbm_bytes_per_s * gb.gpu.hbm_efficiency,
                     b.gpu.hbm_bytes_per_s * b.gpu.hbm_efficiency);
}

}  // namespace
