// The MoE calibration of prism_calibrate (tools/calibration/moe_fit.hpp; docs/moe_calibration.md)
// against a known truth (rows whose "measured" step times the model generated from chosen MoE
// factors: the fit must find those factors again) and against NVIDIA's Megatron-Bridge MoE rows
// (tests/data/reference/moe/megatron_bridge_moe.csv): with each model and each GPU left out, the
// left-out rows' error within the bound this calibration reaches; the shipped factors
// (configs/presets/stacks/megatron-core.toml) are the fit's.

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "src/model/flops.hpp"
#include "tools/calibration/moe_fit.hpp"

namespace {

using namespace prism;
using namespace prism::calibration;

std::vector<MoeCase> calibration_set() {
    std::vector<MoeCase> out;
    for (const MoeCase& c : megatron_bridge_moe(PRISM_TEST_DATA_DIR)) {
        if (c.calibration_set) out.push_back(c);
    }
    return out;
}

std::vector<MoeItem*> pointers(std::vector<MoeItem>& items) {
    std::vector<MoeItem*> out;
    for (MoeItem& it : items) out.push_back(&it);
    return out;
}

TEST(MoeFit, TheCalibrationSetIsOneContainerWithEveryModelAndGpu) {
    const std::vector<MoeCase> cases = calibration_set();
    ASSERT_EQ(cases.size(), 14u);
    std::set<std::string> models, gpus;
    int overlapped = 0;
    for (const MoeCase& c : cases) {
        models.insert(c.model);
        gpus.insert(c.gpu);
        EXPECT_EQ(c.container, "26.04.01") << c.label;
        // the step time is the published throughput's: gbs x seq / (tokens/s/GPU x GPUs)
        EXPECT_GT(c.measured, 1.0) << c.label;
        // each row runs its recipe's dispatcher and EP a2a overlap (Megatron-Bridge v0.4.2)
        EXPECT_TRUE(c.dispatcher == "alltoall" || c.dispatcher == "deepep" ||
                    c.dispatcher == "hybridep")
            << c.label;
        overlapped += c.a2a_overlap ? 1 : 0;
    }
    EXPECT_EQ(models.size(), 3u);
    EXPECT_EQ(gpus.size(), 5u);
    // v0.4.2's recipes overlap the EP a2a on two of the rows only (DeepSeek-V3 B200_FP8_MX_V2,
    // Qwen3-235B H100); WorkloadBaseConfig's default is off
    EXPECT_EQ(overlapped, 2);
}

// Every factor free, the NVLink one included: with the recipes' EP a2a overlap off on 12 of the
// 14 rows, their NVLink dispatch is exposed and the rows tell it.
TEST(MoeFit, RecoversKnownFactorsFromRowsTheModelGenerated) {
    MoeFactors truth;
    truth.a2a_nvlink = 0.8;
    truth.a2a_nic = 0.45;
    truth.grouped_gemm = 0.7;
    truth.permute = 0.3;
    truth.wave = 1.0 / 4;  // 4 experts' GEMMs per curve call
    std::vector<MoeItem> items = load_moe_items(calibration_set());
    for (MoeItem& it : items) {
        set_moe_factors(it, truth);
        it.c.measured = moe_predict(it);
    }
    std::vector<MoeItem*> rows = pointers(items);
    const MoeFactors f = fit_moe(rows, MoeFactors{}, 400, 0.0, "11111");  // every factor free
    const ErrorStats s = moe_errors(rows, f);
    std::printf(
        "  fitted a2a NVLink %.4f NIC %.4f grouped GEMM %.4f permute %.4f wave %.3f experts; "
        "MAPE %.4f%%\n",
        f.a2a_nvlink, f.a2a_nic, f.grouped_gemm, f.permute, wave_experts(f), 100 * s.mean_abs);
    EXPECT_LT(s.mean_abs, 1e-4);
    EXPECT_NEAR(f.a2a_nvlink, truth.a2a_nvlink, 0.01);
    EXPECT_NEAR(f.grouped_gemm, truth.grouped_gemm, 0.01);
    EXPECT_NEAR(f.a2a_nic, truth.a2a_nic, 0.01);
    EXPECT_NEAR(f.permute, truth.permute, 0.01);
    EXPECT_NEAR(wave_experts(f), 4.0, 0.05);
}

/// prism's model FLOPs (model_tflops_per_gpu's numerator: 6 x the matrices' parameters per token
/// plus causal attention) are what NVIDIA's tables report as "Model TFLOP/sec/GPU": the table's
/// TFLOP/s over its tokens/s is the FLOPs per token Megatron-Core's num_floating_point_operations
/// counts (megatron/training/training.py), independent of prism. Qwen3 rows within 1.5%: prism
/// also counts the router GEMM (h x E per token: 0.33% of Qwen3-30B-A3B's FLOPs), and the table's
/// two figures disagree by up to 0.7% between rows of one model (Qwen3-30B B200 619 TFLOP/s at
/// 27,136 tokens/s, GB300 729 at 31,744). DeepSeek-V3's rows count its multi-token-prediction
/// layer, which prism's preset leaves out: by Megatron-Core's formula 2.600e11 FLOPs per token with
/// it, 2.498e11 without (an MoE layer with MLA, its 2h x h projection and a second logits GEMM:
/// 4.08% more), so the table is 1.035-1.047x prism's there.
TEST(MoeFit, ModelFlopsPerTokenAreTheTablesModelTflops) {
    for (const MoeCase& c : megatron_bridge_moe(PRISM_TEST_DATA_DIR)) {
        if (c.container != "26.04.01") continue;
        const Experiment e = make_moe_experiment(c, false);
        const double prism_per_token = model_flops_per_step(e.model, 1) / e.model.seq;
        const double table_per_token = c.tflops_per_gpu * 1e12 / c.tokens_per_s_per_gpu;
        const double ratio = table_per_token / prism_per_token;
        if (c.model_preset == "deepseek-v3") {
            EXPECT_GT(ratio, 1.035) << c.label;
            EXPECT_LT(ratio, 1.047) << c.label;
        } else {
            EXPECT_NEAR(ratio, 1.0, 0.015) << c.label;
        }
    }
}

/// Every row of the calibration set ran, so each must fit its GPU in prism as its recipe ran it
/// (the most loaded stage within the usable capacity): the recipes' recompute_modules, bf16
/// gradient reduction and no dropout, the routing probabilities applied in the activation
/// (no expert output kept for the combine). Until model 2026.11.28.2 the four Blackwell
/// DeepSeek-V3 rows did not (B200 179 of 172 GiB ... GB300 315 of 258).
TEST(MoeFit, EveryRowFitsItsGpuAsItsRecipeRan) {
    std::vector<MoeItem> items = load_moe_items(calibration_set());
    for (MoeItem& it : items) {
        const DeterministicResult r = evaluate_deterministic(it.e, it.e.defaults);
        EXPECT_TRUE(r.feasible) << it.c.label << ": " << r.memory.total_bytes() / (1 << 30)
                                << " GiB";
    }
}

/// The issue's acceptance bound for every left-out group: every model and every GPU within 10%
/// (docs/moe_calibration.md: H100 9.0% the closest). Before model 2026.11.28.2 one group missed
/// it: B300 (13.1%, bound 14%) while every row ran with the EP a2a overlap and the flex rows as
/// DeepEP; then H100 (11.4%) while the flex rows dispatched in FP8, which Megatron-Core's flex
/// backends do not.
constexpr double kIssueBound = 0.10;

/// The shipped MoE factors (configs/presets/stacks/megatron-core.toml) are the fit on every row
/// of the calibration set, and with them the rows stay within the in-sample error reached.
TEST(MoeFit, ShippedFactorsAreTheFitOnEveryRow) {
    const std::vector<MoeCase> cases = calibration_set();
    std::vector<MoeItem> items = load_moe_items(cases);
    std::vector<MoeItem*> rows = pointers(items);
    const MoeFactors f = fit_moe(rows, MoeFactors{});
    ErrorStats shipped;
    for (const MoeCase& c : cases) {
        const Experiment e = make_moe_experiment(c, false);
        const HardwareSpec& hw = e.hardware.at(0);
        const HardwareSpec& ceiling = make_moe_experiment(c, true).hardware.at(0);
        EXPECT_NEAR(hw.a2a_nvlink_efficiency, ceiling.a2a_nvlink_efficiency * f.a2a_nvlink, 2e-3)
            << c.label;
        EXPECT_NEAR(hw.a2a_nic_efficiency, ceiling.a2a_nic_efficiency * f.a2a_nic, 2e-3) << c.label;
        EXPECT_NEAR(hw.grouped_gemm_factor, f.grouped_gemm, 2e-3) << c.label;
        EXPECT_NEAR(hw.permute_factor, f.permute, 2e-3) << c.label;
        EXPECT_NEAR(hw.grouped_gemm_wave_experts, wave_experts(f), 0.02 * wave_experts(f))
            << c.label;
        shipped.add(relative_error(evaluate_deterministic(e, e.defaults).step_time_s, c.measured));
    }
    shipped.finish();
    std::printf("  shipped factors: MAPE %.1f%% (max %.1f%%) over %d rows\n",
                100 * shipped.mean_abs, 100 * shipped.max_abs, shipped.n);
    EXPECT_LT(shipped.mean_abs, 0.07);  // 6.2%
    EXPECT_LT(shipped.max_abs, 0.14);   // 13.7% (Qwen3-30B H100); 18.8% before the rows ran
                                        // their recipes' dispatcher and overlap
}

/// Every model and every GPU left out: the MoE factors fitted on the other rows, the left-out
/// rows' mean absolute error within the issue's 10%, every group.
TEST(MoeFit, EveryLeftOutModelAndGpuStaysWithinTheBound) {
    std::vector<MoeItem> items = load_moe_items(calibration_set());
    for (const char* by : {"model", "gpu"}) {
        std::set<std::string> groups;
        for (const MoeItem& it : items) groups.insert(by[0] == 'm' ? it.c.model : it.c.gpu);
        for (const std::string& g : groups) {
            std::vector<MoeItem*> train, test;
            for (MoeItem& it : items) {
                ((by[0] == 'm' ? it.c.model : it.c.gpu) == g ? test : train).push_back(&it);
            }
            const MoeFactors f = fit_moe(train, MoeFactors{});
            const ErrorStats s = moe_errors(test, f);
            std::printf("  %s %-16s left out: MAPE %.1f%% (max %.1f%%)\n", by, g.c_str(),
                        100 * s.mean_abs, 100 * s.max_abs);
            EXPECT_LE(s.mean_abs, kIssueBound) << by << " " << g;
        }
    }
}

}  // namespace
