#include "src/model/flops.hpp"

#include <gtest/gtest.h>

namespace {

using prism::ModelSpec;

ModelSpec gpt3_175b() {
    ModelSpec m;
    m.layers = 96;
    m.hidden = 12288;
    m.heads = 96;
    m.kv_heads = 96;
    m.ffn = 4 * 12288;
    m.vocab = 51200;
    m.seq = 2048;
    return m;
}

TEST(Flops, Gpt3LayerForwardIsTwentyFourBshSquaredPlusFourBsSquaredH) {
    const ModelSpec m = gpt3_175b();

    const auto f = prism::layer_forward_flops(m, 1);

    // by hand: 24 b s h^2 = 24 * 2048 * 12288^2 = 7,421,703,487,488
    //          4 b s^2 h  = 4 * 2048^2 * 12288  =   206,158,430,208
    EXPECT_DOUBLE_EQ(f.total(), 7627861917696.0);
    EXPECT_DOUBLE_EQ(f.attention, 206158430208.0);
}

TEST(Flops, MegatronStepCountMatchesHandCalculation) {
    const ModelSpec m = gpt3_175b();

    // 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) with B = 1, computed by hand (python, doubles)
    EXPECT_NEAR(prism::megatron_flops_per_step(m, 1), 2936829917528064.0, 1.0);
}

TEST(Flops, GroupedQueryAttentionShrinksOnlyTheKvPartOfQkv) {
    ModelSpec m = gpt3_175b();
    m.hidden = 8192;
    m.heads = 64;
    m.kv_heads = 8;  // Llama-3 70B: K and V are 1/8 of Q's width

    const auto f = prism::layer_forward_flops(m, 2);

    // 2 b s h (h + 2 h g / a) = 2 b s h^2 (1 + 2/8) = 2.5 b s h^2
    EXPECT_DOUBLE_EQ(f.qkv, 2.5 * 2 * 2048.0 * 8192.0 * 8192.0);
}

TEST(Flops, GatedMlpHasThreeGemms) {
    ModelSpec m = gpt3_175b();
    m.gated_mlp = true;
    m.ffn = 28672;

    const auto f = prism::layer_forward_flops(m, 1);

    EXPECT_DOUBLE_EQ(f.mlp, 6.0 * 2048 * 12288.0 * 28672.0);
}

TEST(Flops, GptLayerHasTwelveHSquaredPlusThirteenHParameters) {
    const ModelSpec m = gpt3_175b();
    const double h = m.hidden;

    EXPECT_DOUBLE_EQ(prism::layer_params(m), 12 * h * h + 13 * h);
    // GPT-3 175B: 174.6e9 parameters (Brown et al. 2020 round this to 175B)
    EXPECT_NEAR(prism::total_params(m) / 1e9, 174.6, 0.1);
}

TEST(Flops, UntiedOutputLayerCountsItsOwnWeights) {
    ModelSpec m;  // Llama 3 8B (config.json)
    m.layers = 32;
    m.hidden = 4096;
    m.heads = 32;
    m.kv_heads = 8;
    m.ffn = 14336;
    m.gated_mlp = true;
    m.vocab = 128256;
    m.tied_embeddings = false;

    // 8.03e9 (Hugging Face model card); the count keeps biases Llama does not have (0.01%)
    EXPECT_NEAR(prism::total_params(m) / 1e9, 8.03, 0.005);
    m.tied_embeddings = true;
    EXPECT_NEAR(prism::total_params(m) / 1e9, 8.03 - 0.525, 0.005);
}

TEST(Flops, ModelFlopsAreThreeForwardPasses) {
    const ModelSpec m = gpt3_175b();

    const double expected = 3.0 * 8 * (96 * 7627861917696.0 + 2.0 * 2048 * 12288.0 * 51200.0);

    EXPECT_DOUBLE_EQ(prism::model_flops_per_step(m, 8), expected);
}

}  // namespace
