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

ModelSpec llama3(int layers, int hidden, int heads, int ffn) {
    ModelSpec m;  // Llama 3 (config.json of the Hugging Face releases)
    m.layers = layers;
    m.hidden = hidden;
    m.heads = heads;
    m.kv_heads = 8;
    m.ffn = ffn;
    m.gated_mlp = true;
    m.vocab = 128256;
    m.tied_embeddings = false;
    m.seq = 8192;
    return m;
}

TEST(Flops, ModelFlopsAreThreeForwardPassesWithCausalAttention) {
    const ModelSpec m = gpt3_175b();

    // forward per sequence: 96 layers x (24 s h^2 + 2 s^2 h: half of 4 s^2 h) + 2 s h V
    const double expected =
        3.0 * 8 * (96 * (7421703487488.0 + 0.5 * 206158430208.0) + 2.0 * 2048 * 12288.0 * 51200.0);

    EXPECT_DOUBLE_EQ(prism::model_flops_per_step(m, 8), expected);
}

TEST(Flops, Llama3SeventyBModelFlopsPerTokenMatchHandCalculation) {
    const ModelSpec m = llama3(80, 8192, 64, 28672);

    const double per_token = prism::model_flops_per_step(m, 1) / m.seq;

    // by hand, 6 N + 6 L s h per token, N the weight matrices as they are:
    //   per layer  h (h + 2 h/8) + h^2 + 3 h f = 83,886,080 + 67,108,864 + 704,643,072
    //                                          = 855,638,016
    //   N = 80 x 855,638,016 + V h (128,256 x 8,192 = 1,050,673,152) = 69,501,714,432
    //   6 N = 417,010,286,592;  causal attention 6 x 80 x 8,192 x 8,192 = 32,212,254,720
    EXPECT_DOUBLE_EQ(per_token, 449222541312.0);
}

TEST(Flops, Llama3FourHundredFiveBModelFlopsPerTokenMatchHandCalculation) {
    const ModelSpec m = llama3(126, 16384, 128, 53248);

    const double per_token = prism::model_flops_per_step(m, 1) / m.seq;

    // per layer h (h + 2 h/16) + h^2 + 3 h f = 301,989,888 + 268,435,456 + 2,617,245,696
    //                                        = 3,187,671,040
    // N = 126 x 3,187,671,040 + 128,256 x 16,384 = 403,747,897,344; 6 N = 2,422,487,384,064
    // causal attention 6 x 126 x 8,192 x 16,384 = 101,468,602,368
    EXPECT_DOUBLE_EQ(per_token, 2523955986432.0);
}

TEST(Flops, MegatronFormulaOvercountsLlamaModelFlops) {
    // Issue 32: Megatron's formula (MHA, 4h MLP, full square, recompute) read as model FLOPs
    // overstates Llama 3 70B by its ratio to 6 N + causal attention: 96 L h^2 (1 + s/6h +
    // V/16Lh) = 6.0760e11 / 4.4922e11 per token
    const ModelSpec m = llama3(80, 8192, 64, 28672);
    const double megatron =
        96.0 * 80 * 8192.0 * 8192.0 * (1 + 8192.0 / (6 * 8192.0) + 128256.0 / (16.0 * 80 * 8192));

    EXPECT_DOUBLE_EQ(prism::megatron_flops_per_step(m, 1) / m.seq, megatron);
    EXPECT_NEAR(megatron / 449222541312.0, 1.3526, 1e-4);
}

TEST(Flops, HardwareFlopsWithFullRecomputeAreMegatronsForGpt) {
    // MHA, 4h MLP, unfused attention, full recompute: what Megatron's closed form assumes
    const ModelSpec m = gpt3_175b();
    const prism::TrainingSpec unfused;

    const double hw = prism::hardware_flops_per_step(m, unfused, prism::Recompute::full, 4);

    EXPECT_NEAR(hw / prism::megatron_flops_per_step(m, 4), 1.0, 1e-14);
}

TEST(Flops, HardwareFlopsCountRecomputeAndFlashBackward) {
    const ModelSpec m = gpt3_175b();
    prism::TrainingSpec tr;
    // per sequence and layer: G = 24 s h^2 GEMMs, A = 4 s^2 h the full square
    const double g = 7421703487488.0, a = 206158430208.0;
    const double logits = 3.0 * 2.0 * 2048 * 12288.0 * 51200.0;

    // unfused: 3 G + 3 A; selective recomputes the attention core: + A
    EXPECT_DOUBLE_EQ(prism::hardware_flops_per_step(m, tr, prism::Recompute::none, 1),
                     96 * (3 * g + 3 * a) + logits);
    EXPECT_DOUBLE_EQ(prism::hardware_flops_per_step(m, tr, prism::Recompute::selective, 1),
                     96 * (3 * g + 4 * a) + logits);
    // flash: A/2 forward, backward 2.5 x that (the scores recomputed), selective + A/2
    tr.flash_attention = true;
    EXPECT_DOUBLE_EQ(prism::hardware_flops_per_step(m, tr, prism::Recompute::none, 1),
                     96 * (3 * g + 1.75 * a) + logits);
    EXPECT_DOUBLE_EQ(prism::hardware_flops_per_step(m, tr, prism::Recompute::full, 1),
                     96 * (4 * g + 2.25 * a) + logits);
}

}  // namespace
