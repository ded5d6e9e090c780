#include "src/model/memory.hpp"

#include <gtest/gtest.h>

#include "model_test_helpers.hpp"
#include "src/model/deterministic.hpp"

namespace {

using prism::DesignPoint;
using prism::Recompute;

// The helper model: h = 1024, a = 16, L = 8, s = 1024, V = 32000, f = 4h.
DesignPoint tp2_b2() {
    DesignPoint p;
    p.tp = 2;
    p.microbatch = 2;
    return p;
}

TEST(Memory, ActivationsPerLayerFollowKorthikantiByHand) {
    const auto e = prism::test::small_experiment();
    DesignPoint p = tp2_b2();

    // s b h (10 + 24/t + 5 a s / (h t)) = 1024*2*1024 * (10 + 12 + 5*16*1024/2048 = 40) bytes
    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, p), 2097152.0 * 62);
    p.sequence_parallel = true;  // s b h (34 + 5 a s / h) / t
    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, p),
                     2097152.0 * (34 + 80) / 2);
    p.recompute = Recompute::selective;  // 34 s b h / t
    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, p), 2097152.0 * 17);
    p.sequence_parallel = false;
    p.recompute = Recompute::full;  // the layer input only: 2 s b h
    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, p), 2097152.0 * 2);
}

TEST(Memory, FlashAttentionDropsTheScoreTerm) {
    auto e = prism::test::small_experiment();
    e.training.flash_attention = true;

    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, tp2_b2()),
                     2097152.0 * 22);
}

TEST(Memory, Fp8KeepsTheGemmInputsInOneByte) {
    auto e = prism::test::small_experiment();
    e.training.precision = prism::Precision::fp8;

    // unfused attention, per s b h, tp 2, no SP: replicated 10 - 1 (QKV input) - 1 (FC1 input)
    // = 8; sharded over t: Q 2 + projection input 1 + K, V 4 + FC1 output 2 x 4 + FC2 input
    // 1 x 4 = 19, / 2; scores 5 a s / h = 80, / 2
    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, tp2_b2()),
                     2097152.0 * (8 + 19.0 / 2 + 80.0 / 2));
    e.training.flash_attention = true;  // fused: no scores
    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, tp2_b2()),
                     2097152.0 * (8 + 19.0 / 2));
}

TEST(Memory, DropoutZeroStoresNoMasks) {
    auto e = prism::test::small_experiment();
    e.training.dropout = false;
    DesignPoint p = tp2_b2();

    // Korthikanti's 62 s b h less the two 1-byte masks (replicated), and the scores 5 a s^2 b
    // become the softmax output alone, 2 a s^2 b: 10 - 2 + 24 / 2 + 2 x 16 x 1024 / 1024 / 2
    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, p),
                     2097152.0 * (8 + 12 + 16));
    e.training.flash_attention = true;  // 8 + 24 / 2 = 20
    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, p), 2097152.0 * 20);
}

TEST(Memory, Bf16GradientBufferIsTwoBytesPerParameter) {
    auto e = prism::test::small_experiment();
    e.training.grad_reduce_in_fp32 = false;
    DesignPoint p = tp2_b2();
    p.dp = 4;
    // per layer 12 h^2 + 13 h = 12,596,224; 8 layers + V h = 32,768,000, over t = 2
    const double params = (8 * 12596224.0 + 32768000.0) / 2;

    const auto zero1 = [&] {
        p.zero_stage = 1;
        return prism::memory_per_gpu(e.model, e.training, p, 8);
    }();
    p.zero_stage = 2;
    const auto zero2 = prism::memory_per_gpu(e.model, e.training, p, 8);

    EXPECT_DOUBLE_EQ(zero1.grads_bytes, 2 * params);
    EXPECT_DOUBLE_EQ(zero1.weights_bytes, 2 * params);
    EXPECT_DOUBLE_EQ(zero1.optimizer_bytes, 3 * params);
    EXPECT_DOUBLE_EQ(zero2.grads_bytes, 0.5 * params);
}

// Pure bf16 (Composer's precision "bf16" with FSDP PURE): the bf16 weights are the master copy,
// the Adam moments and the gradients bf16, the logits and their gradient bf16. By hand on the
// small model at tp 2, microbatch 2, seq 1024, vocab 32,000, dp 4 without sharding: weights 2,
// gradients 2, optimizer 4 bytes per parameter (12 and 4 with amp's fp32 gradients), and the
// last stage's logits temporary 2 x 2 x b s V / t bytes (2 x 4 with amp).
TEST(Memory, PureBf16KeepsTwoByteGradientsAndFourByteOptimizerStateAndBf16Logits) {
    auto e = prism::test::small_experiment();
    DesignPoint p = tp2_b2();
    p.dp = 4;
    const double params = (8 * 12596224.0 + 32768000.0) / 2;
    const auto amp = prism::memory_per_gpu(e.model, e.training, p, 8);
    e.training.pure_bf16 = true;
    e.training.grad_reduce_in_fp32 = false;  // as the loader sets it with pure_bf16
    const auto pure = prism::memory_per_gpu(e.model, e.training, p, 8);

    EXPECT_DOUBLE_EQ(pure.weights_bytes, 2 * params);
    EXPECT_DOUBLE_EQ(pure.grads_bytes, 2 * params);
    EXPECT_DOUBLE_EQ(pure.optimizer_bytes, 4 * params);
    EXPECT_DOUBLE_EQ(amp.optimizer_bytes, 12 * params);
    const double logits = 2.0 * 1024 * 32000 / 2;  // b s V / t
    EXPECT_DOUBLE_EQ(amp.temporary_bytes - pure.temporary_bytes, 2 * (4 - 2) * logits);
    EXPECT_DOUBLE_EQ(prism::model_state_bytes_average(e.model, e.training, p), 8 * params);
}

TEST(Memory, ModelStateIsEighteenBytesPerParameterShardedByZero) {
    const auto e = prism::test::small_experiment();
    DesignPoint p = tp2_b2();
    p.dp = 4;
    // per layer 12 h^2 + 13 h = 12,596,224; 8 layers + V h = 100,769,792 + 32,768,000
    const double params = (8 * 12596224.0 + 32768000.0) / 2;

    const auto none = prism::memory_per_gpu(e.model, e.training, p, 8);
    p.zero_stage = 1;
    const auto zero1 = prism::memory_per_gpu(e.model, e.training, p, 8);
    p.zero_stage = 3;
    const auto zero3 = prism::memory_per_gpu(e.model, e.training, p, 8);

    EXPECT_DOUBLE_EQ(none.weights_bytes, 2 * params);
    EXPECT_DOUBLE_EQ(none.grads_bytes, 4 * params);
    EXPECT_DOUBLE_EQ(none.optimizer_bytes, 12 * params);
    EXPECT_DOUBLE_EQ(zero1.optimizer_bytes, 3 * params);
    EXPECT_DOUBLE_EQ(zero1.grads_bytes, 4 * params);
    EXPECT_DOUBLE_EQ(zero3.weights_bytes, 0.5 * params);
    EXPECT_DOUBLE_EQ(zero3.grads_bytes, params);
}

TEST(Memory, Fp8ParamsKeepTheLayersWeightMatricesInOneByte) {
    auto bf16 = prism::test::small_experiment();
    auto fp8 = bf16;
    fp8.training.precision = prism::Precision::fp8;
    fp8.training.fp8_params = true;
    DesignPoint p = tp2_b2();
    p.dp = 4;
    // per layer 12 h^2 = 12,582,912 matrix entries at 1 byte, 13 h = 13,312 biases and norms and
    // the V h = 32,768,000 embedding at 2 bytes; gradients and optimizer state unchanged
    const double params = (8 * 12596224.0 + 32768000.0) / 2;
    const double weights = (8 * (12582912.0 + 2 * 13312.0) + 2 * 32768000.0) / 2;

    const auto with = prism::memory_per_gpu(fp8.model, fp8.training, p, 8);
    EXPECT_DOUBLE_EQ(with.weights_bytes, weights);
    EXPECT_DOUBLE_EQ(with.grads_bytes, 4 * params);
    EXPECT_DOUBLE_EQ(with.optimizer_bytes, 12 * params);
    EXPECT_DOUBLE_EQ(prism::weight_bytes(fp8.model, fp8.training, 8, 1), 2 * weights);
    EXPECT_DOUBLE_EQ(prism::weight_bytes(bf16.model, bf16.training, 8, 1), 4 * params);

    // ZeRO-3: the shard, and the two gathered layers (this one and the prefetched one) in fp8
    p.zero_stage = 3;
    const auto zero3 = prism::memory_per_gpu(fp8.model, fp8.training, p, 8);
    const auto zero3_bf16 = prism::memory_per_gpu(bf16.model, bf16.training, p, 8);
    EXPECT_DOUBLE_EQ(zero3.weights_bytes, weights / 4);
    EXPECT_DOUBLE_EQ(zero3_bf16.temporary_bytes - zero3.temporary_bytes, 2 * 12582912.0 / 2);
}

TEST(Memory, FirstStageHoldsPipelineDepthMicrobatches) {
    EXPECT_DOUBLE_EQ(prism::inflight_microbatches(4, 1, 16), 4.0);
    EXPECT_DOUBLE_EQ(prism::inflight_microbatches(4, 1, 2), 2.0);
    // interleaved: (1 + (p - 1) / (p v)) = 1 + 3/8
    EXPECT_DOUBLE_EQ(prism::inflight_microbatches(4, 2, 16), 5.5);
}

TEST(Memory, StageActivationsAreLayersTimesInflightMicrobatches) {
    const auto e = prism::test::small_experiment();
    DesignPoint p = tp2_b2();
    p.pp = 2;

    const auto mem = prism::memory_per_gpu(e.model, e.training, p, 4);

    // 4 layers per stage x 2 microbatches in flight x 62 s b h
    EXPECT_DOUBLE_EQ(mem.activations_bytes, 4 * 2 * 2097152.0 * 62);
}

}  // namespace

namespace {

TEST(MemoryReserve, OneNcclCommunicatorPerParallelGroupOfMoreThanOneGpu) {
    DesignPoint p;
    EXPECT_EQ(prism::nccl_communicators(p), 0);  // one GPU
    p.tp = 8;
    p.pp = 4;
    p.dp = 16;
    EXPECT_EQ(prism::nccl_communicators(p), 3);  // tp, pp, dp
    p.pp = 1;
    p.cp = 2;
    EXPECT_EQ(prism::nccl_communicators(p), 4);  // tp, cp, dp and Megatron's d c group
}

TEST(MemoryReserve, DefaultsAreNcclsBuffersAndTheStatedContextAndWorkspace) {
    const prism::MemoryReserveSpec r = prism::default_memory_reserve();
    DesignPoint p;
    p.tp = 8;
    p.pp = 4;
    p.dp = 16;

    // NCCL src/init.cc: 4 MiB Simple + 120 x 640 x 8 x 8 LL128 + 8 x 512 x 8 x 16 LL per
    // connection, 16 connections: 16 x 9,633,792 = 154,140,672 B
    EXPECT_DOUBLE_EQ(r.nccl_bytes_per_communicator, 154140672.0);
    // 512 MiB context + 96 MiB workspaces + 3 communicators
    EXPECT_DOUBLE_EQ(prism::reserved_bytes(r, p), 536870912.0 + 100663296.0 + 3 * 154140672.0);
}

TEST(MemoryReserve, CountsInTheTotalThatDecidesFeasibility) {
    prism::Experiment e = prism::test::small_experiment();
    DesignPoint p;
    p.dp = 2;
    const prism::DeterministicResult bare = prism::evaluate_deterministic(e, p);
    e.memory_reserve.cuda_context_bytes = 1e9;
    e.memory_reserve.nccl_bytes_per_communicator = 1e8;

    const prism::DeterministicResult with = prism::evaluate_deterministic(e, p);

    EXPECT_DOUBLE_EQ(with.memory.reserved_bytes, 1e9 + 1e8);  // one communicator: dp
    EXPECT_NEAR(with.memory.total_bytes() - bare.memory.total_bytes(), 1.1e9, 1e-3);
    // a capacity between the two totals: the reserve makes the point infeasible
    e.hardware[0].gpu.hbm_bytes = bare.memory.total_bytes() + 0.5e9;
    EXPECT_FALSE(prism::evaluate_deterministic(e, p).feasible);
    e.memory_reserve = {};
    EXPECT_TRUE(prism::evaluate_deterministic(e, p).feasible);
}

}  // namespace
