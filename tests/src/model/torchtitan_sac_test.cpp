// torchtitan's op-level selective activation checkpointing under torch.compile
// (TrainingSpec::selective_recompute = torchtitan_op; docs/torchtitan_sac.md): the activations
// its policy stores, the forward work the compiled backward re-runs and the FLOPs it adds, each
// against a hand calculation (the helpers' round-number model, and Llama 3.1 8B's closed forms).

#include <gtest/gtest.h>

#include <algorithm>

#include "src/common/error.hpp"
#include "src/model/collectives.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/flops.hpp"
#include "src/model/memory.hpp"
#include "src/model/topology.hpp"
#include "tests/src/model/model_test_helpers.hpp"

namespace {

using prism::DesignPoint;
using prism::Experiment;
using prism::Recompute;
using Policy = prism::TrainingSpec::SelectiveRecompute;

/// The helpers' model (h 1024, a 16, d 64, f 4096, s 1024) with GQA, 4 KV heads (g d = 256),
/// fused attention, torchtitan's op-level SAC.
Experiment small_gqa_op_sac() {
    Experiment e = prism::test::small_experiment();
    e.model.kv_heads = 4;
    e.model.gated_mlp = true;
    e.training.flash_attention = true;
    e.training.dropout = false;
    e.training.selective_recompute = Policy::torchtitan_op;
    return e;
}

/// Llama 3.1 8B's layer shape: h 4096, 32 heads of 128, 8 KV heads, f 14336, s 8192.
Experiment llama3_8b_op_sac() {
    Experiment e = small_gqa_op_sac();
    e.model.layers = 32;
    e.model.hidden = 4096;
    e.model.heads = 32;
    e.model.kv_heads = 8;
    e.model.ffn = 14336;
    e.model.vocab = 128256;
    e.model.seq = 8192;
    return e;
}

DesignPoint selective(int tp, int microbatch) {
    DesignPoint p;
    p.tp = tp;
    p.dp = 16 / (tp * microbatch);
    p.microbatch = microbatch;
    p.sequence_parallel = tp > 1;
    p.recompute = Recompute::selective;
    return p;
}

// Per token and layer, bf16 (h 1024, a d 1024, g d 256, f 4096): the block input x 2 h = 2048,
// wq's output 2 a d = 2048, wv's 2 g d = 512, SDPA's output 2 a d = 2048, w1's 2 f = 8192:
// 14848 bytes; microbatch 2 x 1024 tokens. With tp 2 and SP, x on the sequence shard and wo's
// reduce-scatter output 2 h saved: (2048 + 2048 + 512 + 2048 + 8192 + 2048) / 2 = 8448.
TEST(TorchtitanOpSac, StoresTheSavedOpsOutputsByHand) {
    Experiment e = small_gqa_op_sac();
    const double tokens = 2 * 1024.0;

    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, selective(1, 2)),
                     tokens * 14848);
    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, selective(2, 2)),
                     tokens * 8448);
    // FP8 and dropout change nothing: the mm outputs are bf16, the FP8 copies and the dropout
    // masks are rebuilt in the backward
    e.training.precision = prism::Precision::fp8;
    e.training.dropout = true;
    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, selective(1, 2)),
                     tokens * 14848);
}

// The recompute buffer is the larger of the two parts the backward rebuilds, per token: the MLP's
// (the residual sum 2 h, ffn_norm's output 2 h, w3's output and the SiLU product 2 x 2 f =
// 20480 bytes) and the attention's (attention_norm's output 2 h, Q and K after RoPE 2 a d + 2 g d,
// the repeated K and V 2 x 2 a d = 8704). One stage (pp 1) also holds the fp32 logits and their
// gradient, 2 x 4 x tokens x V; no FSDP gathers at ZeRO 0.
TEST(TorchtitanOpSac, RecomputeBufferIsTheLargerRebuiltPartByHand) {
    const Experiment e = small_gqa_op_sac();
    const DesignPoint p = selective(1, 2);
    const double tokens = 2 * 1024.0;

    const prism::MemoryBreakdown m = prism::memory_per_gpu(e.model, e.training, p, 1);
    EXPECT_DOUBLE_EQ(m.temporary_bytes, tokens * 20480 + 2 * 4 * tokens * 32000);
}

// Llama 3.1 8B, tp 1: 2 h + 2 a d + 2 g d + 2 a d + 2 f = 8192 + 8192 + 2048 + 8192 + 28672 =
// 55296 bytes per token and layer; Megatron's selective (core_attn, nothing with fused
// attention; no dropout) keeps the norms' inputs 4 h, the QKV and MLP inputs 4 h, Q, K, V and
// the projection input 2 (a d + 2 g d + a d) and the MLP's 6 f: 139264.
TEST(TorchtitanOpSac, Llama3EightBStoresFiftyFiveKilobytesPerTokenAndLayer) {
    Experiment e = llama3_8b_op_sac();
    const DesignPoint p = selective(1, 1);

    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, p), 8192.0 * 55296);
    e.training.selective_recompute = Policy::megatron;
    EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(e.model, e.training, p), 8192.0 * 139264);
}

// Points that are not selective ignore the policy.
TEST(TorchtitanOpSac, NoneAndFullIgnoreThePolicy) {
    const Experiment op = small_gqa_op_sac();
    Experiment megatron = op;
    megatron.training.selective_recompute = Policy::megatron;

    for (const Recompute r : {Recompute::none, Recompute::full}) {
        DesignPoint p = selective(1, 2);
        p.recompute = r;
        EXPECT_DOUBLE_EQ(prism::activation_bytes_per_layer(op.model, op.training, p),
                         prism::activation_bytes_per_layer(megatron.model, megatron.training, p));
        EXPECT_DOUBLE_EQ(prism::evaluate_deterministic(op, p).step_time_s,
                         prism::evaluate_deterministic(megatron, p).step_time_s);
    }
}

// Hardware FLOPs per sequence: each layer re-runs wk (2 s h g d), w3 (2 s h f) and, without TP's
// saved reduce-scatter output, wo (2 s a d h): Llama 3.1 8B, 32 layers, s 8192.
TEST(TorchtitanOpSac, HardwareFlopsAddTheRecomputedGemmsClosedForm) {
    const Experiment e = llama3_8b_op_sac();
    const double s = 8192, h = 4096, kv = 8 * 128.0, f = 14336;
    const double none = prism::hardware_flops_per_step(e.model, e.training, Recompute::none, 1);

    EXPECT_DOUBLE_EQ(
        prism::hardware_flops_per_step(e.model, e.training, Recompute::selective, 1) - none,
        32 * (2 * s * h * kv + 2 * s * h * f + 2 * s * h * h));
    EXPECT_DOUBLE_EQ(
        prism::hardware_flops_per_step(e.model, e.training, Recompute::selective, 1, true) - none,
        32 * (2 * s * h * kv + 2 * s * h * f));
}

// The recomputed work in the layer's backward, by hand on the roofline (peak 300 TFLOP/s, eff(F)
// = 0.7 F / (F + 1e9), HBM 2e12 x 0.8), tp 1, microbatch 1 (M = 1024 tokens), bf16: the GEMMs
// wo (a d -> h), w3 (h -> f) and wk (h -> g d); the residual add (reads 2 x 2 h, writes 2 h
// bytes per token), the two RMSNorms (4 h each) and SiLU * mul (reads 2 x 2 f, writes 2 f).
double gemm_s(double rows, double k, double n) {
    const double flops = 2 * rows * k * n;
    const double compute = (flops + 1e9) / (300e12 * 0.7);
    const double memory = 2 * (rows * k + k * n + rows * n) / 1.6e12;
    return std::max(compute, memory);
}

double backward_s(const Experiment& e, const DesignPoint& p) {
    return prism::evaluate_deterministic(e, p).breakdown.layer_backward_s;
}

TEST(TorchtitanOpSac, BackwardRerunsWkWoW3AndTheElementwiseOpsByHand) {
    const Experiment e = small_gqa_op_sac();
    const DesignPoint p = selective(1, 1);
    DesignPoint none = p;
    none.recompute = Recompute::none;
    const double M = 1024, h = 1024, f = 4096, kv = 256;

    const double gemms = gemm_s(M, h, h) + gemm_s(M, h, f) + gemm_s(M, h, kv);
    const double elementwise = (6 * M * h + 4 * M * h + 2 * M * 3 * f + 4 * M * h) / 1.6e12;
    EXPECT_NEAR(backward_s(e, p) - backward_s(e, none), gemms + elementwise, 1e-12);
}

// tp 2 with sequence parallelism: wo's reduce-scatter output is saved, so wo is not re-run; w3
// and wk re-run on their column shards (f / 2, g d / 2), the elementwise ops on the sequence
// shard but SiLU * mul (on the f / 2 columns), and the two norms' outputs are gathered again
// (exposed, as the forward's all-gathers: 2 M h bytes over the tp link, timed by the collective
// model).
TEST(TorchtitanOpSac, WithSequenceParallelTpWoIsNotRerunAndTheNormsAreGatheredAgain) {
    const Experiment e = small_gqa_op_sac();
    DesignPoint p = selective(2, 1);
    DesignPoint none = p;
    none.recompute = Recompute::none;
    const double M = 1024, h = 1024, f = 4096, kv = 256;

    const double gemms = gemm_s(M, h, f / 2) + gemm_s(M, h, kv / 2);
    const double elementwise =
        (6 * M * h / 2 + 4 * M * h / 2 + 2 * M * 3 * f / 2 + 4 * M * h / 2) / 1.6e12;
    const prism::GroupLink tp =
        prism::group_link(e.hardware[0], e.cluster, p, prism::ParallelDim::tp);
    const double gather = prism::collective_time_s(prism::KernelClass::allgather, 2 * M * h, tp,
                                                   e.hardware[0].collective_efficiency);
    EXPECT_NEAR(backward_s(e, p) - backward_s(e, none), gemms + elementwise + 2 * gather, 1e-12);
}

// With torchao's separate FP8 casts, none of them is saved: every GEMM input and weight the
// backward uses is cast again (torchao's roofline: 4 bytes per activation element, 6 per weight
// element, and its 2 us amax stage per tensor). Per layer: the inputs of wo (M a d), w3 and wk
// (M h, the norms' outputs, one cast serving wq / wv and w1 too) and w2 (M f); the weights of
// all seven GEMMs; six cast calls of two amax stages each. What the fused casts (TE) leave out.
TEST(TorchtitanOpSac, SeparateFp8CastsAreRecastInTheBackwardByHand) {
    Experiment e = small_gqa_op_sac();
    e.training.precision = prism::Precision::fp8;
    const DesignPoint p = selective(1, 1);
    DesignPoint none = p;
    none.recompute = Recompute::none;
    const auto recompute_s = [&](bool separate) {
        Experiment x = e;
        x.hardware[0].fp8_cast = separate ? prism::Fp8Cast::separate : prism::Fp8Cast::fused;
        return backward_s(x, p) - backward_s(x, none);
    };
    const double M = 1024, h = 1024, f = 4096, kv = 256;

    const double activations = 4 * (M * h + M * h + M * h + M * f);
    const double weights = 6 * (h * h + h * f + h * f + f * h + h * kv + h * h + h * kv);
    EXPECT_NEAR(recompute_s(true) - recompute_s(false),
                (activations + weights) / 1.6e12 + 6 * 2 * 2e-6, 1e-12);
}

TEST(TorchtitanOpSac, MoeModelsAreRejected) {
    Experiment e = prism::test::small_moe_experiment();
    e.training.flash_attention = true;
    e.training.selective_recompute = Policy::torchtitan_op;

    EXPECT_THROW(prism::evaluate_deterministic(e, selective(1, 1)), prism::ModelError);
}

}  // namespace
