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
    EXPECT_EQ(op_rows, 6);  // tables 1 and 3 (bf16, fp8) and Trainy's two rows
}

// The published figure is the caching allocator's peak reserved memory, never below what it
// allocates (fragmentation, which prism does not count, comes on top): prism's allocator share
// with the op policy is at most 30% below it on the 2024-12 rows (-20% to -26%; the
// full-checkpointing 8B rows of the same benchmark, whose activations are a small part, are 28%
// below: the gap is not the policy's) and within 5% of Trainy's 2025-06 rows (+0.5%, -1.6%).
// Megatron-Core's meaning (the attention core only: nothing recomputed with fused attention)
// keeps the norms' outputs, K, w3's output and the SiLU product, and is above the published
// reserved peak on every selective row, by 20% to 65%: more than the allocator ever held.
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
        EXPECT_GT(megatron, 0.15) << r.label;
        if (r.label.find("trainy") != std::string::npos) {
            EXPECT_LE(std::abs(op), 0.05) << r.label;
        }
    }
    EXPECT_EQ(selective, 6);
}

}  // namespace
