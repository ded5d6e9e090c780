// torchtitan's op-level selective activation checkpointing (docs/torchtitan_sac.md): the
// torchtitan rows marked `selective` run it through their stack preset, no other source does, and
// the published peak memory per GPU of those rows (never fitted) tells it from Megatron-Core's
// meaning of "selective".

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "tools/calibration/torchtitan_memory.hpp"

namespace {

using namespace prism;
using namespace prism::calibration;

TEST(TorchtitanSac, OnlyTheTorchtitanRowsRunTheOpPolicy) {
    int op_rows = 0;
    for (const SourceRow& r : all_sources(PRISM_TEST_DATA_DIR, 16)) {
        const Experiment e = make_experiment(r.c);

        EXPECT_EQ(e.training.torchtitan_op_sac(), r.c.stack == "torchtitan") << r.c.label;
        if (r.c.stack == "torchtitan" && r.c.recompute == "selective") ++op_rows;
    }
    EXPECT_EQ(op_rows, 10);  // 2024-12 tables 1 and 3 (bf16, fp8), 2025-06's 8B rows, Trainy's two
}

// The published figure is the caching allocator's peak reserved memory, never below what it
// allocates (fragmentation, which prism does not count, comes on top): prism's allocator share
// with the op policy is at most 30% below it on the 2024-12 rows (-20% to -26%; the
// full-checkpointing 8B rows of the same benchmark, whose activations are a small part, are 28%
// below: the gap is not the policy's) and within 5% of Trainy's 2025-06 rows (+0.5%, -1.6%).
// Megatron-Core's meaning (the attention core only: nothing recomputed with fused attention)
// keeps the norms' outputs, K, w3's output and the SiLU product, and is above the published
// reserved peak on every selective row, by 15% to 57% (no dropout masks: torchtitan's Llama has
// no dropout; 20% to 65% with them, before model 2026.11.29.2): more than the allocator ever
// held.
TEST(TorchtitanSac, PublishedPeakMemoryTellsTheOpPolicyFromMegatrons) {
    int selective = 0;
    for (const TorchtitanMemoryRow& r : torchtitan_memory(PRISM_TEST_DATA_DIR)) {
        if (r.recompute != "selective") continue;
        ++selective;
        const double op = r.predicted_gib / r.measured_gib - 1;
        const double megatron = r.megatron_gib / r.measured_gib - 1;
        std::printf("  %-60s published %5.1f GiB  op SAC %+6.1f%%  Megatron %+6.1f%%\n",
                    r.label.c_str(), r.measured_gib, 100 * op, 100 * megatron);

        EXPECT_LE(op, 0.05) << r.label;
        EXPECT_GE(op, -0.30) << r.label;
        EXPECT_GT(megatron, 0.10) << r.label;
        if (r.label.find("trainy") != std::string::npos) {
            EXPECT_LE(std::abs(op), 0.05) << r.label;
        }
    }
    EXPECT_EQ(selective, 6);
}

// Table 5's 405B rows (FSDP 8 x TP 8 x PP 8, full checkpointing, 1F1B and interleaved 1F1B) with
// FSDP2 under pipeline parallelism as PyTorch runs it (fsdp_pp_unsharded): each stage holds its
// weights gathered and its gradients unsharded for the step, so prism's allocator share lands
// 27% / 12% under the published 82.5 / 72.7 GiB, where the benchmark's other full-checkpointing
// rows are (28% to 38% under). Read as per-layer FSDP (every layer resharded after its forward
// and backward) they would be 62% / 52% under: less than half of what the allocator reserved.
TEST(TorchtitanMemory, PipelineRowHoldsItsStagesGathered) {
    int rows = 0;
    for (const Case& c : torchtitan_llama3(PRISM_TEST_DATA_DIR)) {
        if (c.pp == 1) continue;
        ++rows;
        Experiment e = make_experiment(c);
        const DesignPoint p = e.defaults;
        const double unsharded = allocator_gib(e, evaluate_deterministic(e, p), p);
        e.training.fsdp_pp_unsharded = false;
        const double per_layer = allocator_gib(e, evaluate_deterministic(e, p), p);
        const double measured = c.measured_memory_gib;
        std::printf("  %-60s published %5.1f GiB  unsharded %+6.1f%%  per layer %+6.1f%%\n",
                    c.label.c_str(), measured, 100 * (unsharded / measured - 1),
                    100 * (per_layer / measured - 1));

        EXPECT_GE(unsharded / measured - 1, -0.35) << c.label;
        EXPECT_LE(unsharded / measured - 1, 0.05) << c.label;
        EXPECT_LT(per_layer / measured - 1, -0.45) << c.label;
    }
    EXPECT_EQ(rows, 2);  // table 5: 1F1B and interleaved 1F1B
}

}  // namespace
