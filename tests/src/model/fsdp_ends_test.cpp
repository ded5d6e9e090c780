// ZeRO-3 / FSDP's word embedding and output layer (add_fsdp_end_tables) and the first gather /
// last scatter of each chunk pass (expose_chunk_end): FSDP gathers a layer beside the compute
// before it, but nothing runs before the microbatch's first gather or after its last scatter.
// The embedding's table is gathered first and scattered last (exposed); the output layer's is
// the root's (TrainingSpec::fsdp_ends "root": FSDP1's auto-wrap, torchtitan before 2025-07-28;
// exposed with the embedding's) or a unit of its own ("units": prefetched and overlapped like a
// layer's); Megatron-FSDP keeps both gathered for the step ("kept": one gather a step, a
// scatter every microbatch). Hand calculations on the helpers' A100-like node.

#include <gtest/gtest.h>

#include <algorithm>

#include "model_test_helpers.hpp"
#include "src/model/deterministic.hpp"

namespace {

using prism::DesignPoint;
using Ends = prism::TrainingSpec::FsdpEnds;
using prism::test::kH;
using prism::test::kLayerParams;
using prism::test::kVocab;
using prism::test::ring;

/// ZeRO-3 over 4 GPUs of a node (NVLink: 0.8 x 300 GB/s, 3 us a hop), one microbatch of 4
/// sequences per replica: every layer's compute longer than its collectives.
DesignPoint dp4_zero3() {
    DesignPoint p;
    p.dp = 4;
    p.microbatch = 4;
    p.zero_stage = 3;
    return p;
}

// bf16 weights and fp32 gradients (the helpers' grad_reduce_in_fp32) over the 4 ranks
const double kLayerGather = ring(2 * kLayerParams, 4, 300e9, 3e-6);
const double kLayerScatter = ring(4 * kLayerParams, 4, 300e9, 3e-6);
const double kTableGather = ring(2 * kVocab * kH, 4, 300e9, 3e-6);
const double kTableScatter = ring(4 * kVocab * kH, 4, 300e9, 3e-6);

TEST(FsdpEnds, TheEmbeddingsGatherOpensEachMicrobatchAndItsScatterClosesIt) {
    const auto e = prism::test::small_experiment();  // tied embeddings: one table
    const auto r = prism::evaluate_deterministic(e, dp4_zero3());
    ASSERT_EQ(r.profile.microbatches, 1);
    // exposed: the first layer's gather and the table's before the compute, the last layer's
    // scatter and the table's after it; every other layer's beside the compute, hidden
    EXPECT_NEAR(r.breakdown.fsdp_comm_exposed_s,
                kLayerGather + kLayerScatter + kTableGather + kTableScatter, 1e-12);
    // on the FSDP line, not the embedding's: that holds its compute alone, as at ZeRO-1
    DesignPoint zero1 = dp4_zero3();
    zero1.zero_stage = 1;
    const auto ref = prism::evaluate_deterministic(e, zero1);
    EXPECT_NEAR(r.breakdown.embedding_s, ref.breakdown.embedding_s, 1e-15);
    EXPECT_NEAR(r.breakdown.head_s, ref.breakdown.head_s, 1e-15);
    EXPECT_EQ(r.breakdown.dp_sync_exposed_s, 0.0);  // nothing left for the step
    EXPECT_NEAR(r.breakdown.lines_sum_s(), r.step_time_s, 1e-12 * r.step_time_s);
}

TEST(FsdpEnds, AnOutputLayerInTheRootIsExposedWithTheEmbeddingAndAUnitOfItsOwnHides) {
    auto e = prism::test::small_experiment();
    e.model.tied_embeddings = false;  // the output layer's own table
    e.training.fsdp_ends = Ends::root;
    const auto root = prism::evaluate_deterministic(e, dp4_zero3());
    e.training.fsdp_ends = Ends::units;
    const auto own = prism::evaluate_deterministic(e, dp4_zero3());
    const double layer = kLayerGather + kLayerScatter;
    // the root gathers both tables at the forward's start and scatters both after the
    // embedding's backward
    EXPECT_NEAR(root.breakdown.fsdp_comm_exposed_s, layer + 2 * (kTableGather + kTableScatter),
                1e-12);
    // a unit of its own: gathered beside the compute before it and scattered beside the
    // backward after it; its logits GEMMs (2 x 1,024 x 4 x 1,024 x 32,000 FLOPs a pass, ~1.3 ms)
    // outlast both (65 MB and 131 MB over NVLink, < 0.5 ms): hidden
    EXPECT_NEAR(own.breakdown.fsdp_comm_exposed_s, layer + kTableGather + kTableScatter, 1e-12);
    EXPECT_LT(kTableScatter, 0.5e-3);
    EXPECT_NEAR(own.breakdown.head_s, root.breakdown.head_s, 1e-12);
    EXPECT_NEAR(root.step_time_s - own.step_time_s, kTableGather + kTableScatter, 1e-12);
}

TEST(FsdpEnds, EachMicrobatchGathersAndScattersTheEndsAgain) {
    auto e = prism::test::small_experiment();
    e.hardware[0].gpu.peak_bf16_flop_per_s *= 10;  // a GPU ten times faster: the layers'
    e.hardware[0].gpu.hbm_bytes_per_s *= 10;       // compute no longer hides their collectives
    DesignPoint p = dp4_zero3();
    p.microbatch = 1;  // 4 microbatches of one sequence
    const auto r = prism::evaluate_deterministic(e, p);
    ASSERT_EQ(r.profile.microbatches, 4);
    // the layers' compute without FSDP (ZeRO-1: no collective in the passes): c_f, c_b
    DesignPoint zero1 = p;
    zero1.zero_stage = 1;
    const auto ref = prism::evaluate_deterministic(e, zero1);
    const double c_f = ref.breakdown.layer_forward_s, c_b = ref.breakdown.layer_backward_s;
    const double g = kLayerGather, s = kLayerScatter;
    // each layer: its gather beside its forward, its gather and then its scatter beside the
    // halves of its backward (fsdp_wrap); what a pair exposes is its excess over the compute
    const double per_layer =
        std::max(c_f, g) - c_f + std::max(c_b / 2, g) - c_b / 2 + std::max(c_b / 2, s) - c_b / 2;
    ASSERT_GT(per_layer, 0.0);
    // every microbatch: 8 layers' excess, the first gather, the last scatter and the table's
    EXPECT_NEAR(r.breakdown.fsdp_comm_exposed_s,
                4 * (8 * per_layer + g + s + kTableGather + kTableScatter), 1e-12);
    EXPECT_NEAR(r.breakdown.lines_sum_s(), r.step_time_s, 1e-12 * r.step_time_s);
}

TEST(FsdpEnds, MegatronFsdpGathersTheTablesOnceAStepAndScattersThemEveryMicrobatch) {
    auto e = prism::test::small_experiment();
    e.model.tied_embeddings = false;
    DesignPoint p = dp4_zero3();
    p.microbatch = 1;  // 4 microbatches of one sequence
    e.training.fsdp_ends = Ends::root;
    const auto root = prism::evaluate_deterministic(e, p);
    e.training.fsdp_ends = Ends::kept;
    const auto kept = prism::evaluate_deterministic(e, p);
    ASSERT_EQ(kept.profile.microbatches, 4);
    // both tables gathered in the first microbatch only: 3 of the 4 microbatches' gathers gone
    EXPECT_NEAR(root.step_time_s - kept.step_time_s, 3 * 2 * kTableGather, 1e-12);
    EXPECT_NEAR(root.breakdown.fsdp_comm_exposed_s - kept.breakdown.fsdp_comm_exposed_s,
                3 * 2 * kTableGather, 1e-12);
}

TEST(FsdpEnds, Fsdp2UnderPipelineParallelismGathersTheStageOnceForTheStep) {
    auto e = prism::test::small_experiment();
    e.training.fsdp_pp_unsharded = true;  // torchtitan with PP: ZeRO-1's traffic, at the step
    DesignPoint p = dp4_zero3();
    p.dp = 2;
    p.pp = 2;
    p.microbatch = 1;
    const auto r = prism::evaluate_deterministic(e, p);
    EXPECT_EQ(r.breakdown.fsdp_comm_exposed_s, 0.0);
    EXPECT_GT(r.breakdown.dp_sync_exposed_s, 0.0);
}

TEST(FsdpEnds, WithoutDataParallelismThereIsNothingToGather) {
    const auto e = prism::test::small_experiment();
    DesignPoint p = dp4_zero3();
    p.dp = 1;
    p.microbatch = 1;
    const auto r = prism::evaluate_deterministic(e, p);
    EXPECT_EQ(r.breakdown.fsdp_comm_exposed_s, 0.0);
}

}  // namespace
