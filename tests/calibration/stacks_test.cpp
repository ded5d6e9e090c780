// Issue 34: the software stacks (configs/presets/stacks) against every published source of
// tests/data/reference, each row on its GPU preset's kernel ceilings and its stack preset as a
// user's experiment file gets them. In sample: the stacks were fitted on these rows
// (`prism_calibrate fit`); each source left out is `prism_calibrate loso` (docs/calibration.md).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "tools/calibration/sources.hpp"

namespace {

using namespace prism;
using namespace prism::calibration;

// Every source within 10% MAPE with the shipped presets (vTrain's single-node rows, at 9.8%, are
// the closest to the bound; docs/calibration.md lists each source's figure).
TEST(Stacks, EverySourceWithinTenPercentInSampleWithTheShippedPresets) {
    std::map<std::string, ErrorStats> by_source;
    std::map<std::string, std::string> stack_of;
    for (const SourceRow& r : all_sources(PRISM_TEST_DATA_DIR)) {
        const Experiment e = make_experiment(r.c);
        by_source[r.c.set].add(relative_error(predict(e, r.c, r.q), r.c.measured));
        stack_of[r.c.set] = r.c.stack;
        EXPECT_NE(e.hardware.at(0).gpu.source.find("stack " + r.c.stack), std::string::npos);
    }
    std::set<std::string> stacks;
    for (auto& [source, s] : by_source) {
        s.finish();
        stacks.insert(stack_of[source]);
        std::printf("  %-26s %-14s %4d rows MAPE %5.1f%% (max %5.1f%%)\n", source.c_str(),
                    stack_of[source].c_str(), s.n, 100 * s.mean_abs, 100 * s.max_abs);
        EXPECT_LE(s.mean_abs, 0.10) << source;
    }
    EXPECT_EQ(by_source.size(), 22u);
    EXPECT_EQ(stacks.size(), 5u);  // every stack preset has rows
}

// Megatron-DeepSpeed at 2,240-3,360 A100 (MT-NLG 530B, tests/data/reference/mtnlg_530b_a100.csv;
// never fitted): the published TFLOP/s are the Megatron formula with recomputation, 96 B s l h^2
// (1 + s / 6h + V / 16 l h), over the published step times (within 1%: the two columns agree);
// the deepspeed stack's strong scaling over 1.5x the GPUs at a fixed batch (the pipeline's
// bubble growing from 34 of 274 to 34 of 194 slots, the DP group from 8 to 12 nodes) within 4% of
// the measured step ratios (predicted 1.210 / 1.162 / 1.406 against 1.197 / 1.131 / 1.354; ideal
// scaling, 1.25 / 1.2 / 1.5, would be 4-11% off). Its level is not asserted: 6-10% short in step
// time with DeepSpeed's BF16_Optimizer copy and blocking pipeline sends modelled (bf16_optimizer,
// blocking_p2p; 17-19% before), if the run used the BF16_Optimizer (docs/calibration.md, "Gaps").
TEST(Stacks, MtNlgStrongScalingAtTwoToThreeThousandGpusWithinFourPercent) {
    const std::vector<Case> rows = mtnlg_530b(PRISM_TEST_DATA_DIR);
    ASSERT_EQ(rows.size(), 3u);
    const Table t = read_table(data_file(PRISM_TEST_DATA_DIR, "mtnlg_530b_a100.csv"));
    std::vector<double> predicted;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const Case& c = rows[i];
        const double B = double(c.global_batch), s = c.seq, l = c.layers, h = c.hidden, V = c.vocab;
        const double flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
        const double gpus = c.tp * c.pp * c.dp;
        EXPECT_NEAR(flops / (gpus * c.measured) / 1e12 / t.number(i, "tflops_per_gpu"), 1.0, 0.01)
            << c.label;
        const Experiment e = make_experiment(c);
        predicted.push_back(evaluate_deterministic(e, e.defaults).step_time_s);
        std::printf("  %s: measured %.1f s, predicted %.2f s (%+.1f%%)\n", c.label.c_str(),
                    c.measured, predicted.back(), 100 * (predicted.back() / c.measured - 1));
    }
    for (std::size_t a = 0; a < rows.size(); ++a) {
        for (std::size_t b = a + 1; b < rows.size(); ++b) {
            const double measured = rows[a].measured / rows[b].measured;
            const double model = predicted[a] / predicted[b];
            std::printf("  step ratio %s / %s: measured %.3f, predicted %.3f\n",
                        rows[a].label.c_str(), rows[b].label.c_str(), measured, model);
            EXPECT_NEAR(model / measured, 1.0, 0.04) << rows[a].label << " / " << rows[b].label;
        }
    }
}

// The llm-foundry rows calibrate the llm-foundry stack, not the GPU: the same MPT row on the
// megatron-core stack (the default) is predicted faster (issue 34: a constant fitted to one
// stack's rows carried that stack's overheads into the hardware), and a NeMo row is unchanged by
// the llm-foundry preset's existence.
TEST(Stacks, LlmFoundryOverheadsLiveInItsStackNotInTheH100Preset) {
    Case mpt = llmfoundry_h100(PRISM_TEST_DATA_DIR).at(20);
    const Experiment foundry = make_experiment(mpt);
    mpt.stack = "megatron-core";
    const Experiment core = make_experiment(mpt);
    const double foundry_s = evaluate_deterministic(foundry, foundry.defaults).step_time_s;
    const double core_s = evaluate_deterministic(core, core.defaults).step_time_s;
    std::printf("  %s: llm-foundry stack %.3f s, megatron-core %.3f s, measured %.3f s\n",
                mpt.label.c_str(), foundry_s, core_s, mpt.measured);
    EXPECT_LT(core_s, foundry_s);
    EXPECT_EQ(foundry.hardware.at(0).gpu.peak_bf16_flop_per_s,
              core.hardware.at(0).gpu.peak_bf16_flop_per_s);
}

// llm-foundry's MPT tables (tests/data/reference/llmfoundry_mpt_h100.csv, _a100.csv,
// _h100_large.csv): every row ran on an 80 GB GPU, so the model's memory for each, with the
// llm-foundry stack's terms and the CUDA context it reserves, is within the GPU's HBM (MPT-125M
// to 70B, FSDP FULL_SHARD over 8-512 GPUs and SHARD_GRAD_OP over 128-512, 512-65,536 tokens,
// with and without full checkpointing; no dropout, as MPT's config defaults). A row over it would
// say the memory model is wrong for FSDP runs of this kind. Not asserted: the default planning
// margin (kDefaultMaxMemoryFraction, 0.96 of the HBM): three H100 MPT-1B rows without checkpointing
// (40,960 tokens per microbatch) come out at 0.97-0.98 of it, inside the HBM and over that margin;
// every other row is under it. With dropout masks counted (Megatron's default, which the rows ran
// with until model 2026.11.29.2) eight A100 rows were over the margin (MPT-760M at 49,152 tokens
// per microbatch 78.3 GiB of 76.0).
TEST(Stacks, EveryLlmFoundryRowFitsTheGpuItRanOn) {
    std::vector<Case> cases = llmfoundry_h100(PRISM_TEST_DATA_DIR);
    const std::vector<Case> a100 = llmfoundry_a100(PRISM_TEST_DATA_DIR);
    cases.insert(cases.end(), a100.begin(), a100.end());
    const std::vector<Case> large = llmfoundry_h100_large(PRISM_TEST_DATA_DIR);
    cases.insert(cases.end(), large.begin(), large.end());
    const std::vector<Case> a100_40gb = llmfoundry_a100_40gb(PRISM_TEST_DATA_DIR);
    cases.insert(cases.end(), a100_40gb.begin(), a100_40gb.end());
    ASSERT_EQ(cases.size(), 62u + 61u + 18u + 78u);
    std::map<std::string, std::pair<double, std::string>> most;  // per GPU: fraction of HBM
    int over_margin = 0;
    for (const Case& c : cases) {
        const Experiment e = make_experiment(c);
        const DeterministicResult r = evaluate_deterministic(e, e.defaults);
        const double of_hbm = r.memory.total_bytes() / e.hardware.at(0).gpu.hbm_bytes;
        auto& [m, label] = most[c.gpu];
        if (of_hbm > m) m = of_hbm, label = c.label;
        EXPECT_FALSE(c.dropout) << c.label;
        EXPECT_LE(of_hbm, 1.0) << c.set << " " << c.label;
        if (!r.feasible) ++over_margin;
    }
    for (const auto& [gpu, m] : most) {
        std::printf("  %s: largest %s, %.3f of the HBM\n", gpu.c_str(), m.second.c_str(), m.first);
    }
    EXPECT_LE(over_margin, 3);
}

}  // namespace
