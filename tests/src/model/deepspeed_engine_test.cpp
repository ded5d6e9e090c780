// What DeepSpeed's engine adds (the deepspeed stack's). Its pipeline transfers
// (TrainingSpec::blocking_p2p): each stage receives its input and sends its output on the compute
// stream, the tensor split over the TP ranks before the send and gathered over TP on the
// receiving stage (deepspeed/runtime/pipe/engine.py: PartitionedTensor over the slice-parallel
// group; p2p.py: dist.send / dist.recv). Its BF16_Optimizer (TrainingSpec::bf16_optimizer): each
// microbatch's bf16 gradients added into the fp32 ones (bf16_optimizer.py, update_hp_grads).
// Hand calculations on the helpers' A100-like node below.

#include <gtest/gtest.h>

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

TEST(BlockingP2p, EveryPassTakesTwoTransfersOfItsTpShareAndOneGatherLonger) {
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
    // the busiest stage runs 16 microbatches, each a forward (receive, gather, send) and a
    // backward (the gradient's receive, gather, send)
    const double expected = 16 * 2 * (2 * transfer + gather);
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

TEST(BlockingP2p, SequenceParallelActivationsNeedNoGatherAndNoPipelineNoTransfer) {
    auto e = prism::test::small_experiment();
    e.training.blocking_p2p = true;
    DesignPoint p = tp2_pp2();
    p.sequence_parallel = true;
    const double activation = 2 * 1024 * kH;
    const double transfer = activation / 2 / (0.8 * 300e9) + 3e-6;
    EXPECT_NEAR(prism::evaluate_deterministic(e, p).breakdown.pp_comm_exposed_s,
                16 * 2 * 2 * transfer, 1e-9);

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
