// What DeepSpeed's engine adds (the deepspeed stack's). Its pipeline transfers
// (TrainingSpec::blocking_p2p): each stage receives its input and sends its output on the compute
// stream, the tensor split over the TP ranks before the send and gathered over TP on the
// receiving stage (deepspeed/runtime/pipe/engine.py: PartitionedTensor over the slice-parallel
// group; p2p.py: dist.send / dist.recv). Its BF16_Optimizer (TrainingSpec::bf16_optimizer): each
// microbatch's bf16 gradients added into the fp32 ones (bf16_optimizer.py, update_hp_grads).
// Hand calculations on the helpers' A100-like node below.

#include <gtest/gtest.h>

#include <algorithm>

#include "model_test_helpers.hpp"
#include "src/model/design_space.hpp"
#include "src/model/deterministic.hpp"

namespace {

using prism::DesignPoint;
using prism::test::kH;
using prism::test::ring;

/// tp 2 x pp 2 in one node (NVLink for both), no sequence parallelism (DeepSpeed's Megatron has
/// none), 16 microbatches of one 1,024-token sequence.
DesignPoint tp2_pp2() {
    DesignPoint p;
    p.tp = 2;
    p.pp = 2;
    p.microbatch = 1;
    p.sequence_parallel = false;
    return p;
}

TEST(BlockingP2p, EachOfTwoStagesSendsInOnePassAndReceivesAndGathersInTheOther) {
    auto e = prism::test::small_experiment();
    e.training.blocking_p2p = true;
    const DesignPoint p = tp2_pp2();
    const auto r = prism::evaluate_deterministic(e, p);

    // one microbatch's activation, bf16: 2 x 1024 tokens x h bytes; each TP rank sends half of
    // it to the next stage at 0.8 x 300 GB/s (+ 3 us), and the receiver gathers the whole of it
    // over its TP pair (a ring AllGather of 2 ranks)
    const double activation = 2 * 1024 * kH;
    const double transfer = activation / 2 / (0.8 * 300e9) + 3e-6;
    const double gather = ring(activation, 2, 300e9, 3e-6);
    // two stages, 16 microbatches: the first sends its output in the forward and receives and
    // gathers the gradient in the backward, the second receives and gathers the activation in
    // the forward and sends the gradient in the backward: each stage two transfers and one
    // gather per microbatch
    const double expected = 16 * (2 * transfer + gather);
    EXPECT_NEAR(r.breakdown.pp_comm_exposed_s, expected, 1e-9 * expected);
    // nothing left on a stream of its own between the stages
    EXPECT_EQ(r.breakdown.pp_comm_s, 0.0);
    EXPECT_EQ(r.profile.p2p.time_s, 0.0);
    EXPECT_NEAR(r.breakdown.lines_sum_s(), r.step_time_s, 1e-9 * r.step_time_s);

    // Megatron's schedule (the default): the same bytes on their own stream, a lag between the
    // stages; the passes carry no transfer
    e.training.blocking_p2p = false;
    const auto overlapped = prism::evaluate_deterministic(e, p);
    EXPECT_EQ(overlapped.breakdown.pp_comm_exposed_s, 0.0);
    EXPECT_NEAR(overlapped.profile.p2p.time_s, transfer, 1e-12);
    EXPECT_DOUBLE_EQ(overlapped.breakdown.compute_s, r.breakdown.compute_s);
    EXPECT_GT(r.step_time_s, overlapped.step_time_s);
}

TEST(BlockingP2p, AMiddleStageReceivesGathersAndSendsInEveryPass) {
    auto e = prism::test::small_experiment();
    e.training.blocking_p2p = true;
    DesignPoint p = tp2_pp2();
    p.pp = 4;  // 8 GPUs: one node, NVLink for the pipeline too
    const auto r = prism::evaluate_deterministic(e, p);
    const double activation = 2 * 1024 * kH;
    const double transfer = activation / 2 / (0.8 * 300e9) + 3e-6;
    const double gather = ring(activation, 2, 300e9, 3e-6);
    // stages 1 and 2 of four: in each of 16 microbatches' forward and backward a receive, its
    // gather and a send
    const double expected = 16 * 2 * (2 * transfer + gather);
    EXPECT_NEAR(r.breakdown.pp_comm_exposed_s, expected, 1e-9 * expected);
    EXPECT_NEAR(r.breakdown.lines_sum_s(), r.step_time_s, 1e-9 * r.step_time_s);
}

TEST(BlockingP2p, SequenceParallelActivationsNeedNoGatherAndNoPipelineNoTransfer) {
    auto e = prism::test::small_experiment();
    e.training.blocking_p2p = true;
    DesignPoint p = tp2_pp2();
    p.sequence_parallel = true;
    const double activation = 2 * 1024 * kH;
    const double transfer = activation / 2 / (0.8 * 300e9) + 3e-6;
    EXPECT_NEAR(prism::evaluate_deterministic(e, p).breakdown.pp_comm_exposed_s, 16 * 2 * transfer,
                1e-9);

    p.pp = 1;
    const auto single = prism::evaluate_deterministic(e, p);
    EXPECT_EQ(single.breakdown.pp_comm_exposed_s, 0.0);
}

}  // namespace

namespace {

using prism::test::kLayerParams;

// DeepSpeed's BF16_Optimizer (TrainingSpec::bf16_optimizer): after each microbatch's backward,
// hp_grad.add_(lp_grad.to(fp32)) over the stage's parameters: a cast (read 2, write 4 bytes) and
// an add (read 4 + 4, write 4), 18 bytes per parameter, at the HBM's 0.8 x 2 TB/s.
TEST(Bf16Optimizer, EveryLayersBackwardAddsItsBf16GradientsIntoTheFp32Ones) {
    auto e = prism::test::small_experiment();
    DesignPoint p;
    p.tp = 2;
    p.microbatch = 1;
    const auto fused = prism::evaluate_deterministic(e, p);
    e.training.bf16_optimizer = true;
    const auto copied = prism::evaluate_deterministic(e, p);

    // the layer's parameters on one of the 2 TP ranks (its norms counted whole: 13 h of 12 h^2)
    const double copy_s = 18 * kLayerParams / 2 / (0.8 * 2e12);
    EXPECT_NEAR(copied.breakdown.layer_backward_s - fused.breakdown.layer_backward_s, copy_s,
                1e-12);
    EXPECT_DOUBLE_EQ(copied.breakdown.layer_forward_s, fused.breakdown.layer_forward_s);
    // 16 microbatches of 8 layers on the one stage
    EXPECT_NEAR(copied.breakdown.compute_s - fused.breakdown.compute_s, 16 * 8 * copy_s, 1e-9);
    // and the tied word embedding's V h / 2 in the embedding's backward, every microbatch (one
    // tensor: the output layer shares it on the one stage)
    const double embedding_copy_s = 18 * prism::test::kVocab * kH / 2 / (0.8 * 2e12);
    EXPECT_NEAR(copied.breakdown.embedding_s - fused.breakdown.embedding_s, 16 * embedding_copy_s,
                1e-9);
    EXPECT_DOUBLE_EQ(copied.breakdown.head_s, fused.breakdown.head_s);
    // over two stages the output layer holds a copy of its own, on the last stage
    {
        DesignPoint two = p;
        two.pp = 2;
        auto plain = e;
        plain.training.bf16_optimizer = false;
        const auto a = prism::evaluate_deterministic(e, two);
        const auto b = prism::evaluate_deterministic(plain, two);
        EXPECT_NEAR(a.profile.head_backward.empty()
                        ? 0.0
                        : prism::deterministic_time(a.profile.head_backward) -
                              prism::deterministic_time(b.profile.head_backward),
                    embedding_copy_s, 1e-12);
        EXPECT_NEAR(prism::deterministic_time(a.profile.embedding_backward) -
                        prism::deterministic_time(b.profile.embedding_backward),
                    embedding_copy_s, 1e-12);
    }

    // only with fp32 gradients beside bf16 weights: not with bf16 gradients, pure bf16 or fp8
    e.training.grad_reduce_in_fp32 = false;
    EXPECT_DOUBLE_EQ(prism::evaluate_deterministic(e, p).breakdown.layer_backward_s, [&] {
        auto plain = e;
        plain.training.bf16_optimizer = false;
        return prism::evaluate_deterministic(plain, p).breakdown.layer_backward_s;
    }());
    e.training.grad_reduce_in_fp32 = true;
    // nor at ZeRO stage 2 or 3, where DeepSpeed takes its ZeRO optimizers instead
    for (int stage : {2, 3}) {
        DesignPoint zero = p;
        zero.dp = 2;
        zero.zero_stage = stage;
        auto plain = e;
        plain.training.bf16_optimizer = false;
        EXPECT_DOUBLE_EQ(prism::evaluate_deterministic(e, zero).breakdown.layer_backward_s,
                         prism::evaluate_deterministic(plain, zero).breakdown.layer_backward_s)
            << "zero stage " << stage;
    }
    e.training.precision = prism::Precision::fp8;
    auto fp8_plain = e;
    fp8_plain.training.bf16_optimizer = false;
    EXPECT_DOUBLE_EQ(prism::evaluate_deterministic(e, p).breakdown.layer_backward_s,
                     prism::evaluate_deterministic(fp8_plain, p).breakdown.layer_backward_s);
}

}  // namespace

namespace {

// DeepSpeed's pipeline engine runs plain 1F1B and refuses ZeRO-2 / 3 beside pipeline parallelism
// (engine.py: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"): such points are
// filtered out with the reason, not evaluated as a schedule DeepSpeed cannot run.
TEST(BlockingP2p, PointsDeepSpeedsPipelineCannotRunAreFilteredWithTheReason) {
    auto e = prism::test::small_experiment();
    e.training.blocking_p2p = true;
    DesignPoint p = tp2_pp2();
    p.dp = 2;
    EXPECT_EQ(prism::filter_reason(e, p), std::nullopt);
    p.zero_stage = 2;
    EXPECT_EQ(prism::filter_reason(e, p),
              "DeepSpeed's pipeline (blocking_p2p) takes ZeRO stage 0-1");
    p.pp = 1;  // ZeRO-2 without a pipeline runs
    EXPECT_EQ(prism::filter_reason(e, p), std::nullopt);
    p.pp = 2;
    p.zero_stage = 1;
    p.interleave = 2;
    EXPECT_EQ(prism::filter_reason(e, p),
              "DeepSpeed's pipeline (blocking_p2p) has no interleaved schedule");
    e.training.blocking_p2p = false;  // Megatron's schedule runs both
    EXPECT_EQ(prism::filter_reason(e, p), std::nullopt);
    p.zero_stage = 3;
    EXPECT_EQ(prism::filter_reason(e, p), std::nullopt);
}

}  // namespace

namespace {

using prism::test::kVocab;

// DeepSpeed's ZeRO-2 (TrainingSpec::grad_reduce_every_microbatch): every microbatch's backward
// reduce-scatters the gradients it produced (deepspeed/runtime/zero/stage_1_and_2.py,
// reduce_ready_partitions_and_remove_grads: `if self.partition_gradients or
// self.is_gradient_accumulation_boundary()`), on the compute stream unless overlap_comm; the
// step keeps only the parameter AllGather after the optimizer.

TEST(Zero2EveryMicrobatch, EachBackwardReduceScattersItsGradientsOnTheComputeStream) {
    auto e = prism::test::small_experiment();
    e.training.overlap_param_gather = false;
    const DesignPoint p = prism::test::tp2_dp2_zero2();
    const auto once = prism::evaluate_deterministic(e, p);
    e.training.grad_reduce_every_microbatch = true;
    const auto every = prism::evaluate_deterministic(e, p);

    // fp32 gradients (4 bytes) of a layer's half on each TP rank, a ring ReduceScatter over the
    // DP pair on NVLink (0.8 x 300 GB/s, 3 us)
    const double layer_rs = ring(4 * kLayerParams / 2, 2, 300e9, 3e-6);
    EXPECT_NEAR(every.breakdown.layer_backward_s - once.breakdown.layer_backward_s, layer_rs,
                1e-12);
    EXPECT_DOUBLE_EQ(every.breakdown.layer_forward_s, once.breakdown.layer_forward_s);
    // the tied word embedding's gradient in the embedding's backward, every microbatch; on the
    // FSDP line with the layers' (8 microbatches x 8 layers), serial with the compute
    const double embedding_rs = ring(4 * kVocab * kH / 2, 2, 300e9, 3e-6);
    EXPECT_NEAR(every.breakdown.fsdp_comm_exposed_s, 8 * (8 * layer_rs + embedding_rs), 1e-9);
    EXPECT_EQ(once.breakdown.fsdp_comm_exposed_s, 0.0);
    EXPECT_NEAR(every.breakdown.embedding_s, once.breakdown.embedding_s, 1e-12);
    EXPECT_NEAR(every.breakdown.head_s, once.breakdown.head_s, 1e-12);
    // the step's own ReduceScatter (the stage's 8 layers and the embedding, once) is gone; its
    // AllGather of the bf16 weights stays
    const double stage_params = (8 * kLayerParams + kVocab * kH) / 2;
    const double step_rs = ring(4 * stage_params, 2, 300e9, 3e-6);
    const double step_ag = ring(2 * stage_params, 2, 300e9, 3e-6);
    EXPECT_NEAR(once.breakdown.dp_sync_exposed_s, step_rs + step_ag, 1e-9);
    EXPECT_NEAR(every.breakdown.dp_sync_exposed_s, step_ag, 1e-9);
    const double extra = 8 * (8 * layer_rs + embedding_rs) - step_rs;
    EXPECT_NEAR(every.step_time_s - once.step_time_s, extra, 1e-9);
    EXPECT_NEAR(every.breakdown.lines_sum_s(), every.step_time_s, 1e-9 * every.step_time_s);
}

TEST(Zero2EveryMicrobatch, WithOverlapCommTheScatterRunsBesideTheBackward) {
    auto e = prism::test::small_experiment();
    e.training.overlap_grad_reduce = true;
    e.hardware[0].overlap_compute_cost = 0.1;
    DesignPoint p;
    p.dp = 4;  // no TP: a backward of compute only
    p.zero_stage = 2;
    p.microbatch = 1;
    const auto once = prism::evaluate_deterministic(e, p);
    e.training.grad_reduce_every_microbatch = true;
    const auto every = prism::evaluate_deterministic(e, p);
    // the layer's fp32 gradients scattered (g) over 4 ranks beside its backward compute (c),
    // which the collective slows by 0.1 of its time: the pair takes max(c + 0.1 g, g); the last
    // layer's scatter (the first layer's, the backward's last) has no compute after it: one g per
    // backward of the 8 layers, g / 8 a layer
    const double c = once.breakdown.layer_backward_s;
    const double g = ring(4 * kLayerParams, 4, 300e9, 3e-6);
    EXPECT_NEAR(every.breakdown.layer_backward_s, std::max(c + 0.1 * g, g) + g / 8, 1e-12);
    EXPECT_LT(every.breakdown.layer_backward_s, c + g);  // hidden in part
}

TEST(Zero2EveryMicrobatch, RoutedExpertsReduceOverTheExpertDataParallelGroup) {
    auto e = prism::test::small_moe_experiment();
    DesignPoint p;
    p.dp = 4;
    p.ep = 2;  // expert-DP: 2 ranks, 2 apart
    p.zero_stage = 2;
    p.microbatch = 1;
    const auto once = prism::evaluate_deterministic(e, p);
    e.training.grad_reduce_every_microbatch = true;
    const auto every = prism::evaluate_deterministic(e, p);
    // an MoE layer: attention 4 h^2 + 4 h (biases), router 16 h, two layer norms 4 h over the 4
    // DP ranks; its 16 routed experts (h x 512 x 2 each) split over EP 2, over the other 2
    const double shared = 4 * kH * kH + 24 * kH;
    const double routed = 16 * kH * 512 * 2;
    const double expected = ring(4 * shared, 4, 300e9, 3e-6) + ring(4 * routed / 2, 2, 300e9, 3e-6);
    EXPECT_NEAR(every.breakdown.layer_backward_s - once.breakdown.layer_backward_s, expected,
                1e-12);
}

TEST(Zero2EveryMicrobatch, OnlyAtZeroStage2) {
    // stage 1 reduces at the accumulation boundary (the step's reduction); stage 3 already
    // reduce-scatters per layer and microbatch (FSDP); without DP nothing is reduced
    auto e = prism::test::small_experiment();
    auto with = e;
    with.training.grad_reduce_every_microbatch = true;
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

namespace {

// DeepSpeed's ZeRO-1/2 optimizer allocates its contiguous gradient bucket whole in every
// backward (stage_1_and_2.py, setup_buckets: torch.empty(reduce_bucket_size, dtype=the 16-bit
// parameters'), a second one with overlap_comm): reduce_bucket_size x 2 bytes, whatever the
// model's size; not under the BF16_Optimizer (bf16 with fp32 gradients at ZeRO 0-1). Its ZeRO-3
// optimizer holds one bucket from its start (stage3.py), whatever overlap_comm.
TEST(DeepSpeedGradBucket, TheBucketIsAllocatedWholeBesideTheGradients) {
    auto e = prism::test::small_experiment();
    DesignPoint p;
    p.tp = 2;
    p.dp = 2;
    p.zero_stage = 2;
    p.microbatch = 1;
    const auto without = prism::evaluate_deterministic(e, p);
    e.training.reduce_bucket_elements = 5e8;
    const auto with = prism::evaluate_deterministic(e, p);
    EXPECT_DOUBLE_EQ(with.memory.temporary_bytes - without.memory.temporary_bytes, 1e9);
    EXPECT_DOUBLE_EQ(with.memory.grads_bytes, without.memory.grads_bytes);
    EXPECT_DOUBLE_EQ(with.step_time_s, without.step_time_s);
    // two buckets with overlap_comm
    auto overlap = e;
    overlap.training.overlap_grad_reduce = true;
    auto overlap_without = overlap;
    overlap_without.training.reduce_bucket_elements = 0;
    EXPECT_DOUBLE_EQ(prism::evaluate_deterministic(overlap, p).memory.temporary_bytes -
                         prism::evaluate_deterministic(overlap_without, p).memory.temporary_bytes,
                     2e9);
    // ZeRO-1 with bf16 gradients: the same optimizer and bucket; with fp32 gradients DeepSpeed
    // takes the BF16_Optimizer (no bucket); ZeRO-0 another (none); ZeRO-3 its own (one)
    const auto bucket = [&](const prism::Experiment& x, int stage) {
        DesignPoint q = p;
        q.zero_stage = stage;
        auto y = x;
        y.training.reduce_bucket_elements = 0;
        return prism::evaluate_deterministic(x, q).memory.temporary_bytes -
               prism::evaluate_deterministic(y, q).memory.temporary_bytes;
    };
    auto bf16_grads = e;
    bf16_grads.training.grad_reduce_in_fp32 = false;
    bf16_grads.training.bf16_optimizer = true;
    EXPECT_DOUBLE_EQ(bucket(bf16_grads, 1), 1e9);
    auto fp32_grads = e;
    fp32_grads.training.bf16_optimizer = true;
    EXPECT_DOUBLE_EQ(bucket(fp32_grads, 1), 0.0);
    EXPECT_DOUBLE_EQ(bucket(fp32_grads, 2), 1e9);  // ZeRO-2: DeepSpeedZeroOptimizer again
    EXPECT_DOUBLE_EQ(bucket(e, 0), 0.0);
    EXPECT_DOUBLE_EQ(bucket(e, 3), 1e9);
    EXPECT_DOUBLE_EQ(bucket(overlap, 3), 1e9);
}

}  // namespace

namespace {

// The copy over an MoE layer's parameters on this GPU: its attention, router and norms whole
// (tp 1), its 16 routed experts (h x 512 x 2 each) over EP 2.
TEST(Bf16Optimizer, AnMoeLayersCopyTakesItsRoutedExpertsOverExpertParallelism) {
    auto e = prism::test::small_moe_experiment();
    DesignPoint p;
    p.dp = 2;
    p.ep = 2;
    p.microbatch = 1;
    const auto fused = prism::evaluate_deterministic(e, p);
    e.training.bf16_optimizer = true;
    const auto copied = prism::evaluate_deterministic(e, p);
    const double shared = 4 * kH * kH + 24 * kH;
    const double routed = 16 * kH * 512 * 2;
    EXPECT_NEAR(copied.breakdown.layer_backward_s - fused.breakdown.layer_backward_s,
                18 * (shared + routed / 2) / (0.8 * 2e12), 1e-12);
}

}  // namespace
