// Megatron-Core's module-level recomputation ([training] recompute_modules with recompute =
// "selective"; docs/recompute_modules.md): the activations each module no longer stores, the
// forward work it re-runs in the backward, and the FLOPs it adds, each against a hand
// calculation on the helpers' round-number models.

#include <gtest/gtest.h>

#include <algorithm>

#include "src/model/deterministic.hpp"
#include "src/model/flops.hpp"
#include "src/model/memory.hpp"
#include "tests/src/model/model_test_helpers.hpp"

namespace {

using prism::DesignPoint;
using prism::Experiment;
using prism::Recompute;
using Modules = prism::TrainingSpec::RecomputeModules;

constexpr Modules kNothing{.core_attn = false};

Modules only(bool Modules::*module) {
    Modules m = kNothing;
    m.*module = true;
    return m;
}

/// tp 2 with sequence parallelism, microbatch 2, selective recomputation.
DesignPoint tp2_sp_b2() {
    DesignPoint p;
    p.tp = 2;
    p.dp = 8;
    p.microbatch = 2;
    p.sequence_parallel = true;
    p.recompute = Recompute::selective;
    return p;
}

/// tp 1, dp 16, microbatch 1, selective recomputation.
DesignPoint tp1_selective() {
    DesignPoint p;
    p.dp = 16;
    p.recompute = Recompute::selective;
    return p;
}

/// The helpers' model (h 1024, a 16, s 1024) with MLA: r_q 256, r_kv 128, d_nope 64, d_rope
/// 32, d_v 64 (16 heads).
Experiment small_mla() {
    Experiment e = prism::test::small_experiment();
    e.model.attention = prism::AttentionKind::mla;
    e.model.q_lora_rank = 256;
    e.model.kv_lora_rank = 128;
    e.model.qk_nope_head_dim = 64;
    e.model.qk_rope_head_dim = 32;
    e.model.v_head_dim = 64;
    return e;
}

using prism::test::small_moe_experiment;

double activations(const Experiment& e, const Modules& modules, const DesignPoint& p) {
    prism::TrainingSpec tr = e.training;
    tr.recompute_modules = modules;
    return prism::activation_bytes_per_layer(e.model, tr, p);
}

// Dense layer, bf16, flash attention, tp 2 with SP, per s b h = 1024 x 2 x 1024 bytes over t:
// kept whatever is recomputed: the two norm inputs 4, the two dropout masks 2, Q 2, K 2, V 2,
// the projection input 2; the norm outputs (QKV input 2, MLP input 2); the MLP's FC1 output
// 2 x 4h and FC2 input 2 x 4h = 16. Nothing recomputed: 34 / 2 = 17 (Korthikanti's 34 s b h / t).
TEST(RecomputeModules, EachDenseModuleDropsItsOwnActivationsByHand) {
    Experiment e = prism::test::small_experiment();
    e.training.flash_attention = true;
    const DesignPoint p = tp2_sp_b2();
    const double sbh = 1024.0 * 2 * 1024;

    EXPECT_DOUBLE_EQ(activations(e, kNothing, p), sbh * 34 / 2);
    // Megatron's default (core_attn): the fused attention stores no scores, nothing dropped
    EXPECT_DOUBLE_EQ(activations(e, Modules{}, p), sbh * 34 / 2);
    // mlp: the MLP keeps only its input (the checkpoint's); FC1 output and FC2 input dropped
    EXPECT_DOUBLE_EQ(activations(e, only(&Modules::mlp), p), sbh * (34 - 16) / 2);
    // layernorm: the two norms' outputs (QKV and MLP inputs) dropped
    EXPECT_DOUBLE_EQ(activations(e, only(&Modules::layernorm), p), sbh * (34 - 4) / 2);
    Modules both = only(&Modules::mlp);
    both.layernorm = true;
    EXPECT_DOUBLE_EQ(activations(e, both, p), sbh * (34 - 16 - 4) / 2);
    // full recomputation ignores the modules: the layer input, 2 s b h / t
    DesignPoint full = p;
    full.recompute = Recompute::full;
    EXPECT_DOUBLE_EQ(activations(e, both, full), sbh * 2 / 2);
    // none ignores them too
    DesignPoint none = p;
    none.recompute = Recompute::none;
    EXPECT_DOUBLE_EQ(activations(e, both, none), sbh * 34 / 2);

    // unfused attention: core_attn drops the 5 a s / h = 80 s b h of scores, softmax and mask
    e.training.flash_attention = false;
    EXPECT_DOUBLE_EQ(activations(e, kNothing, p), sbh * (34 + 80) / 2);
    EXPECT_DOUBLE_EQ(activations(e, Modules{}, p), sbh * 34 / 2);
}

// Only one module is rebuilt at a time (just before its backward): the recompute buffer is the
// largest module's activations. mlp + layernorm: max(16, 4) s b h / t.
TEST(RecomputeModules, RecomputeBufferIsTheLargestModulesActivations) {
    Experiment e = prism::test::small_experiment();
    e.training.flash_attention = true;
    e.training.recompute_modules = only(&Modules::mlp);
    e.training.recompute_modules.layernorm = true;
    const double sbh = 1024.0 * 2 * 1024;
    DesignPoint p = tp2_sp_b2();
    p.pp = 2;  // the first stage: no logits buffer

    const prism::MemoryBreakdown m = prism::memory_of_stage(e.model, e.training, p, 1, 0, 4);

    EXPECT_DOUBLE_EQ(m.temporary_bytes, sbh * 16 / 2);
}

// MLA: Q, K and V are the up projections' outputs (after RoPE), 2 bytes each per element:
// Q a (d_nope + d_rope) = 16 x 96 = 1536, K the same, V a d_v = 16 x 64 = 1024 per token:
// 2 x (1536 + 1536 + 1024) = 8192 bytes per token over t; the latents (the up projections'
// inputs) stay. FP8 changes nothing here (the attention keeps them in bf16).
TEST(RecomputeModules, MlaUpProjDropsTheQueriesKeysAndValues) {
    Experiment e = small_mla();
    e.training.flash_attention = true;
    const DesignPoint p = tp2_sp_b2();
    const double tokens = 1024.0 * 2;

    const double kept = activations(e, kNothing, p);
    EXPECT_DOUBLE_EQ(kept - activations(e, only(&Modules::mla_up_proj), p), tokens * 8192 / 2);
    e.training.precision = prism::Precision::fp8;
    EXPECT_DOUBLE_EQ(activations(e, kNothing, p) - activations(e, only(&Modules::mla_up_proj), p),
                     tokens * 8192 / 2);
}

// MoE layer, bf16, flash, tp 1, microbatch 1 (1024 tokens), top 2 of 16 experts of f_e 512,
// not gated: per dispatched copy FC1 input 2 h, FC1 output 2 f_e, FC2 input 2 f_e, its fp32
// routing probability 4; the router's fp32 probabilities 4 E per token.
TEST(RecomputeModules, EachMoeModuleDropsItsOwnActivationsByHand) {
    Experiment e = small_moe_experiment();
    e.model.shared_experts = 1;
    e.training.flash_attention = true;
    const DesignPoint p = tp1_selective();
    const double T = 1024.0, h = 1024, fe = 512, copies = 2;

    const double kept = activations(e, kNothing, p);
    // moe_act: the activation's output, the FC2 input of every copy
    EXPECT_DOUBLE_EQ(kept - activations(e, only(&Modules::moe_act), p), T * copies * 2 * fe);
    // shared_experts: the shared expert's FC1 output and FC2 input
    EXPECT_DOUBLE_EQ(kept - activations(e, only(&Modules::shared_experts), p), T * (2 + 2) * fe);
    // moe: everything inside the MoE block (the block's input, 2 h, is kept)
    const double block = T * (copies * (2 * h + 2 * fe + 2 * fe + 4) + 4 * 16) + T * 4 * fe;
    EXPECT_DOUBLE_EQ(kept - activations(e, only(&Modules::moe), p), block);
    // mlp recomputes dense MLPs only (Megatron-Core: not an MoE layer's); this model has none
    EXPECT_DOUBLE_EQ(activations(e, only(&Modules::mlp), p), kept);
}

// The recomputed forward work, in the layer's backward, by hand on the roofline: peak 300
// TFLOP/s, eff(F) = 0.7 F / (F + 1e9), HBM 2e12 x 0.8.
double gemm_s(double rows, double k, double n) {
    const double flops = 2 * rows * k * n;
    const double compute = (flops + 1e9) / (300e12 * 0.7);
    const double memory = 2 * (rows * k + k * n + rows * n) / 1.6e12;
    return std::max(compute, memory);
}

double backward_s(const Experiment& e, const Modules& modules, const DesignPoint& p) {
    Experiment x = e;
    x.training.recompute_modules = modules;
    return prism::evaluate_deterministic(x, p).breakdown.layer_backward_s;
}

TEST(RecomputeModules, DenseModulesRerunTheirForwardInTheBackwardByHand) {
    Experiment e = prism::test::small_experiment();
    e.training.flash_attention = true;
    const DesignPoint p = tp1_selective();
    const double M = 1024, h = 1024, f = 4096;
    const double base = backward_s(e, kNothing, p);

    // mlp: FC1 (h -> f), the GeLU (reads 2 f, writes 2 f bytes per token), FC2 (f -> h)
    const double mlp = gemm_s(M, h, f) + 2 * M * 2 * f / 1.6e12 + gemm_s(M, f, h);
    EXPECT_NEAR(backward_s(e, only(&Modules::mlp), p) - base, mlp, 1e-12);
    // layernorm: two norms, each reads and writes 2 h bytes per token
    EXPECT_NEAR(backward_s(e, only(&Modules::layernorm), p) - base, 2 * 4 * M * h / 1.6e12, 1e-12);
}

// MLA's up projections: Q r_q 256 -> 16 x 96 = 1536, KV r_kv 128 -> 16 x (64 + 64) = 2048.
TEST(RecomputeModules, MlaUpProjRerunsTheTwoUpProjectionsByHand) {
    Experiment e = small_mla();
    e.training.flash_attention = true;
    const DesignPoint p = tp1_selective();
    const double base = backward_s(e, kNothing, p);

    EXPECT_NEAR(backward_s(e, only(&Modules::mla_up_proj), p) - base,
                gemm_s(1024, 256, 1536) + gemm_s(1024, 128, 2048), 1e-12);
}

TEST(RecomputeModules, MoeModulesRerunTheirForwardInTheBackward) {
    Experiment e = small_moe_experiment();
    e.training.flash_attention = true;
    const DesignPoint p = tp1_selective();
    const double base = backward_s(e, kNothing, p);

    // moe_act: the experts' GeLU over 1024 tokens x 2 copies, reads 2 f_e and writes 2 f_e
    EXPECT_NEAR(backward_s(e, only(&Modules::moe_act), p) - base,
                1024.0 * 2 * (2 + 2) * 512 / 1.6e12, 1e-12);
    // moe: the router and the experts run once more forward, on top of a forward and a
    // backward of twice the forward's work: their breakdown lines grow by a third (ep 1: no
    // dispatch)
    Experiment none = e;
    none.training.recompute_modules = kNothing;
    const prism::Breakdown b0 = prism::evaluate_deterministic(none, p).breakdown;
    Experiment moe = e;
    moe.training.recompute_modules = only(&Modules::moe);
    const prism::Breakdown b1 = prism::evaluate_deterministic(moe, p).breakdown;
    EXPECT_NEAR(b1.moe_router_s / b0.moe_router_s, 4.0 / 3.0, 1e-12);
    EXPECT_NEAR(b1.moe_expert_compute_s / b0.moe_expert_compute_s, 4.0 / 3.0, 1e-12);
}

// Hardware FLOPs: per sequence and layer, mla_up_proj adds 2 s a (r_q (d_nope + d_rope) + r_kv
// (d_nope + d_v)) = 2 x 1024 x 16 x (256 x 96 + 128 x 128); mlp adds the MLP's 2 x 2 s h f.
TEST(RecomputeModules, HardwareFlopsCountTheRecomputedModules) {
    Experiment e = small_mla();
    e.training.flash_attention = true;
    prism::TrainingSpec tr = e.training;
    tr.recompute_modules = kNothing;
    const double base = prism::hardware_flops_per_step(e.model, tr, Recompute::selective, 1);
    tr.recompute_modules = only(&Modules::mla_up_proj);
    EXPECT_DOUBLE_EQ(prism::hardware_flops_per_step(e.model, tr, Recompute::selective, 1) - base,
                     8 * 2.0 * 1024 * 16 * (256 * 96 + 128 * 128));
    tr.recompute_modules = only(&Modules::mlp);
    EXPECT_DOUBLE_EQ(prism::hardware_flops_per_step(e.model, tr, Recompute::selective, 1) - base,
                     8 * 2.0 * 2 * 1024 * 1024 * 4096);
    // none and full ignore the modules
    EXPECT_DOUBLE_EQ(prism::hardware_flops_per_step(e.model, tr, Recompute::none, 1),
                     prism::hardware_flops_per_step(e.model, e.training, Recompute::none, 1));
}

}  // namespace
