// Learning-rate rules and the off-optimum penalty (src/cotune/learning_rate.hpp).

#include "src/cotune/learning_rate.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "tests/src/model/model_test_helpers.hpp"

namespace prism::cotune {
namespace {

TEST(DeepSeekLaws, GiveWhatTheFormulasSayAtTwoBudgets) {
    // eta = 0.3118 C^-0.125, B = 0.2920 C^0.3271 (DeepSeek LLM 2024, Eq. 1), worked by hand:
    // C = 1e20: 0.3118 x 10^-2.5 = 0.3118 / 316.228 = 9.860e-4;
    //           0.2920 x 10^6.542 = 0.2920 x 3.4834e6 = 1.0172e6 tokens
    // C = 1e24: 0.3118 x 10^-3 = 3.118e-4; 0.2920 x 10^7.8504 = 0.2920 x 7.0877e7 = 2.0696e7
    EXPECT_NEAR(deepseek_lr_opt(1e20), 9.860e-4, 0.001e-4);
    EXPECT_NEAR(deepseek_batch_opt_tokens(1e20), 1.0172e6, 0.0005e6);
    EXPECT_NEAR(deepseek_lr_opt(1e24), 3.118e-4, 1e-10);
    EXPECT_NEAR(deepseek_batch_opt_tokens(1e24), 2.0696e7, 0.0005e7);
    // the same through exp and log (an independent evaluation of the power)
    for (double c : {1e20, 1e24}) {
        EXPECT_NEAR(deepseek_lr_opt(c), 0.3118 * std::exp(-0.125 * std::log(c)), 1e-15);
        EXPECT_NEAR(deepseek_batch_opt_tokens(c) / (0.2920 * std::exp(0.3271 * std::log(c))), 1.0,
                    1e-12);
    }
}

TEST(DeepSeekLaws, FlopsPerTokenReduceToTheirFormulaForAStandardLayer) {
    // M = 72 n_layer d^2 + 6 n_layer d l_seq for multi-head attention and a 4d MLP (their
    // Eq. 2); the model's layer also counts biases and norms (13 d per layer).
    const ModelSpec m = test::small_experiment().model;  // 8 layers, d 1024, MHA, ffn 4d, seq 1024
    ASSERT_EQ(m.ffn, 4 * m.hidden);
    ASSERT_FALSE(m.gated_mlp);
    const double paper = 72.0 * 8 * 1024.0 * 1024.0 + 6.0 * 8 * 1024.0 * 1024.0;

    EXPECT_NEAR(deepseek_flops_per_token(m), paper + 6.0 * 8 * 13 * 1024.0, 1e-3);
}

TEST(LearningRateRules, FollowTheBatch) {
    CotuneSpec spec;
    spec.lr_reference = 3e-4;
    const double ref = 4e6;

    spec.lr_rule = LrRule::fixed;
    EXPECT_DOUBLE_EQ(lr_opt(spec, 16e6, ref, 0), 3e-4);
    spec.lr_rule = LrRule::linear;
    EXPECT_DOUBLE_EQ(lr_opt(spec, 16e6, ref, 0), 12e-4);
    spec.lr_rule = LrRule::sqrt;
    EXPECT_DOUBLE_EQ(lr_opt(spec, 16e6, ref, 0), 6e-4);
    spec.lr_rule = LrRule::none;
    EXPECT_EQ(lr_opt(spec, 16e6, ref, 0), 0.0);
}

TEST(LearningRateRules, DeepSeekScalesAroundItsOptimumBatch) {
    // C = 1e24: lr_opt = 0.3118 x 1e-3 = 3.118e-4 at B_opt = 0.2920 x 1e24^0.3271 = 2.069107e7
    // tokens (the rule's own pair); another batch scales it by (B / B_opt)^exponent
    CotuneSpec spec;
    spec.lr_rule = LrRule::deepseek;
    const double b_opt = deepseek_batch_opt_tokens(1e24);

    EXPECT_NEAR(lr_opt(spec, b_opt, 0, 1e24), 3.118e-4, 1e-12);
    // square root by default (Adam): a quarter of the batch, half the learning rate
    EXPECT_NEAR(lr_opt(spec, b_opt / 4, 0, 1e24), 3.118e-4 / 2, 1e-12);
    EXPECT_NEAR(lr_opt(spec, 2.069107e7 * 4, 0, 1e24), 3.118e-4 * 2, 3.118e-4 * 2 * 1e-6);
    spec.lr_batch_exponent = 1.0;  // linear
    EXPECT_NEAR(lr_opt(spec, b_opt / 4, 0, 1e24), 3.118e-4 / 4, 1e-12);
    spec.lr_batch_exponent = 0.0;  // the rule's lr_opt at every batch
    EXPECT_NEAR(lr_opt(spec, b_opt / 4, 0, 1e24), 3.118e-4, 1e-12);
}

TEST(LearningRateRules, TableInterpolatesInLogLogAndHoldsItsEnds) {
    CotuneSpec spec;
    spec.lr_rule = LrRule::table;
    spec.lr_table = {{1e6, 1e-4}, {4e6, 4e-4}, {16e6, 5e-4}};

    EXPECT_DOUBLE_EQ(lr_opt(spec, 0.5e6, 0, 0), 1e-4);
    EXPECT_NEAR(lr_opt(spec, 2e6, 0, 0), 2e-4, 1e-15);  // halfway in log: sqrt(1e-4 x 4e-4)
    EXPECT_NEAR(lr_opt(spec, 8e6, 0, 0), std::sqrt(4e-4 * 5e-4), 1e-15);
    EXPECT_DOUBLE_EQ(lr_opt(spec, 64e6, 0, 0), 5e-4);
}

TEST(LearningRatePenalty, GrowsWithTheLogDistanceToTheOptimum) {
    LrPenaltySpec quadratic{LrPenaltyShape::quadratic, 0.1};
    LrPenaltySpec linear{LrPenaltyShape::linear, 0.1};
    const double ln2 = std::log(2.0);

    EXPECT_DOUBLE_EQ(lr_penalty(quadratic, 3e-4, 3e-4), 1.0);
    EXPECT_NEAR(lr_penalty(quadratic, 6e-4, 3e-4), 1.0 + 0.1 * ln2 * ln2, 1e-15);  // 1.048
    EXPECT_NEAR(lr_penalty(quadratic, 1.5e-4, 3e-4), 1.0 + 0.1 * ln2 * ln2, 1e-15);
    EXPECT_NEAR(lr_penalty(linear, 6e-4, 3e-4), 1.0 + 0.1 * ln2, 1e-15);
    EXPECT_DOUBLE_EQ(lr_penalty({LrPenaltyShape::none, 0.1}, 6e-4, 3e-4), 1.0);
    EXPECT_DOUBLE_EQ(lr_penalty(quadratic, 0.0, 3e-4), 1.0);  // not studied
}

}  // namespace
}  // namespace prism::cotune
