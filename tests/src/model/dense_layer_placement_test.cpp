// An MoE model's dense layers (DeepSeek-V3's first 3) in the chunks that hold them: Megatron
// places the layers in model order over the virtual stages (virtual stage k = chunk k / p of
// stage k % p), so the first virtual stage holds the leading dense layers; each stage's chunks
// cost their own layers (docs/moe.md).

#include <gtest/gtest.h>

#include <vector>

#include "src/model/deterministic.hpp"
#include "src/stochastic/step_distribution.hpp"
#include "tests/src/model/model_test_helpers.hpp"

namespace {

using prism::DesignPoint;
using prism::Experiment;

/// The helpers' model (8 layers) with 16 routed experts (top 2, f_e 512) and `dense` leading
/// dense layers of the helpers' MLP (f = 4096).
Experiment moe_with_dense(int dense) {
    Experiment e = prism::test::small_moe_experiment();
    e.model.dense_layers = dense;
    return e;
}

DesignPoint pp2(int interleave) {
    DesignPoint p;
    p.pp = 2;
    p.dp = 8;
    p.interleave = interleave;
    return p;
}

TEST(DenseLayerPlacement, DenseLayersSitInTheChunksThatHoldThemInModelOrder) {
    const Experiment e = moe_with_dense(3);
    // pp 2, no interleaving: layers 0-3 on stage 0 (0, 1, 2 dense), 4-7 on stage 1
    EXPECT_EQ(prism::evaluate_deterministic(e, pp2(1)).profile.dense_chunk_layers,
              (std::vector<int>{3, 0}));
    // pp 2 x vp 2, 2 layers per virtual stage: virtual stage 0 (stage 0, chunk 0) holds layers
    // 0 and 1, virtual stage 1 (stage 1, chunk 0) layers 2 (dense) and 3; entries at s v + c
    EXPECT_EQ(prism::evaluate_deterministic(e, pp2(2)).profile.dense_chunk_layers,
              (std::vector<int>{2, 0, 1, 0}));
    // one kind of layer: no placement
    EXPECT_TRUE(prism::evaluate_deterministic(moe_with_dense(0), pp2(1))
                    .profile.dense_chunk_layers.empty());
}

// Each stage's chunk costs its own layers: the per-kind layer times from two other models on
// the same point (the dense model: every layer a dense one; the all-MoE model: every layer an
// MoE one), stage 0 = 3 dense + 1 MoE layers (+ the embedding), stage 1 = 4 MoE layers (+ the
// head).
TEST(DenseLayerPlacement, EachStageCostsItsOwnLayersByHand) {
    const DesignPoint p = pp2(1);
    Experiment dense_model = prism::test::small_experiment();
    const prism::Breakdown dense = prism::evaluate_deterministic(dense_model, p).breakdown;
    const prism::Breakdown moe = prism::evaluate_deterministic(moe_with_dense(0), p).breakdown;

    const prism::DeterministicResult r = prism::evaluate_deterministic(moe_with_dense(3), p);
    const prism::StepProfile& prof = r.profile;
    const double embedding_f = prism::deterministic_time(prof.embedding_forward);
    const double embedding_b = prism::deterministic_time(prof.embedding_backward);
    const double head_f = prism::deterministic_time(prof.head_forward);
    const double head_b = prism::deterministic_time(prof.head_backward);
    const double tol = 1e-12;

    EXPECT_NEAR(prof.chunk_forward_s(0, 0) - embedding_f,
                3 * dense.layer_forward_s + moe.layer_forward_s, tol);
    EXPECT_NEAR(prof.chunk_backward_s(0, 0) - embedding_b,
                3 * dense.layer_backward_s + moe.layer_backward_s, tol);
    EXPECT_NEAR(prof.chunk_forward_s(1, 0) - head_f, 4 * moe.layer_forward_s, tol);
    EXPECT_NEAR(prof.chunk_backward_s(1, 0) - head_b, 4 * moe.layer_backward_s, tol);
    // the mean layer of the breakdown: 3 dense and 5 MoE layers of 8
    EXPECT_NEAR(r.breakdown.layer_forward_s,
                (3 * dense.layer_forward_s + 5 * moe.layer_forward_s) / 8, tol);
    // the busiest stage by hand (stage 0: 3 dense + 1 MoE layers and the embedding, stage 1:
    // 4 MoE layers and the head); its MoE line holds its own MoE layers (the all-MoE model's
    // stage has four), and its lines add up to the step time
    const double d = dense.layer_forward_s + dense.layer_backward_s;
    const double m = moe.layer_forward_s + moe.layer_backward_s;
    const int busiest = 3 * d + m + embedding_f + embedding_b > 4 * m + head_f + head_b ? 0 : 1;
    EXPECT_EQ(r.breakdown.stage, busiest);
    EXPECT_NEAR(r.breakdown.moe_router_s, moe.moe_router_s * (busiest == 0 ? 1 : 4) / 4, tol);
    EXPECT_NEAR(r.breakdown.lines_sum_s(), r.step_time_s, 1e-12 * r.step_time_s);
}

TEST(DenseLayerPlacement, EvaluatorsWithoutNoiseGiveTheDeterministicStepTime) {
    const Experiment e = moe_with_dense(3);
    const DesignPoint p = pp2(2);
    const prism::DeterministicResult r = prism::evaluate_deterministic(e, p);
    for (const auto method : {prism::Method::analytic, prism::Method::montecarlo}) {
        prism::EvaluationSpec eval;
        eval.method = method;
        eval.samples = 200;
        const prism::StepDistribution d = prism::step_distribution(
            r.profile, p, e.hardware[0], e.cluster, e.variability, eval, e.seed, 0);
        EXPECT_NEAR(d.p50_s, r.step_time_s, 1e-9 * r.step_time_s);
        EXPECT_NEAR(d.p95_s, r.step_time_s, 1e-9 * r.step_time_s);
    }
}

}  // namespace
