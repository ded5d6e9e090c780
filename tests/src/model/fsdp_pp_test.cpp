// FSDP under pipeline parallelism as PyTorch runs it (TrainingSpec::fsdp_pp_unsharded, the
// torchtitan stack's): torchtitan shards each block with reshard_after_forward = False when PP is
// on, and the pipeline stage's backward keeps the gathered parameters and unsharded gradients
// until its last microbatch, then runs FSDP's post-backward (the reduce-scatter). So the stage
// holds ZeRO-1's memory and moves ZeRO-1's bytes once per step; hand calculations below.

#include <gtest/gtest.h>

#include "model_test_helpers.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/flops.hpp"
#include "src/model/memory.hpp"

namespace {

using prism::DesignPoint;

using prism::test::kH;
using prism::test::kLayerParams;
using prism::test::kVocab;
using prism::test::ring;
// a stage of pp 2: 4 layers and the embedding (first) or the output layer (last)
constexpr double kStageParams = 4 * kLayerParams + kVocab * kH;

/// pp 2 x dp 4 (the dp ranks 2 apart inside one 8-GPU node), FSDP, 4 microbatches of 1.
DesignPoint pp2_dp4_fsdp() {
    DesignPoint p;
    p.pp = 2;
    p.dp = 4;
    p.microbatch = 1;
    p.zero_stage = 3;
    return p;
}

TEST(FsdpUnderPipeline, StageHoldsFullWeightsAndGradientsAndShardedOptimizerState) {
    auto e = prism::test::small_experiment();
    e.training.fsdp_pp_unsharded = true;
    const DesignPoint p = pp2_dp4_fsdp();

    const auto m = prism::memory_of_stage(e.model, e.training, p, 4, 0, 4);

    // bf16 weights and fp32 gradients of the whole stage, Adam's 12 bytes over the 4 ranks
    EXPECT_DOUBLE_EQ(m.weights_bytes, 2 * kStageParams);
    EXPECT_DOUBLE_EQ(m.grads_bytes, 4 * kStageParams);
    EXPECT_DOUBLE_EQ(m.optimizer_bytes, 12 * kStageParams / 4);
    // per-layer FSDP (the default) shards all three
    e.training.fsdp_pp_unsharded = false;
    const auto sharded = prism::memory_of_stage(e.model, e.training, p, 4, 0, 4);
    EXPECT_DOUBLE_EQ(sharded.weights_bytes, 2 * kStageParams / 4);
    EXPECT_DOUBLE_EQ(sharded.grads_bytes, 4 * kStageParams / 4);
}

TEST(FsdpUnderPipeline, AverageModelStateFollowsTheShardingStage) {
    // Korthikanti's convention: 18 bytes per parameter over the t p = 2 model-parallel GPUs,
    // sharded over the 4 dp ranks where the stage shards them
    auto e = prism::test::small_experiment();
    const DesignPoint p = pp2_dp4_fsdp();
    const double per_gpu = prism::total_params(e.model) / 2;
    e.training.fsdp_pp_unsharded = true;
    EXPECT_DOUBLE_EQ(prism::model_state_bytes_average(e.model, e.training, p),
                     (2 + 4) * per_gpu + 12 * per_gpu / 4);
    e.training.fsdp_pp_unsharded = false;
    EXPECT_DOUBLE_EQ(prism::model_state_bytes_average(e.model, e.training, p), 18 * per_gpu / 4);
}

TEST(FsdpUnderPipeline, GathersOnceAndReduceScattersOnceAfterTheLastBackward) {
    auto e = prism::test::small_experiment();
    e.model.tied_embeddings = false;  // no embedding AllReduce between the first and last stage
    e.training.fsdp_pp_unsharded = true;
    e.training.overlap_grad_reduce = true;  // FSDP2's post-backward runs after the backward anyway
    e.training.overlap_param_gather = false;
    const DesignPoint p = pp2_dp4_fsdp();

    const auto r = prism::evaluate_deterministic(e, p);

    // one ReduceScatter of fp32 gradients (FSDP2's reduce_dtype = float32, torchtitan's default:
    // grad_reduce_in_fp32) and one AllGather of 2-byte weights of the stage over the 4 dp ranks
    // on NVLink, both exposed; no per-layer gather or scatter in the passes
    EXPECT_NEAR(r.breakdown.dp_sync_exposed_s,
                ring(4 * kStageParams, 4, 300e9, 3e-6) + ring(2 * kStageParams, 4, 300e9, 3e-6),
                1e-12);
    EXPECT_EQ(r.breakdown.fsdp_comm_exposed_s, 0.0);
    for (const auto* list : {&r.profile.layer_forward, &r.profile.layer_backward}) {
        for (const auto& seg : *list) {
            for (const auto& op : seg.ops) {
                EXPECT_NE(op.cls, prism::KernelClass::allgather);
                EXPECT_NE(op.cls, prism::KernelClass::reducescatter);
            }
        }
    }
    // per-layer FSDP gathers every layer in every microbatch's forward and backward
    e.training.fsdp_pp_unsharded = false;
    const auto per_layer = prism::evaluate_deterministic(e, p);
    int gathers = 0;
    for (const auto& seg : per_layer.profile.layer_backward) {
        for (const auto& op : seg.ops) gathers += op.cls == prism::KernelClass::allgather;
    }
    EXPECT_EQ(gathers, 1);
    EXPECT_EQ(per_layer.breakdown.dp_sync_exposed_s, 0.0);
}

TEST(FsdpUnderPipeline, WithoutPipelineParallelismFsdpStaysPerLayer) {
    auto e = prism::test::small_experiment();
    DesignPoint p = pp2_dp4_fsdp();
    p.pp = 1;
    const auto per_layer = prism::memory_per_gpu(e.model, e.training, p, 4);
    e.training.fsdp_pp_unsharded = true;

    const auto flagged = prism::memory_per_gpu(e.model, e.training, p, 4);

    EXPECT_DOUBLE_EQ(flagged.weights_bytes, per_layer.weights_bytes);
    EXPECT_DOUBLE_EQ(flagged.weights_bytes,
                     2 * (8 * kLayerParams + kVocab * kH) / 4);  // tied: one matrix at pp 1
}

}  // namespace
