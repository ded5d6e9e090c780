// Monte Carlo draws only the replicas that can be the slowest (montecarlo.cpp): a replica is
// skipped when a union bound over the schedule's paths puts its time below the slowest drawn
// one with probability >= 1 - 1e-12. Audit: draw the skipped replicas anyway and count those
// that would have been the slowest (truth: the full draw; none expected).

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "src/stochastic/detail/evaluators.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace prism {
namespace {

using testing::ProfileShape;

TEST(MonteCarloPruning, SkippedReplicasAreNeverTheSlowest) {
    struct Case {
        std::string name;
        int tp, pp, dp, mb, chunks;
        double slow_probability;
        PlacementKind placement;
        double p2p_cv;  ///< large: the clamp at 0 is reached
    };
    const Case cases[] = {
        {"tp8_dp64", 8, 1, 64, 4, 1, 0.0, PlacementKind::ordered, 0.1},
        {"tp8_pp8_dp32", 8, 8, 32, 16, 1, 0.0, PlacementKind::ordered, 0.1},
        {"tp4_pp4_v2_dp16", 4, 4, 16, 8, 2, 0.0, PlacementKind::ordered, 0.1},
        {"tp2_dp256", 2, 1, 256, 2, 1, 0.0, PlacementKind::ordered, 0.1},
        {"slow_tp8_pp4_dp16", 8, 4, 16, 8, 1, 0.01, PlacementKind::ordered, 0.1},
        {"slow_random_tp8_dp16", 8, 1, 16, 4, 1, 0.005, PlacementKind::random, 0.1},
        {"slow_aware_tp8_pp4_dp64", 8, 4, 64, 8, 1, 0.01, PlacementKind::variability_aware, 0.1},
        {"p2p_cv2_tp8_pp8_dp32", 8, 8, 32, 16, 1, 0.0, PlacementKind::ordered, 2.0},
        // deep pipelines, many replicas (the sweep's pp 32 shapes): several extend rounds, the
        // pending replicas' bounds kept between them and recomputed when tau moves
        {"tp4_pp32_dp128", 4, 32, 128, 16, 1, 0.0, PlacementKind::ordered, 0.1},
        {"slow_tp4_pp16_dp64", 4, 16, 64, 8, 1, 0.01, PlacementKind::ordered, 0.1},
        // one replica: drawn every step, nothing to bound or skip
        {"tp8_pp4_dp1", 8, 4, 1, 8, 1, 0.01, PlacementKind::ordered, 0.1},
    };
    const auto hw = testing::test_hardware();
    for (const auto& c : cases) {
        ProfileShape s;
        s.tp = c.tp;
        s.stages = c.pp;
        s.dp = c.dp;
        s.microbatches = c.mb;
        s.chunks = c.chunks;
        s.layers_per_chunk = c.chunks > 1 ? 2 : 4;
        const auto profile = testing::make_profile(s);
        DesignPoint point;
        point.tp = c.tp;
        point.pp = c.pp;
        point.dp = c.dp;
        point.placement.kind = c.placement;
        auto var = testing::prism_like(c.slow_probability);
        var.transient[static_cast<int>(KernelClass::p2p)] =
            testing::dist(DistKind::normal, c.p2p_cv);
        const auto model = stochastic::detail::build_step_model(profile, point, hw, {}, var);
        const auto layout = stochastic::detail::make_layout(model, point, hw, {});

        const auto check = stochastic::detail::check_monte_carlo_pruning(model, layout, 300, 8, 1);

        std::printf(
            "%-26s replicas %lld skipped %.1f%% violations %lld\n", c.name.c_str(),
            static_cast<long long>(check.replicas),
            100.0 * static_cast<double>(check.skipped) / static_cast<double>(check.replicas),
            static_cast<long long>(check.violations));
        EXPECT_EQ(check.violations, 0) << c.name;
        EXPECT_EQ(check.replicas, 300LL * c.dp) << c.name;
        // the work counters (bench/mc_breakdown): each replica of a step is drawn once or
        // skipped (a replica drawn twice would break the sum), at least one per step is drawn,
        // a bound is computed at most once per replica and step, and a schedule pass holds 1-8
        std::printf(
            "%-26s per step: drawn %.2f bounded %.2f passes %.2f extends %.2f\n", c.name.c_str(),
            static_cast<double>(check.drawn) / 300, static_cast<double>(check.bounded) / 300,
            static_cast<double>(check.dag_runs) / 300, static_cast<double>(check.extends) / 300);
        EXPECT_EQ(check.drawn + check.skipped, check.replicas) << c.name;
        EXPECT_GE(check.drawn, 300) << c.name;
        EXPECT_LE(check.bounded, check.replicas) << c.name;
        EXPECT_LE(check.dag_runs, check.bounded) << c.name;
        EXPECT_GE(8 * check.dag_runs, check.bounded) << c.name;
        if (c.dp == 1) {
            EXPECT_EQ(check.drawn, 300) << c.name;
            EXPECT_EQ(check.bounded, 0) << c.name;
        }
    }
}

}  // namespace
}  // namespace prism
