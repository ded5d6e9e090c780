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

namespace {

// DeepSeek-V3 (config.json of deepseek-ai/DeepSeek-V3): MLA, 256 routed experts, top 8, one
// shared expert, the first 3 layers dense.
ModelSpec deepseek_v3() {
    ModelSpec m;
    m.layers = 61;
    m.hidden = 7168;
    m.heads = 128;
    m.kv_heads = 128;
    m.ffn = 18432;
    m.gated_mlp = true;
    m.vocab = 129280;
    m.tied_embeddings = false;
    m.seq = 4096;
    m.experts = 256;
    m.top_k = 8;
    m.shared_experts = 1;
    m.expert_ffn = 2048;
    m.dense_layers = 3;
    m.attention = prism::AttentionKind::mla;
    m.q_lora_rank = 1536;
    m.kv_lora_rank = 512;
    m.qk_nope_head_dim = 128;
    m.qk_rope_head_dim = 64;
    m.v_head_dim = 128;
    return m;
}

TEST(Flops, DeepSeekV3MoeLayerForwardMatchesHandCalculation) {
    const ModelSpec m = deepseek_v3();

    const auto f = prism::moe_layer_forward_flops(m, 1);

    // by hand, s = 4096 tokens:
    // MLA projections 2 s (7168 x 1536 + 1536 x 128 x 192 + 7168 x 576 + 512 x 128 x 256)
    EXPECT_DOUBLE_EQ(f.qkv, 570693779456.0);
    // scores and values 2 s^2 x 128 heads x (128 + 64 + 128)
    EXPECT_DOUBLE_EQ(f.attention, 1374389534720.0);
    // output 2 s x 128 x 128 x 7168
    EXPECT_DOUBLE_EQ(f.projection, 962072674304.0);
    // 8 routed + 1 shared SwiGLU experts: 2 s x 7168 x 2048 x 3 x 9
    EXPECT_DOUBLE_EQ(f.mlp, 3246995275776.0);
    // router logits 2 s x 7168 x 256
    EXPECT_DOUBLE_EQ(f.router, 15032385536.0);
}

TEST(Flops, MixtralMoeLayerCountsTopTwoOfEightExperts) {
    ModelSpec m;
    m.layers = 32;
    m.hidden = 4096;
    m.heads = 32;
    m.kv_heads = 8;
    m.gated_mlp = true;
    m.vocab = 32000;
    m.seq = 4096;
    m.ffn = 4 * 4096;
    m.experts = 8;
    m.top_k = 2;
    m.expert_ffn = 14336;

    const auto f = prism::moe_layer_forward_flops(m, 2);

    // by hand, b s = 8192 tokens: QKV 2 b s h (h + 2 x 1024), scores 4 b s^2 h, output
    // 2 b s h^2, two SwiGLU experts 2 b s h f_e x 3 x 2, router 2 b s h x 8
    EXPECT_DOUBLE_EQ(f.qkv, 412316860416.0);
    EXPECT_DOUBLE_EQ(f.attention, 549755813888.0);
    EXPECT_DOUBLE_EQ(f.projection, 274877906944.0);
    EXPECT_DOUBLE_EQ(f.mlp, 5772436045824.0);
    EXPECT_DOUBLE_EQ(f.router, 536870912.0);
}

TEST(Flops, ModelFlopsOfAnMoeModelSumDenseAndMoeLayersSeparately) {
    const ModelSpec m = deepseek_v3();

    // 3 dense layers, 58 MoE layers, causal attention (half the square), logits; x3 for the
    // backward. Terms by hand for one 4096-token sequence:
    const double attention_causal = 1374389534720.0 / 2;
    const double attention_rest = 570693779456.0 + 962072674304.0;
    const double dense_mlp = 2.0 * 4096 * 7168 * 18432 * 3;
    const double moe_mlp = 3246995275776.0 + 15032385536.0;
    const double logits = 2.0 * 4096 * 7168 * 129280;
    const double expected =
        3 * (61 * (attention_causal + attention_rest) + 3 * dense_mlp + 58 * moe_mlp + logits);

    EXPECT_NEAR(prism::model_flops_per_step(m, 1) / expected, 1.0, 1e-12);
}

TEST(Flops, MoeParameterCountsMatchTheDeepSeekV3Report) {
    const ModelSpec m = deepseek_v3();

    // DeepSeek-V3 report: 671B total, 37B activated per token (main model, no MTP module)
    EXPECT_NEAR(prism::total_params(m) / 671e9, 1.0, 0.01);
    EXPECT_NEAR(prism::active_params(m) / 37e9, 1.0, 0.02);
    // routed experts of the mean layer: 58 x 256 x 3 x 7168 x 2048 / 61
    EXPECT_DOUBLE_EQ(prism::layer_expert_params(m), 58.0 * 256 * 3 * 7168 * 2048 / 61);
}

}  // namespace
