// What a sweep writes of a Mixture-of-Experts point (docs/moe_outputs.md): the MoE time lines
// of the busiest stage and the routing imbalance's share of p50 and p95, (p - p with the router
// forced to balance) / p.

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "src/model/bounds.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/evaluate.hpp"
#include "tests/src/model/model_test_helpers.hpp"

namespace {

using prism::DesignPoint;
using prism::Experiment;

const char* const kMoeLines[] = {"moe_router_s", "moe_dispatch_s", "moe_expert_compute_s",
                                 "moe_combine_s", "moe_a2a_exposed_s"};
const char* const kShares[] = {"routing_share_p50", "routing_share_p95"};

/// The helpers' small model with 16 routed experts (top 2, f_e = 512) in every layer, real
/// routing (skew 0.3, drift 0.1) and 5% GEMM noise, so that both quantiles have a spread.
Experiment routed_moe() {
    Experiment e = prism::test::small_moe_experiment();
    e.seed = 11;
    e.variability.routing_skew = 0.3;
    e.variability.routing_drift = 0.1;
    e.variability.transient[0] = {prism::DistKind::lognormal, 1.0, 0.05, {}, {}};
    e.training.moe_force_balance = false;
    return e;
}

DesignPoint point(int dp, int ep) {
    DesignPoint p;
    p.dp = dp;
    p.ep = ep;
    return p;
}

double value(const prism::Evaluator& ev, const prism::PointResult& r, const std::string& name) {
    const int k = prism::find_metric(ev.schema(), name);
    EXPECT_GE(k, 0) << name;
    return k >= 0 ? r.values[static_cast<std::size_t>(k)] : prism::kNaN;
}

bool has(const prism::MetricSchema& schema, const std::string& name) {
    return prism::find_metric(schema, name) >= 0;
}

TEST(MoeOutputs, RoutingShareEqualsASeparateForcedBalanceEvaluation) {
    for (const auto method : {prism::Method::analytic, prism::Method::montecarlo}) {
        Experiment e = routed_moe();
        e.evaluation.method = method;
        e.evaluation.samples = 400;
        Experiment balanced = e;
        balanced.training.moe_force_balance = true;
        const DesignPoint p = point(16, 16);
        const prism::Evaluator ev(e);
        const prism::Evaluator forced(balanced);

        const prism::PointResult r = ev.evaluate(p, 7);
        const prism::PointResult b = forced.evaluate(p, 7);  // the same point, its own evaluation

        ASSERT_EQ(r.status, prism::PointStatus::ok);
        ASSERT_EQ(b.status, prism::PointStatus::ok);
        for (const char* q : {"p50", "p95"}) {
            const double with = value(ev, r, std::string("step_time_") + q + "_s");
            const double without = value(forced, b, std::string("step_time_") + q + "_s");
            const double share = value(ev, r, std::string("routing_share_") + q);
            EXPECT_DOUBLE_EQ(share, (with - without) / with) << q;
            // the busiest of 16 ranks at skew 0.3 is well above its share: routing costs time
            EXPECT_GT(share, 0.01) << q;
            EXPECT_LT(share, 0.5) << q;
        }
    }
}

TEST(MoeOutputs, RoutingShareIsZeroWithForcedBalanceOrASingleExpertRank) {
    Experiment e = routed_moe();
    e.training.moe_force_balance = true;
    const prism::Evaluator forced(e);
    const prism::PointResult f = forced.evaluate(point(16, 16), 3);
    Experiment routed = routed_moe();
    const prism::Evaluator ev(routed);
    const prism::PointResult one = ev.evaluate(point(16, 1), 3);  // ep 1: no routing law

    for (const char* share : kShares) {
        EXPECT_EQ(value(forced, f, share), 0.0) << share;
        EXPECT_EQ(value(ev, one, share), 0.0) << share;
    }
    EXPECT_GT(value(ev, one, "step_time_p95_s"), value(ev, one, "step_time_p50_s"));
}

TEST(MoeOutputs, MoeColumnsArePresentForMoeModelsOnly) {
    const prism::MetricSchema dense = prism::metric_schema(prism::test::small_experiment());
    Experiment e = routed_moe();
    const prism::MetricSchema moe = prism::metric_schema(e);
    e.training.moe_force_balance = true;
    const prism::MetricSchema forced = prism::metric_schema(e);
    e.training.moe_force_balance = false;
    e.evaluation.routing_share = false;
    const prism::MetricSchema no_share = prism::metric_schema(e);

    for (const char* line : kMoeLines) {
        EXPECT_FALSE(has(dense, line)) << line;
        EXPECT_TRUE(has(moe, line)) << line;
        EXPECT_TRUE(has(forced, line)) << line;
        EXPECT_TRUE(has(no_share, line)) << line;
        EXPECT_EQ(prism::metric_bound_kind(line), prism::BoundKind::exact) << line;
    }
    for (const char* share : kShares) {
        EXPECT_FALSE(has(dense, share)) << share;
        EXPECT_TRUE(has(moe, share)) << share;
        EXPECT_TRUE(has(forced, share)) << share;
        EXPECT_FALSE(has(no_share, share)) << share;
        EXPECT_EQ(prism::metric_bound_kind(share), prism::BoundKind::none) << share;
    }
    EXPECT_EQ(moe.size(), dense.size() + 5 + 2 + 2);  // and sens_{p95,var}_routing
}

TEST(MoeOutputs, MoeLinesAreTheBusiestStagesBreakdown) {
    const Experiment e = routed_moe();
    const DesignPoint p = point(16, 16);
    const prism::Evaluator ev(e);
    const prism::PointResult r = ev.evaluate(p, 0);
    const prism::DeterministicResult det = prism::evaluate_deterministic(e, p);
    const prism::Breakdown& b = det.breakdown;

    EXPECT_EQ(value(ev, r, "moe_router_s"), b.moe_router_s);
    EXPECT_EQ(value(ev, r, "moe_dispatch_s"), b.moe_dispatch_s);
    EXPECT_EQ(value(ev, r, "moe_expert_compute_s"), b.moe_expert_compute_s);
    EXPECT_EQ(value(ev, r, "moe_combine_s"), b.moe_combine_s);
    EXPECT_EQ(value(ev, r, "moe_a2a_exposed_s"), b.ep_comm_exposed_s);
    // no a2a overlap here: all of the dispatch and combine all-to-all stays exposed, and the
    // lines are nonzero parts of the step
    EXPECT_GT(value(ev, r, "moe_a2a_exposed_s"), 0.0);
    EXPECT_LE(value(ev, r, "moe_a2a_exposed_s"),
              value(ev, r, "moe_dispatch_s") + value(ev, r, "moe_combine_s") + 1e-15);
    EXPECT_LT(value(ev, r, "moe_router_s") + value(ev, r, "moe_expert_compute_s"),
              value(ev, r, "step_time_s"));
}

TEST(MoeOutputs, CachedAndDominatedRowsKeepTheirMoeColumns) {
    const Experiment e = routed_moe();
    const prism::Evaluator ev(e);
    prism::StepCache cache;
    DesignPoint p = point(16, 16);
    const prism::PointResult first = ev.evaluate(p, 4, 4, &cache);
    p.learning_rate = 3e-4;  // runs the same steps: its distribution comes from the cache
    const prism::PointResult second = ev.evaluate(p, 5, 4, &cache);
    ASSERT_EQ(cache.hits(), 1u);
    for (const char* share : kShares) {
        EXPECT_EQ(value(ev, second, share), value(ev, first, share)) << share;
    }
    // a dominated row: the deterministic lines filled, the shares (stochastic) NaN
    const prism::PointResult screened = ev.screen(p, 5, 4);
    for (const char* line : kMoeLines) {
        EXPECT_EQ(value(ev, screened, line), value(ev, first, line)) << line;
    }
    for (const char* share : kShares) EXPECT_TRUE(std::isnan(value(ev, screened, share)));
}

}  // namespace
