#include "src/model/deterministic.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "model_test_helpers.hpp"
#include "src/model/detail/layer_passes.hpp"
#include "src/model/flops.hpp"

namespace {

using prism::DesignPoint;
using prism::KernelClass;
using prism::Recompute;

/// Compute-bound limit: every GEMM at eff_max (F_half = 0), memory and host costs zero.
prism::Experiment compute_only() {
    auto e = prism::test::small_experiment();
    auto& hw = e.hardware[0];
    hw.gpu.gemm.half_flops = 0;
    hw.gpu.hbm_bytes_per_s = 1e30;
    hw.kernel_launch_s = 0;
    return e;
}

int count_class(const prism::SegmentList& list, KernelClass cls) {
    int n = 0;
    for (const auto& seg : list)
        for (const auto& op : seg.ops) n += op.cls == cls;
    return n;
}

TEST(Deterministic, ComputeBoundStepIsModelFlopsOverAchievedPeak) {
    const auto e = compute_only();
    const DesignPoint p;  // one GPU, 16 microbatches of 1

    const auto r = prism::evaluate_deterministic(e, p);

    // 3 x forward FLOPs (unfused attention: the full square) at 0.7 x 300 TFLOP/s: no
    // recompute, nothing else costs time
    EXPECT_NEAR(r.step_time_s, r.hardware_flops_per_step / (0.7 * 300e12), 1e-12);
    EXPECT_DOUBLE_EQ(r.hardware_flops_per_step,
                     3.0 * 16 *
                         (e.model.layers * prism::layer_forward_flops(e.model, 1).total() +
                          prism::logits_forward_flops(e.model, 1)));
    EXPECT_DOUBLE_EQ(r.model_flops_per_step, prism::model_flops_per_step(e.model, 16));
    EXPECT_DOUBLE_EQ(r.tokens_per_step, 16.0 * 1024);
}

TEST(Deterministic, FullRecomputeStepIsMegatronFlopsOverAchievedPeak) {
    const auto e = compute_only();
    DesignPoint p;
    p.recompute = Recompute::full;

    const auto r = prism::evaluate_deterministic(e, p);

    EXPECT_NEAR(r.step_time_s, r.megatron_flops_per_step / (0.7 * 300e12), 1e-12);
}

TEST(Deterministic, Fp8RunsLayerGemmsAtFp8PeakAttentionAndLogitsAtBf16) {
    auto e = compute_only();
    e.training.precision = prism::Precision::fp8;
    const DesignPoint p;

    const auto r = prism::evaluate_deterministic(e, p);

    // TransformerEngine's FP8 covers the layers' GEMMs; the attention core and Megatron's
    // output layer (logits) stay bf16
    const double attention =
        3.0 * 16 * e.model.layers * prism::layer_forward_flops(e.model, 1).attention;
    const double logits = 3.0 * 16 * prism::logits_forward_flops(e.model, 1);
    const double gemm = r.hardware_flops_per_step - attention - logits;
    EXPECT_NEAR(r.step_time_s, gemm / (0.7 * 600e12) + (attention + logits) / (0.7 * 300e12),
                1e-12);
}

TEST(Deterministic, Fp8CurveHasItsOwnEffMaxAndHalfSizeScaledByPeak) {
    auto e = prism::test::small_experiment();
    e.hardware[0].gpu.hbm_bytes_per_s = 1e30;
    e.hardware[0].kernel_launch_s = 0;
    e.hardware[0].gpu.fp8_gemm_max_efficiency = 0.5;
    e.model.vocab = 8;  // negligible logits
    e.training.precision = prism::Precision::fp8;
    DesignPoint p;

    const auto r = prism::evaluate_deterministic(e, p);

    // every layer GEMM at 0.5 F / (F + 2 x 1e9) of 600 TFLOP/s (F_half doubles with the peak);
    // attention on the bf16 curve 0.7 F' / (F' + 1e9), F' one of its two batched GEMMs
    const double M = 1024, h = 1024;
    auto gemm = [&](double k, double n) {
        const double f = 2 * M * k * n;
        return f / (600e12 * 0.5 * f / (f + 2e9));
    };
    const double call = 0.5 * 4 * M * 1024 * h;
    const double attention = 2 * call / (300e12 * 0.7 * call / (call + 1e9));
    const double forward =
        gemm(h, 3 * h) + gemm(h, h) + gemm(h, 4 * h) + gemm(4 * h, h) + attention;
    EXPECT_NEAR(r.breakdown.layer_forward_s, forward, 1e-15);
}

TEST(Deterministic, SeparateFp8CastsAddTorchaosCastBytesPerLinear) {
    auto e = prism::test::small_experiment();
    e.training.precision = prism::Precision::fp8;
    const DesignPoint p;  // one GPU, microbatch 1: M = 1024 tokens, h = 1024, f = 4h, MHA
    const auto fused = prism::evaluate_deterministic(e, p);
    e.hardware[0].fp8_cast = prism::Fp8Cast::separate;
    const auto separate = prism::evaluate_deterministic(e, p);

    // torchao's roofline (roofline_utils.py): forward, each linear's input at 4 bytes per
    // element and its weight at 6; backward, its output gradient at 4; plus 2 us per tensor
    // (the amax's second stage). Inputs: QKV, proj, fc1 M h each, fc2 M 4h (7 M h); weights
    // 3h^2 + h^2 + 4h^2 + 4h^2 (12 h^2); output gradients 3 M h + M h + 4 M h + M h (9 M h);
    // at 2 TB/s x 0.8
    const double M = 1024, h = 1024, bw = 2e12 * 0.8;
    const double forward = (4 * 7 * M * h + 6 * 12 * h * h) / bw + 4 * 2 * 2e-6;
    const double backward = 4 * 9 * M * h / bw + 4 * 2e-6;
    EXPECT_NEAR(separate.breakdown.layer_forward_s - fused.breakdown.layer_forward_s, forward,
                1e-12);
    EXPECT_NEAR(separate.breakdown.layer_backward_s - fused.breakdown.layer_backward_s, backward,
                1e-12);

    // tp 2 with sequence parallelism: every cast tensor is halved (the h-wide ones cast on their
    // sequence shard before the gather, the others TP-local), so are the weights
    DesignPoint tp2;
    tp2.tp = 2;
    tp2.sequence_parallel = true;
    const double tp2_fused = [&] {
        auto f = e;
        f.hardware[0].fp8_cast = prism::Fp8Cast::fused;
        return prism::evaluate_deterministic(f, tp2).breakdown.layer_forward_s;
    }();
    const auto tp2_separate = prism::evaluate_deterministic(e, tp2);
    EXPECT_NEAR(tp2_separate.breakdown.layer_forward_s - tp2_fused,
                (4 * 3.5 * M * h + 6 * 6 * h * h) / bw + 4 * 2 * 2e-6, 1e-12);

    // bf16 training casts nothing
    e.training.precision = prism::Precision::bf16;
    const auto bf16_separate = prism::evaluate_deterministic(e, p);
    e.hardware[0].fp8_cast = prism::Fp8Cast::fused;
    EXPECT_DOUBLE_EQ(bf16_separate.step_time_s, prism::evaluate_deterministic(e, p).step_time_s);
}

TEST(Deterministic, TeLinearCastsAddOneCastTransposePassPerTensor) {
    auto e = prism::test::small_experiment();
    e.training.precision = prism::Precision::fp8;
    const DesignPoint p;  // one GPU, microbatch 1: M = 1024 tokens, h = 1024, f = 4h, MHA
    const auto fused = prism::evaluate_deterministic(e, p);
    e.hardware[0].fp8_cast = prism::Fp8Cast::te_linear;
    const auto te = prism::evaluate_deterministic(e, p);

    // a bare te.Linear's fp8_cast_transpose_fused: read 2 bytes per element, write the FP8
    // tensor and its transpose (2 x 1); forward, each linear's input (7 M h) and weight
    // (12 h^2); backward, its output gradient (9 M h); no amax stage; at 2 TB/s x 0.8
    const double M = 1024, h = 1024, bw = 2e12 * 0.8;
    EXPECT_NEAR(te.breakdown.layer_forward_s - fused.breakdown.layer_forward_s,
                4 * (7 * M * h + 12 * h * h) / bw, 1e-12);
    EXPECT_NEAR(te.breakdown.layer_backward_s - fused.breakdown.layer_backward_s,
                4 * 9 * M * h / bw, 1e-12);
}

TEST(Deterministic, FusedAttentionBackwardHasTwoAndAHalfTimesTheForwardFlops) {
    auto e = compute_only();
    e.training.flash_attention = true;
    e.hardware[0].gpu.attention_efficiency = 0.4;
    const DesignPoint p;

    const auto r = prism::evaluate_deterministic(e, p);

    // causal: half of 4 s^2 h per sequence, at 0.4 x 300 TFLOP/s times the sequence factor of
    // 1024 keys (1024 / (1024 + 1100) x (16384 + 1100) / 16384); the backward recomputes the
    // scores, 2.5 x the forward FLOPs (Dao 2023); GEMMs at 0.7 x 300, backward 2 x
    const double M = 1024, h = 1024;
    const double factor = 1024.0 / 2124.0 * 17484.0 / 16384.0;
    const double attention = 0.5 * 4 * M * 1024 * h / (0.4 * factor * 300e12);
    const double gemms = 2 * M * h * (3 * h + h + 4 * h + 4 * h) / (0.7 * 300e12);
    EXPECT_NEAR(r.breakdown.layer_forward_s, gemms + attention, 1e-15);
    EXPECT_NEAR(r.breakdown.layer_backward_s, 2 * gemms + 2.5 * attention, 1e-15);
}

TEST(Deterministic, CausalFusedAttentionReachesItsCeilingOnlyOverLongSequences) {
    // the attention time of one layer's forward: the layer minus its GEMMs (at 0.7 x 300)
    auto attention_s = [](int seq, int cp) {
        auto e = compute_only();
        e.training.flash_attention = true;
        e.hardware[0].gpu.attention_efficiency = 0.4;
        e.model.seq = seq;
        e.model.vocab = 8;
        DesignPoint p;
        p.cp = cp;
        const auto r = prism::evaluate_deterministic(e, p);
        const double tokens = double(seq) / cp, h = 1024;
        const double gemms = 2 * tokens * h * (3 * h + h + 4 * h + 4 * h) / (0.7 * 300e12);
        return r.breakdown.layer_forward_s - gemms;
    };
    // hand: F = 0.5 x 4 (s / c) s h, at 0.4 x 300 TFLOP/s x k / (k + 1100) x 17484 / 16384,
    // k = s / c the keys one kernel call sees: 1 at 16k (the presets' ceilings are read there)
    auto hand = [](double seq, double cp) {
        const double keys = seq / cp;
        const double flops = 0.5 * 4 * (seq / cp) * seq * 1024;
        return flops / (0.4 * 300e12 * keys / (keys + 1100) * 17484 / 16384);
    };
    EXPECT_NEAR(attention_s(16384, 1), 0.5 * 4 * 16384.0 * 16384 * 1024 / (0.4 * 300e12), 1e-12);
    EXPECT_NEAR(attention_s(2048, 1), hand(2048, 1), 1e-12);
    // a 2k sequence runs at 0.69 of the ceiling: per FLOP 1.44 x slower than at 16k
    EXPECT_NEAR(hand(2048, 1) / (0.5 * 4 * 2048.0 * 2048 * 1024 / (0.4 * 300e12)), 1.4404, 1e-3);
    // context parallelism: each rank's kernels see s / c keys (the ring's chunks), the same
    // factor as an unsplit sequence of s / c; the ring's K/V exchange over NVLink is hidden
    EXPECT_NEAR(attention_s(16384, 4), hand(16384, 4), 1e-12);
}

// The fused kernel's exponentials (docs/attention_exp.md): one per score element and query head
// in the forward and one in the backward (the recompute of P), at exp_per_s times the sequence
// factor, in series with the MMAs (overlap 0) or behind the slower of the two (overlap 1).
// Differences between runs with and without an exponential rate isolate the term by hand.
TEST(Deterministic, FusedAttentionTimesOneExponentialPerScoreElementAndQueryHead) {
    const double R = 1e12, M = 1024, s = 1024;
    const double factor = 1024.0 / 2124.0 * 17484.0 / 16384.0;  // 1k keys (sequence curve)
    auto run = [](prism::Experiment e, double rate, double overlap) {
        e.training.flash_attention = true;
        e.hardware[0].gpu.attention_efficiency = 0.4;
        e.hardware[0].gpu.exp_per_s = rate;
        e.hardware[0].gpu.attention_exp_overlap = overlap;
        return prism::evaluate_deterministic(e, DesignPoint{}).breakdown;
    };
    // causal: half of the s x s scores, 16 query heads, one exponential each per pass
    const double exps = 0.5 * M * s * 16;
    const double exp_s = exps / (R * factor);
    const double mma_s = 0.5 * 4 * M * s * 1024 / (0.4 * factor * 300e12);
    auto check = [&](const prism::Experiment& e, double per_pass_exp_s, const char* what) {
        const auto none = run(e, 0, 0), serial = run(e, R, 0);
        EXPECT_NEAR(serial.layer_forward_s - none.layer_forward_s, per_pass_exp_s, 1e-15) << what;
        // the backward recomputes P once: one more exponential per element, not 2.5
        EXPECT_NEAR(serial.layer_backward_s - none.layer_backward_s, per_pass_exp_s, 1e-15) << what;
    };
    check(compute_only(), exp_s, "multi-head attention");
    // GQA: 4 key/value heads serve the same 16 query heads: the same scores, the same exps
    auto gqa = compute_only();
    gqa.model.kv_heads = 4;
    check(gqa, exp_s, "GQA");
    // twice the heads at half the head dim (32, not 64): the same MMA FLOPs, twice the exps
    auto narrow = compute_only();
    narrow.model.heads = narrow.model.kv_heads = 32;
    check(narrow, 2 * exp_s, "head dim 64");
    // MLA (DeepSeek-V3's head dims: qk 128 + 64 = 192, v 128) with 16 heads: one exponential
    // per score element and head whatever the head dims
    auto mla = compute_only();
    mla.model.attention = prism::AttentionKind::mla;
    mla.model.q_lora_rank = 256;
    mla.model.kv_lora_rank = 256;
    mla.model.qk_nope_head_dim = 128;
    mla.model.qk_rope_head_dim = 64;
    mla.model.v_head_dim = 128;
    check(mla, exp_s, "MLA");
    // MLA's MMAs: 2 (192 + 128) FLOPs per score element and head in the forward
    const double mla_mma_s = 0.5 * 2 * M * s * 16 * (192 + 128) / (0.4 * factor * 300e12);
    const auto mla_none = run(mla, 0, 0);
    const auto mla_slow = run(mla, 1e6, 1);  // overlapped, the exponentials far slower
    EXPECT_NEAR(mla_slow.layer_forward_s - mla_none.layer_forward_s,
                exps / (1e6 * factor) - mla_mma_s, 1e-9);

    // full overlap: the slower resource sets the time; here the MMAs (exp_s < mma_s)
    ASSERT_LT(exp_s, mma_s);
    const auto none = run(compute_only(), 0, 0);
    EXPECT_NEAR(run(compute_only(), R, 1).layer_forward_s, none.layer_forward_s, 1e-15);
    // half overlap: the max plus half the min
    EXPECT_NEAR(run(compute_only(), R, 0.5).layer_forward_s - none.layer_forward_s, 0.5 * exp_s,
                1e-15);
    // the unfused path has no exponential term (its softmax is an elementwise kernel)
    auto unfused = compute_only();
    unfused.hardware[0].gpu.exp_per_s = R;
    EXPECT_DOUBLE_EQ(prism::evaluate_deterministic(unfused, DesignPoint{}).step_time_s,
                     prism::evaluate_deterministic(compute_only(), DesignPoint{}).step_time_s);
}

TEST(Deterministic, TensorParallelAllReducesMatchHandCalculation) {
    auto e = compute_only();
    e.hardware[0].gpu.peak_bf16_flop_per_s = 1e30;  // compute free: only TP comm remains
    DesignPoint p;
    p.tp = 2;

    const auto r = prism::evaluate_deterministic(e, p);

    // per microbatch: 8 layers x (2 forward + 2 backward) AllReduce of 2 s h bytes, the head's
    // 3 loss AllReduces (4 s bytes) and its input-gradient AllReduce; ring over NVLink at 0.8
    auto ar = [](double bytes) { return 2 * 0.5 * bytes / (0.8 * 300e9) + 2 * 1 * 3e-6; };
    const double act = 2.0 * 1024 * 1024;
    const double per_microbatch = 8 * 4 * ar(act) + 3 * ar(4.0 * 1024) + ar(act);
    EXPECT_NEAR(r.step_time_s, 16 * per_microbatch, 1e-12);
    EXPECT_NEAR(r.breakdown.tp_comm_exposed_s, 16 * 8 * 4 * ar(act), 1e-12);
}

TEST(Deterministic, SequenceParallelReplacesAllReduceByGatherAndScatter) {
    const auto e = prism::test::small_experiment();
    DesignPoint p;
    p.tp = 4;
    p.sequence_parallel = true;

    const auto r = prism::evaluate_deterministic(e, p);

    EXPECT_EQ(count_class(r.profile.layer_forward, KernelClass::allreduce), 0);
    EXPECT_EQ(count_class(r.profile.layer_forward, KernelClass::allgather), 2);
    EXPECT_EQ(count_class(r.profile.layer_forward, KernelClass::reducescatter), 2);
    for (const auto& seg : r.profile.layer_forward)
        for (const auto& op : seg.ops) {
            if (prism::is_communication(op.cls)) {
                EXPECT_EQ(op.link, prism::LinkLevel::nvlink);
            } else {
                EXPECT_EQ(op.sync_size, 4);
            }
        }
}

TEST(Deterministic, ContextParallelExchangesKvConcurrentlyWithAttention) {
    const auto e = prism::test::small_experiment();
    DesignPoint p;
    p.tp = 2;
    p.cp = 2;

    const auto r = prism::evaluate_deterministic(e, p);

    bool found = false;
    for (const auto& seg : r.profile.layer_forward) {
        if (seg.ops.size() == 2 && seg.ops[0].cls == KernelClass::attention) {
            EXPECT_EQ(seg.ops[0].sync_size, 4);
            EXPECT_EQ(seg.ops[1].cls, KernelClass::p2p);
            found = true;
        }
    }
    EXPECT_TRUE(found);
}

TEST(Deterministic, FsdpGathersWeightsConcurrentlyAndLocksReplicas) {
    const auto e = prism::test::small_experiment();
    DesignPoint p;
    p.dp = 4;
    p.microbatch = 4;
    p.zero_stage = 3;

    const auto r = prism::evaluate_deterministic(e, p);

    EXPECT_TRUE(r.profile.dp_lockstep);
    ASSERT_FALSE(r.profile.layer_forward.empty());
    EXPECT_EQ(count_class({r.profile.layer_forward.front()}, KernelClass::allgather), 1);
    EXPECT_EQ(count_class({r.profile.layer_forward.front()}, KernelClass::gemm), 1);
    EXPECT_EQ(count_class(r.profile.layer_backward, KernelClass::allgather), 1);
    // beside the compute, and the backward's last scatter's share of the layer, exposed
    EXPECT_EQ(count_class(r.profile.layer_backward, KernelClass::reducescatter), 2);
    EXPECT_TRUE(r.profile.dp_sync.empty());
}

TEST(Deterministic, OverlappedGradientReductionHidesItsWindowButTheLastBucket) {
    auto e = prism::test::wide_experiment();
    e.training.grad_reduce_in_fp32 = false;  // bf16 gradient buffer: 2 bytes on the wire
    const DesignPoint p = prism::test::tp8_dp4();
    const auto exposed = prism::evaluate_deterministic(e, p);
    e.training.overlap_grad_reduce = true;

    const auto overlapped = prism::evaluate_deterministic(e, p);

    // AllReduce of 2 bytes x (8 (12 h^2 + 13 h) + V h) / 8 over 4 nodes (tp 8 fills a node:
    // one NIC of 25 GB/s x 0.8, 10 us per step); buckets of max(40 M, 1 M x 4) parameters; the
    // window is the last microbatch's backward of the stage's 8 layers
    const double h = 4096;
    const double params = (8 * (12 * h * h + 13 * h) + 32000 * h) / 8;
    const double sync = 2 * 0.75 * 2 * params / 20e9 + 2 * 3 * 10e-6;
    const double window = 8 * overlapped.breakdown.layer_backward_s;
    const double expected_exposed = std::max(40e6 / params * sync, sync - window);
    EXPECT_EQ(exposed.profile.dp_overlap_s, 0.0);
    EXPECT_NEAR(exposed.breakdown.dp_sync_exposed_s, sync, 1e-12);
    EXPECT_NEAR(overlapped.breakdown.dp_sync_exposed_s, expected_exposed, 1e-12);
    EXPECT_NEAR(exposed.step_time_s - overlapped.step_time_s, sync - expected_exposed, 1e-12);
}

// Adam's step is memory-bound: 30 bytes of HBM traffic per parameter under amp (fp32 master,
// gradient and two moments read and written, and the bf16 copy), 14 with pure bf16 (bf16 weight,
// gradient and moments).
TEST(Deterministic, PureBf16OptimizerStepMovesFourteenBytesPerParameterInsteadOfThirty) {
    auto e = prism::test::wide_experiment();
    const DesignPoint p = prism::test::tp8_dp4();
    const auto amp = prism::evaluate_deterministic(e, p);
    e.training.pure_bf16 = true;
    e.training.grad_reduce_in_fp32 = false;
    const auto pure = prism::evaluate_deterministic(e, p);

    ASSERT_GT(amp.breakdown.optimizer_s, 0.0);
    EXPECT_NEAR(pure.breakdown.optimizer_s / amp.breakdown.optimizer_s, 14.0 / 30.0, 1e-12);
    EXPECT_DOUBLE_EQ(pure.breakdown.layer_forward_s, amp.breakdown.layer_forward_s);
}

// The DP AllReduce carries the main-gradient buffer's dtype: fp32 (grad_reduce_in_fp32,
// Megatron-LM's bf16 default, FSDP's reduce_dtype = fp32) puts 4 bytes per parameter on the wire, a
// bf16 buffer (Megatron-Core's DistributedDataParallelConfig default, NVIDIA's performance recipes)
// 2: by hand as above, the ring's bandwidth term doubles and its latency term stays.
TEST(Deterministic, GradientReductionCarriesTheMainGradientBuffersBytes) {
    auto e = prism::test::wide_experiment();
    const DesignPoint p = prism::test::tp8_dp4();
    e.training.grad_reduce_in_fp32 = true;
    const auto fp32 = prism::evaluate_deterministic(e, p);
    e.training.grad_reduce_in_fp32 = false;
    const auto bf16 = prism::evaluate_deterministic(e, p);

    const double h = 4096;
    const double params = (8 * (12 * h * h + 13 * h) + 32000 * h) / 8;
    auto allreduce = [&](double bytes_per_param) {
        return 2 * 0.75 * bytes_per_param * params / 20e9 + 2 * 3 * 10e-6;
    };
    EXPECT_NEAR(fp32.breakdown.dp_sync_exposed_s, allreduce(4), 1e-12);
    EXPECT_NEAR(bf16.breakdown.dp_sync_exposed_s, allreduce(2), 1e-12);
    EXPECT_NEAR(fp32.step_time_s - bf16.step_time_s, 2 * 0.75 * 2 * params / 20e9, 1e-12);
    EXPECT_DOUBLE_EQ(fp32.breakdown.layer_backward_s, bf16.breakdown.layer_backward_s);
}

// collective_nic_efficiency: the DP AllReduce across the 4 nodes runs at the NIC's own
// efficiency (0.5 here; by hand as above), the TP collectives inside the node stay at the NVLink
// one (the layer is unchanged); each link level picks its own, 0 = collective_efficiency.
TEST(Deterministic, CollectivesAcrossNodesRunAtTheNicEfficiency) {
    auto e = prism::test::wide_experiment();
    const DesignPoint p = prism::test::tp8_dp4();
    const auto one = prism::evaluate_deterministic(e, p);
    e.hardware[0].collective_nic_efficiency = 0.5;

    const auto nic = prism::evaluate_deterministic(e, p);

    // the fp32 main gradients (grad_reduce_in_fp32, the default): 4 bytes per parameter
    const double h = 4096;
    const double params = (8 * (12 * h * h + 13 * h) + 32000 * h) / 8;
    const double sync = 2 * 0.75 * 4 * params / (25e9 * 0.5) + 2 * 3 * 10e-6;
    EXPECT_NEAR(nic.breakdown.dp_sync_exposed_s, sync, 1e-12);
    EXPECT_GT(nic.breakdown.dp_sync_exposed_s, one.breakdown.dp_sync_exposed_s);
    EXPECT_DOUBLE_EQ(nic.breakdown.layer_forward_s, one.breakdown.layer_forward_s);
    EXPECT_DOUBLE_EQ(nic.breakdown.layer_backward_s, one.breakdown.layer_backward_s);

    using prism::LinkLevel;
    for (const LinkLevel level : {LinkLevel::nic, LinkLevel::rack, LinkLevel::pod}) {
        EXPECT_EQ(prism::detail::collective_efficiency_at(e.hardware[0], level), 0.5);
    }
    EXPECT_EQ(prism::detail::collective_efficiency_at(e.hardware[0], LinkLevel::nvlink), 0.8);
    e.hardware[0].collective_nic_efficiency = 0;
    EXPECT_EQ(prism::detail::collective_efficiency_at(e.hardware[0], LinkLevel::pod), 0.8);
}

TEST(Deterministic, LaunchBoundLayerTakesKernelCountTimesLaunchTime) {
    auto e = compute_only();
    e.hardware[0].kernel_launch_s = 1e-3;
    const DesignPoint p;

    const auto r = prism::evaluate_deterministic(e, p);

    // forward kernels: 2 layer norms, QKV, attention, softmax/dropout, projection, 2 bias-dropout-
    // residual, MLP up, activation, MLP down = 11
    EXPECT_NEAR(prism::deterministic_time(r.profile.layer_forward), 11e-3, 1e-12);
}

TEST(Deterministic, PointOverMemoryCapacityIsInfeasibleWithReason) {
    auto e = prism::test::small_experiment();
    e.model.layers = 96;
    e.model.hidden = 12288;
    e.model.heads = 96;
    e.model.kv_heads = 96;
    e.model.ffn = 4 * 12288;
    e.constraints.max_memory_fraction = 0.5;  // 40 GB = 37.3 GiB usable
    DesignPoint p;
    p.tp = 8;
    p.pp = 8;
    p.microbatch = 1;
    p.recompute = Recompute::full;

    const auto r = prism::evaluate_deterministic(e, p);

    EXPECT_FALSE(r.feasible);
    const double total_gib = r.memory.total_bytes() / (1024.0 * 1024 * 1024);
    char expected[64];
    std::snprintf(expected, sizeof expected,
                  "memory %.1f GiB > 37.3 GiB capacity (pipeline stage %d)", total_gib,
                  r.breakdown.memory_stage);
    EXPECT_EQ(r.reason, expected);
}

TEST(Deterministic, BreakdownTableIsAligned) {
    const auto e = prism::test::small_experiment();
    DesignPoint p;
    p.tp = 2;
    p.pp = 2;
    p.microbatch = 2;

    const auto text = prism::format_breakdown(prism::evaluate_deterministic(e, p));

    std::istringstream in(text);
    std::string line;
    int rows = 0;
    while (std::getline(in, line)) {
        ASSERT_GT(line.size(), 43u) << line;
        EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(line[41]))) << line;
        EXPECT_EQ(line[42], ' ') << line;
        ++rows;
    }
    // 12 time lines, 3 informative ones, 8 memory lines (reserved too) and one per stage
    EXPECT_EQ(rows, 25);
    EXPECT_NE(text.find("LM head and loss"), std::string::npos);
    EXPECT_NE(text.find("pipeline bubble"), std::string::npos);
    EXPECT_NE(text.find("memory: total"), std::string::npos);
    EXPECT_NE(text.find("stage 1 total, 4 layers"), std::string::npos);
}

TEST(Deterministic, EvaluatesGpt3ScalePointsQuickly) {
    auto e = prism::test::small_experiment();
    e.model.layers = 96;
    e.model.hidden = 12288;
    e.model.heads = 96;
    e.model.kv_heads = 96;
    e.model.ffn = 4 * 12288;
    e.training.global_batch_seqs = 512;
    DesignPoint p;
    p.tp = 8;
    p.pp = 8;
    p.dp = 16;  // 32 microbatches per replica
    p.sequence_parallel = true;
    p.recompute = Recompute::selective;
    constexpr int kRuns = 2000;

    const auto start = std::chrono::steady_clock::now();
    double sink = 0;
    for (int i = 0; i < kRuns; ++i) sink += prism::evaluate_deterministic(e, p).step_time_s;
    const double per_point =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kRuns;

    std::printf("  %.1f us per point (pp 8, 32 microbatches)\n", per_point * 1e6);
    EXPECT_GT(sink, 0);
    // generous bound against regressions (Release builds measure ~tens of us)
    EXPECT_LT(per_point, 1e-3);
}

}  // namespace

namespace {

/// Uniform stages: compute only, no head/embedding cost worth counting, free transfers.
prism::Experiment uniform_pipeline() {
    auto e = compute_only();
    e.model.vocab = 1;
    e.model.layers = 16;
    e.hardware[0].nvlink_bytes_per_s = 1e30;
    e.hardware[0].nvlink_latency_s = 0;
    e.hardware[0].nic_bytes_per_s = 1e30;
    e.hardware[0].nic_latency_s = 0;
    return e;
}

TEST(Deterministic, OneFOneBPipelineMatchesNarayananBubble) {
    const auto e = uniform_pipeline();
    DesignPoint p;
    p.pp = 4;  // 16 microbatches, 4 layers per stage

    const auto r = prism::evaluate_deterministic(e, p);

    // (m + p - 1) (t_f + t_b) per stage (Narayanan et al. SC'21, section 2.2)
    const double stage = 4 * (prism::deterministic_time(r.profile.layer_forward) +
                              prism::deterministic_time(r.profile.layer_backward));
    // tolerance: the vocab-1 logits GEMM and embedding remain (~1e-5 of a stage)
    EXPECT_NEAR(r.step_time_s / ((16 + 4 - 1) * stage), 1.0, 1e-4);
}

TEST(Deterministic, InterleavedPipelineShrinksBubbleByV) {
    const auto e = uniform_pipeline();
    DesignPoint p;
    p.pp = 4;
    p.interleave = 2;  // 2 layers per chunk

    const auto r = prism::evaluate_deterministic(e, p);

    // bubble (p - 1) / (v m): step = (m v + p - 1) (t_f + t_b) of one chunk
    const double chunk = 2 * (prism::deterministic_time(r.profile.layer_forward) +
                              prism::deterministic_time(r.profile.layer_backward));
    EXPECT_NEAR(r.step_time_s / ((16 * 2 + 4 - 1) * chunk), 1.0, 1e-4);
}

}  // namespace
