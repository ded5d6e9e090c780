// The PRISM paper's findings (Golden et al., arXiv 2510.15596), reproduced in kind with the
// analytic evaluator (its agreement with Monte Carlo is checked in accuracy_test.cpp).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "src/stochastic/step_distribution.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace prism {
namespace {

using testing::ProfileShape;

StepDistribution evaluate(const ProfileShape& s, const VariabilitySpec& v,
                          PlacementKind placement = PlacementKind::ordered,
                          std::int64_t total_gpus = 0) {
    const DesignPoint point = testing::design_point(s, placement);
    ClusterSpec cluster;
    cluster.total_gpus = total_gpus;
    EvaluationSpec eval;
    return step_distribution(testing::make_profile(s), point, testing::test_hardware(), cluster, v,
                             eval, 1, 0);
}

TEST(PrismFindings, TailRatioGrowsWithDataParallelReplicas) {
    ProfileShape s;
    s.stages = 4;
    s.microbatches = 8;
    double prev_ratio = 0, prev_slow = -1, prev_tail = 0;
    for (const int dp : {1, 4, 16, 64}) {
        s.dp = dp;
        const auto d = evaluate(s, testing::prism_like(0.0005));
        const double ratio = d.p99_s / d.p50_s;
        std::printf("dp %3d: p50 %.4f p99 %.4f p99/p50 %.4f P(step > 1.25 det) %.4f\n", dp, d.p50_s,
                    d.p99_s, ratio, d.p_slow[2]);

        EXPECT_GT(ratio, prev_ratio) << dp;
        EXPECT_GT(d.p_slow[2], prev_slow) << dp;
        EXPECT_GT(d.p99_s / d.deterministic_s, prev_tail) << dp;
        prev_ratio = ratio;
        prev_slow = d.p_slow[2];
        prev_tail = d.p99_s / d.deterministic_s;
    }
}

TEST(PrismFindings, FsdpIsMoreSensitiveToVariabilityThanPlainDataParallel) {
    // same profile and scale; only the per-layer synchronization of the DP group differs
    ProfileShape s;
    s.tp = 1;
    s.dp = 64;
    s.microbatches = 4;
    s.fsdp = true;
    const auto v = testing::prism_like();
    const auto fsdp = evaluate(s, v);
    // the same profile (FSDP collectives included) with the DP group free to drift apart
    auto plain_profile = testing::make_profile(s);
    plain_profile.dp_lockstep = false;
    DesignPoint point;
    point.tp = 1;
    point.dp = 64;
    const auto plain =
        step_distribution(plain_profile, point, testing::test_hardware(), {}, v, {}, 1, 0);
    std::printf("fsdp: p50/det %.4f p99/det %.4f | plain dp: p50/det %.4f p99/det %.4f\n",
                fsdp.p50_s / fsdp.deterministic_s, fsdp.p99_s / fsdp.deterministic_s,
                plain.p50_s / plain.deterministic_s, plain.p99_s / plain.deterministic_s);

    EXPECT_EQ(fsdp.deterministic_s, plain.deterministic_s);
    EXPECT_GT(fsdp.p50_s, 1.02 * plain.p50_s);
    EXPECT_GT(fsdp.p99_s, 1.02 * plain.p99_s);
}

TEST(PrismFindings, GatherAndScatterTopTheSensitivityOfFsdp) {
    // FSDP over 64 GPUs with exposed per-layer gathers and scatters about as long as the
    // GEMMs, collective cvs (0.3) above GEMM's (0.05): the variance ranking is led by
    // AllGather and ReduceScatter
    ProfileShape s;
    s.tp = 1;
    s.dp = 64;
    s.microbatches = 4;
    s.fsdp = true;
    s.fsdp_comm_s = 1e-3;
    auto v = testing::prism_like();
    v.transient[static_cast<int>(KernelClass::allgather)] = testing::dist(DistKind::lognormal, 0.3);
    v.transient[static_cast<int>(KernelClass::reducescatter)] =
        testing::dist(DistKind::lognormal, 0.3);
    DesignPoint point;
    point.tp = 1;
    point.dp = 64;
    const auto sens =
        sensitivity(testing::make_profile(s), point, testing::test_hardware(), {}, v, {}, 1, 0);
    std::array<int, kKernelClassCount> order{};
    for (int c = 0; c < kKernelClassCount; ++c) order[c] = c;
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return sens.variance_drop_s2[a] > sens.variance_drop_s2[b]; });
    for (int i = 0; i < 4; ++i) {
        std::printf("%d. %-14s variance drop %.3e s^2, p95 drop %.3e s\n", i + 1,
                    kKernelClassNames[order[i]], sens.variance_drop_s2[order[i]],
                    sens.p95_drop_s[order[i]]);
    }

    const std::vector<int> top{order[0], order[1]};
    EXPECT_NE(std::find(top.begin(), top.end(), static_cast<int>(KernelClass::allgather)),
              top.end());
    EXPECT_NE(std::find(top.begin(), top.end(), static_cast<int>(KernelClass::reducescatter)),
              top.end());
    EXPECT_GT(sens.p95_drop_s[static_cast<int>(KernelClass::allgather)], 0.0);
}

TEST(PrismFindings, VariabilityAwarePlacementImprovesP95WithSlowNodes) {
    // 512 GPUs (64 nodes) on a 576-GPU machine with 1% slow nodes (slow factor 1.5): a
    // placement that ignores which nodes are slow (random: the job's nodes drawn at random, the
    // ordered placement's law) meets a slow node most of the time; variability-aware placement
    // leaves the slow nodes out while spare nodes last
    ProfileShape s;
    s.tp = 8;
    s.stages = 4;
    s.dp = 16;
    s.microbatches = 8;
    const auto v = testing::prism_like(0.01);
    const std::int64_t machine = 8 * 4 * 16 + 64;
    const auto random = evaluate(s, v, PlacementKind::random, machine);
    const auto ordered = evaluate(s, v, PlacementKind::ordered, machine);
    const auto aware = evaluate(s, v, PlacementKind::variability_aware, machine);
    std::printf("p95: random %.4f ordered %.4f aware %.4f; random/aware %.3f\n", random.p95_s,
                ordered.p95_s, aware.p95_s, random.p95_s / aware.p95_s);

    EXPECT_GT(random.p95_s / aware.p95_s, 1.2);
    EXPECT_GT(ordered.p95_s / aware.p95_s, 1.2);
}

}  // namespace
}  // namespace prism
