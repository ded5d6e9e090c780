// PyTorch FSDP1's SHARD_GRAD_OP under Composer (llm-foundry's ZeRO-2;
// TrainingSpec::param_gather_every_microbatch with grad_reduce_every_microbatch): the parameters
// are resharded after every backward, so every microbatch's forward gathers each layer's again,
// and Composer wraps no FSDP microbatch in no_sync (its ddp_sync_context returns at once for a
// model that is not DistributedDataParallel), so every backward reduce-scatters the gradients;
// the step's own gather and scatter go. Hand calculations on the helpers' A100-like node.

#include <gtest/gtest.h>

#include <algorithm>

#include "model_test_helpers.hpp"
#include "src/model/deterministic.hpp"

namespace {

using prism::DesignPoint;
using prism::test::kH;
using prism::test::kLayerParams;
using prism::test::kVocab;
using prism::test::ring;

TEST(ShardGradOp, EachForwardGathersItsLayerAgainAndTheStepGathersNothing) {
    auto e = prism::test::small_experiment();
    e.training.overlap_param_gather = false;
    e.training.grad_reduce_every_microbatch = true;
    const DesignPoint p = prism::test::tp2_dp2_zero2();
    const auto reduce_only = prism::evaluate_deterministic(e, p);
    e.training.param_gather_every_microbatch = true;
    const auto fsdp = prism::evaluate_deterministic(e, p);

    // a layer's bf16 weights, half on each TP rank, gathered over the DP pair on NVLink (0.8 x
    // 300 GB/s, 3 us) before its forward: nothing prefetches it
    const double layer_ag = ring(2 * kLayerParams / 2, 2, 300e9, 3e-6);
    EXPECT_NEAR(fsdp.breakdown.layer_forward_s - reduce_only.breakdown.layer_forward_s, layer_ag,
                1e-12);
    EXPECT_DOUBLE_EQ(fsdp.breakdown.layer_backward_s, reduce_only.breakdown.layer_backward_s);
    // the fp32 gradients' ReduceScatter in each backward (grad_reduce_every_microbatch) and the
    // gather in each forward: 8 microbatches x 8 layers of both, exposed; the tied word
    // embedding's too, gathered in the embedding's forward and scattered in its backward, every
    // microbatch: all on the FSDP line, none on the embedding's
    const double layer_rs = ring(4 * kLayerParams / 2, 2, 300e9, 3e-6);
    const double embedding_ag = ring(2 * kVocab * kH / 2, 2, 300e9, 3e-6);
    const double embedding_rs = ring(4 * kVocab * kH / 2, 2, 300e9, 3e-6);
    EXPECT_NEAR(fsdp.breakdown.fsdp_comm_exposed_s,
                8 * (8 * (layer_ag + layer_rs) + embedding_ag + embedding_rs), 1e-9);
    EXPECT_NEAR(fsdp.breakdown.embedding_s, reduce_only.breakdown.embedding_s, 1e-12);
    EXPECT_NEAR(fsdp.breakdown.head_s, reduce_only.breakdown.head_s, 1e-12);
    // the step's AllGather of the stage's bf16 weights (its 8 layers and the embedding) is gone,
    // and with it the whole DP synchronization
    const double stage_params = (8 * kLayerParams + kVocab * kH) / 2;
    EXPECT_NEAR(reduce_only.breakdown.dp_sync_exposed_s, ring(2 * stage_params, 2, 300e9, 3e-6),
                1e-9);
    EXPECT_EQ(fsdp.breakdown.dp_sync_exposed_s, 0.0);
    const double extra = 8 * (8 * layer_ag + embedding_ag) - ring(2 * stage_params, 2, 300e9, 3e-6);
    EXPECT_NEAR(fsdp.step_time_s - reduce_only.step_time_s, extra, 1e-9);
    EXPECT_NEAR(fsdp.breakdown.lines_sum_s(), fsdp.step_time_s, 1e-9 * fsdp.step_time_s);
}

TEST(ShardGradOp, PrefetchedTheGatherRunsBesideTheForward) {
    auto e = prism::test::small_experiment();
    e.training.overlap_param_gather = true;
    e.hardware[0].overlap_compute_cost = 0.1;
    DesignPoint p;
    p.dp = 4;  // no TP: a forward of compute only
    p.zero_stage = 2;
    p.microbatch = 1;
    const auto once = prism::evaluate_deterministic(e, p);
    e.training.param_gather_every_microbatch = true;
    const auto every = prism::evaluate_deterministic(e, p);
    // the layer's bf16 weights gathered (g) over 4 ranks beside its forward compute (c), which
    // the collective slows by 0.1 of its time: the pair takes max(c + 0.1 g, g); the first
    // layer's gather has no compute before it: one g per forward of the 8 layers, g / 8 a layer
    const double c = once.breakdown.layer_forward_s;
    const double g = ring(2 * kLayerParams, 4, 300e9, 3e-6);
    EXPECT_NEAR(every.breakdown.layer_forward_s, std::max(c + 0.1 * g, g) + g / 8, 1e-12);
    EXPECT_LT(every.breakdown.layer_forward_s, c + g);
}

TEST(ShardGradOp, RoutedExpertsGatherOverTheExpertDataParallelGroup) {
    auto e = prism::test::small_moe_experiment();
    e.training.overlap_param_gather = false;
    DesignPoint p;
    p.dp = 4;
    p.ep = 2;  // expert-DP: 2 ranks, 2 apart
    p.zero_stage = 2;
    p.microbatch = 1;
    const auto once = prism::evaluate_deterministic(e, p);
    e.training.param_gather_every_microbatch = true;
    const auto every = prism::evaluate_deterministic(e, p);
    // an MoE layer: attention 4 h^2 + 4 h (biases), router 16 h, two layer norms 4 h gathered
    // over the 4 DP ranks; its 16 routed experts (h x 512 x 2 each) split over EP 2, over the
    // other 2; bf16
    const double shared = 4 * kH * kH + 24 * kH;
    const double routed = 16 * kH * 512 * 2;
    const double expected = ring(2 * shared, 4, 300e9, 3e-6) + ring(2 * routed / 2, 2, 300e9, 3e-6);
    EXPECT_NEAR(every.breakdown.layer_forward_s - once.breakdown.layer_forward_s, expected, 1e-12);
}

TEST(ShardGradOp, OnlyAtZeroStage2WithDataParallelism) {
    auto e = prism::test::small_experiment();
    auto with = e;
    with.training.param_gather_every_microbatch = true;
    for (int stage : {0, 1, 3}) {
        DesignPoint p = prism::test::tp2_dp2_zero2();
        p.zero_stage = stage;
        EXPECT_DOUBLE_EQ(prism::evaluate_deterministic(with, p).step_time_s,
                         prism::evaluate_deterministic(e, p).step_time_s)
            << "zero stage " << stage;
    }
    DesignPoint single = prism::test::tp2_dp2_zero2();
    single.dp = 1;
    EXPECT_DOUBLE_EQ(prism::evaluate_deterministic(with, single).step_time_s,
                     prism::evaluate_deterministic(e, single).step_time_s);
}

}  // namespace
