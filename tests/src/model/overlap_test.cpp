// Context parallelism in the data-parallel sharding and reduction, and Megatron's overlap
// options (--tp-comm-overlap, --overlap-param-gather, FSDP prefetch), against hand calculations.

#include <gtest/gtest.h>

#include <algorithm>

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
constexpr double kStageParams = 8 * kLayerParams + kVocab * kH;

/// Compute at 0.7 x 300 TFLOP/s for every GEMM; memory and host costs zero.
prism::Experiment compute_only() {
    auto e = prism::test::small_experiment();
    e.hardware[0].gpu.gemm.half_flops = 0;
    e.hardware[0].gpu.hbm_bytes_per_s = 1e30;
    e.hardware[0].kernel_launch_s = 0;
    return e;
}

/// cp 2 x dp 2 with the distributed optimizer, 4 microbatches of 2 per replica.
DesignPoint cp2_dp2_zero1() {
    DesignPoint p;
    p.cp = 2;
    p.dp = 2;
    p.microbatch = 2;
    p.zero_stage = 1;
    return p;
}

/// One layer's forward with --tp-comm-overlap at tp 4 with SP, by hand: per GEMM g = 2 M k n /
/// (0.7 x 300e12), M = 1024 tokens, each SP collective c. Ring exchange (n = 4 chunks):
/// max(3/4 g, c) + g/4; pipelined scatter (4 splits, TransformerEngine userbuffers):
/// g/4 + max(3/4 g + cost x 3/4 c, 3/4 c) + c/4 (the GEMM splits beside the scatter pay
/// overlap_compute_cost of its time; the ring exchange's copy engines do not).
double tp_overlap_forward(double c, double cost) {
    const double M = 1024, t = 4;
    auto g = [&](double k, double n) { return 2 * M * k * n / (0.7 * 300e12); };
    auto ring_exchange = [&](double gemm) { return std::max(0.75 * gemm, c) + 0.25 * gemm; };
    auto pipelined = [&](double gemm) {
        return 0.25 * gemm + std::max(0.75 * gemm + cost * 0.75 * c, 0.75 * c) + 0.25 * c;
    };
    const double attention = 4 * M * 1024 * kH / t / (0.7 * 300e12);
    return ring_exchange(g(kH, 3 * kH / t)) + attention + pipelined(g(kH / t, kH)) +
           ring_exchange(g(kH, 4 * kH / t)) + pipelined(g(4 * kH / t, kH));
}

TEST(ContextParallelData, DistributedOptimizerShardsOverDataTimesContextRanks) {
    const auto e = prism::test::small_experiment();
    DesignPoint p = cp2_dp2_zero1();

    const auto r = prism::evaluate_deterministic(e, p);

    // Megatron-Core's data-parallel group with CP: 4 ranks hold the same weights
    EXPECT_DOUBLE_EQ(r.memory.optimizer_bytes, 12 * kStageParams / 4);
    EXPECT_DOUBLE_EQ(r.memory.grads_bytes, 4 * kStageParams);
    EXPECT_DOUBLE_EQ(r.memory.weights_bytes, 2 * kStageParams);
    p.zero_stage = 3;
    const auto z3 = prism::memory_per_gpu(e.model, e.training, p, 4);
    EXPECT_DOUBLE_EQ(z3.weights_bytes, 2 * kStageParams / 4);
    EXPECT_DOUBLE_EQ(z3.grads_bytes, 4 * kStageParams / 4);
}

TEST(ContextParallelData, GradientsAreReducedOverDataTimesContextRanks) {
    auto e = prism::test::small_experiment();
    e.training.overlap_param_gather = false;  // overlap_grad_reduce is off in the helper
    DesignPoint p = cp2_dp2_zero1();

    const auto inside = prism::evaluate_deterministic(e, p);
    e.hardware[0].gpus_per_node = 2;  // cp inside a node, dp across nodes: 2 NICs per node
    const auto across = prism::evaluate_deterministic(e, p);
    p.dp = 1;  // cp alone still reduces: its ranks computed gradients of different tokens
    p.microbatch = 4;
    const auto cp_only = prism::evaluate_deterministic(e, p);

    // ReduceScatter of the 4-byte fp32 main gradients (grad_reduce_in_fp32, the default) +
    // AllGather of 2-byte weights over the 4 ranks
    auto sync = [](int ranks, double bw, double lat) {
        return ring(4 * kStageParams, ranks, bw, lat) + ring(2 * kStageParams, ranks, bw, lat);
    };
    EXPECT_NEAR(inside.breakdown.dp_sync_exposed_s, sync(4, 300e9, 3e-6), 1e-12);
    // across the 2 nodes each ring's 3 steps are 2 NVLink steps (3 us) and 1 NIC step (10 us:
    // NCCL's ring latency, collectives.hpp)
    EXPECT_NEAR(across.breakdown.dp_sync_exposed_s, sync(4, 2 * 25e9, 0) + 2 * (2 * 3e-6 + 10e-6),
                1e-12);
    EXPECT_NEAR(cp_only.breakdown.dp_sync_exposed_s, sync(2, 300e9, 3e-6), 1e-12);
}

TEST(Overlap, TpCommOverlapRunsGathersAsRingExchangeAndScattersPipelined) {
    auto e = compute_only();
    e.training.tp_comm_overlap = true;
    DesignPoint p;
    p.tp = 4;
    p.sequence_parallel = true;

    const auto r = prism::evaluate_deterministic(e, p);

    // the SP collectives move 2 M h bytes over 4 GPUs on NVLink: c = 3/4 x 2 M h / 240e9 + 3 x 3 us
    const double expected = tp_overlap_forward(ring(2 * 1024 * kH, 4, 300e9, 3e-6), 0);
    EXPECT_NEAR(prism::deterministic_time(r.profile.layer_forward), expected, 1e-15);
    EXPECT_NEAR(r.breakdown.layer_forward_s, expected, 1e-15);
}

// A collective beside compute costs the compute overlap_compute_cost of its time (kernels
// sharing the SMs: the compute runs at 1 / (1 + s) while it lasts, cost = s / (1 + s)): the
// pipelined scatter's GEMM splits pay it, TransformerEngine's ring exchange (copy engines) not.
TEST(Overlap, ACollectiveBesideComputeCostsItsFractionOfTheCollective) {
    auto e = compute_only();
    e.training.tp_comm_overlap = true;
    constexpr double kCost = 0.25;
    e.hardware[0].overlap_compute_cost = kCost;
    // a fast NVLink without latency: the GEMMs outlast the collectives beside them
    e.hardware[0].nvlink_bytes_per_s = 1e12;
    e.hardware[0].nvlink_latency_s = 0;
    DesignPoint p;
    p.tp = 4;
    p.sequence_parallel = true;

    const auto r = prism::evaluate_deterministic(e, p);

    const double c = ring(2 * 1024 * kH, 4, 1e12, 0);
    // so the cost shows: the smallest scattered GEMM (k = h / 4, n = h) outlasts its scatter
    ASSERT_GT(2 * 1024 * (kH / 4) * kH / (0.7 * 300e12), c);
    const double expected = tp_overlap_forward(c, kCost);
    EXPECT_NEAR(prism::deterministic_time(r.profile.layer_forward), expected, 1e-15);
    // the breakdown's lines still add up: compute as before, the cost in TP comm exposed
    EXPECT_NEAR(r.breakdown.layer_forward_s, expected, 1e-15);
    e.hardware[0].overlap_compute_cost = 0;
    const auto free = prism::evaluate_deterministic(e, p);
    EXPECT_NEAR(r.breakdown.compute_s, free.breakdown.compute_s, 1e-12);
    EXPECT_GT(r.breakdown.tp_comm_exposed_s, free.breakdown.tp_comm_exposed_s);
}

TEST(Overlap, TpCommOverlapNeedsSequenceParallelism) {
    auto e = prism::test::small_experiment();
    DesignPoint p;
    p.tp = 4;
    const auto plain = prism::evaluate_deterministic(e, p);
    e.training.tp_comm_overlap = true;

    const auto overlap = prism::evaluate_deterministic(e, p);

    EXPECT_EQ(plain.step_time_s, overlap.step_time_s);
}

TEST(Overlap, ParamGatherRunsUnderTheFirstForwardButTheFirstBucket) {
    auto e = prism::test::wide_experiment();
    e.training.grad_reduce_in_fp32 = false;  // bf16 gradients: both collectives carry 2 bytes
    e.training.overlap_param_gather = false;
    DesignPoint p = prism::test::tp8_dp4();
    p.zero_stage = 1;
    const auto exposed = prism::evaluate_deterministic(e, p);
    e.training.overlap_param_gather = true;

    const auto overlapped = prism::evaluate_deterministic(e, p);

    const double h = 4096;
    const double params = (8 * (12 * h * h + 13 * h) + 32000 * h) / 8;
    // ReduceScatter, and AllGather, over 4 nodes (tp 8 fills a node): one 25 GB/s NIC
    const double one = ring(2 * params, 4, 25e9, 10e-6);
    const double window = 8 * overlapped.breakdown.layer_forward_s;
    EXPECT_NEAR(exposed.breakdown.dp_sync_exposed_s, 2 * one, 1e-12);
    EXPECT_NEAR(overlapped.breakdown.dp_sync_exposed_s,
                one + std::max(40e6 / params * one, one - window), 1e-12);
}

// The DP synchronization's hidden part is not free either: it costs the forward beside it
// overlap_compute_cost of the hidden time.
TEST(Overlap, HiddenParamGatherCostsTheForwardItsFraction) {
    auto e = prism::test::wide_experiment();
    e.training.grad_reduce_in_fp32 = false;  // bf16 gradients: both collectives carry 2 bytes
    e.training.overlap_param_gather = true;
    constexpr double kCost = 0.2;
    e.hardware[0].overlap_compute_cost = kCost;
    DesignPoint p = prism::test::tp8_dp4();
    p.zero_stage = 1;

    const auto r = prism::evaluate_deterministic(e, p);

    const double h = 4096;
    const double params = (8 * (12 * h * h + 13 * h) + 32000 * h) / 8;
    const double one = ring(2 * params, 4, 25e9, 10e-6);
    const double window = 8 * r.breakdown.layer_forward_s;
    const double exposed_gather = std::max(40e6 / params * one, one - window);
    ASSERT_GT(one - exposed_gather, 0.1 * one);  // a hidden part to pay for
    EXPECT_NEAR(r.breakdown.dp_sync_exposed_s,
                one + exposed_gather + kCost * (one - exposed_gather), 1e-12);
}

TEST(Overlap, FsdpWithoutPrefetchExposesEveryGather) {
    auto e = compute_only();
    DesignPoint p;
    p.dp = 4;
    p.microbatch = 4;
    p.zero_stage = 3;
    const auto prefetch = prism::evaluate_deterministic(e, p);
    e.training.fsdp_prefetch = false;

    const auto on_demand = prism::evaluate_deterministic(e, p);

    // the layer's 2-byte weights gathered over 4 GPUs of a node, before its forward; prefetched,
    // beside the compute, which is longer, but for the first layer's (no compute before it):
    // one gather per forward of the 8 layers, gather / 8 a layer
    const double gather = ring(2 * kLayerParams, 4, 300e9, 3e-6);
    const double compute = prefetch.breakdown.layer_forward_s - gather / 8;
    EXPECT_GT(compute, gather);
    EXPECT_NEAR(prism::deterministic_time(on_demand.profile.layer_forward), compute + gather,
                1e-15);
    EXPECT_GT(prefetch.breakdown.fsdp_comm_exposed_s, 0.0);
    EXPECT_LT(prefetch.breakdown.fsdp_comm_exposed_s, on_demand.breakdown.fsdp_comm_exposed_s);
}

}  // namespace
