// Published configurations that ran must be predicted to fit (issue 34 item 5): NeMo's
// Nemotron-4 340B recipe on 128 H100 and NVIDIA's MLPerf Llama 3.1 405B configuration on 512
// H200, each with the settings its recipe states (sources beside each key; docs/hardware.md,
// "Memory terms").

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "io/experiment_loader.hpp"
#include "src/model/deterministic.hpp"

namespace {

using prism::Experiment;
using prism::io::parse_experiment;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// NeMo-Framework-Launcher launcher_scripts/conf/training/nemotron/nemotron_340b.yaml (commit
// 26e42fa): 96 layers, hidden 18432, 96 heads, 8 query groups, ffn 4 h, squared-ReLU (not
// gated), vocabulary 256000, seq 4096, untied output layer, tp 8, pp 8, vp 12, microbatch 1,
// sequence parallel, no recompute, mcore_distributed_optim with grad_sync_dtype: bf16,
// hidden_dropout = attention_dropout = ffn_dropout = 0.0, TP overlap; bf16 weights (no
// fp8_params key). NeMo 24.07's performance summary runs it in FP8 on 128 H100 with global
// batch 32 (tests/data/reference/nemo_h100.csv).
std::string nemotron_340b(bool recipe_terms) {
    std::string text =
        "[model]\nlayers = 96\nhidden = 18432\nheads = 96\nkv_heads = 8\nffn = 73728\n"
        "vocab = 256000\nseq = 4096\ngated_mlp = false\ntied_embeddings = false\n"
        "[training]\nglobal_batch = 32\nprecision = \"fp8\"\nflash_attention = true\n"
        "tp_comm_overlap = true\n";
    if (recipe_terms) text += "grad_reduce_in_fp32 = false\ndropout = false\n";
    return text +
           "[hardware.gpu]\npreset = \"h100-sxm\"\n"
           "[defaults]\ntp = 8\npp = 8\ndp = 2\nmicrobatch = 1\ninterleave = 12\n"
           "zero_stage = 1\nrecompute = \"none\"\nsequence_parallel = true\n";
}

// MLPerf Training v5.0, Nebius, 64 x 8 H200 (training_results_v5.0
// Nebius/.../config_DGXH200_64x8x144xtp4pp8cp2.sh and the log's NeMo config): Llama 3.1 405B,
// tp 4, pp 8, vp 8, cp 2, microbatch 1, global batch 1152, FP8 with FP8_PARAMS, the
// distributed optimizer, embedding and loss counted in the pipeline split (ASYM_PP_EMBED /
// ASYM_PP_LOSS); NVIDIA's pretrain.py builds MegatronMixedPrecision and the DDP config with
// grad_reduce_in_fp32=False; NeMo's Llama 3.1 config has no dropout.
std::string llama405b_h200(bool fp8_params) {
    return std::string(
               "[model]\npreset = \"llama3-405b\"\n"
               "[training]\nglobal_batch = 1152\nprecision = \"fp8\"\nflash_attention = true\n"
               "tp_comm_overlap = true\naccount_for_embedding_in_pipeline_split = true\n"
               "account_for_loss_in_pipeline_split = true\ngrad_reduce_in_fp32 = false\n"
               "dropout = false\n") +
           (fp8_params ? "fp8_params = true\n" : "") +
           "[hardware.gpu]\npreset = \"h200\"\n"
           "[defaults]\ntp = 4\npp = 8\ndp = 8\ncp = 2\nmicrobatch = 1\ninterleave = 8\n"
           "zero_stage = 1\nrecompute = \"none\"\nsequence_parallel = true\n";
}

TEST(PublishedMemory, NemotronFourRecipeFitsAnH100WithItsGradientDtypeAndNoDropout) {
    const Experiment recipe = parse_experiment(nemotron_340b(true), "nemotron.toml");
    const Experiment defaults = parse_experiment(nemotron_340b(false), "nemotron.toml");

    const auto r = prism::evaluate_deterministic(recipe, recipe.defaults);
    const auto d = prism::evaluate_deterministic(defaults, defaults.defaults);

    EXPECT_TRUE(r.feasible) << r.reason;
    EXPECT_FALSE(d.feasible);  // fp32 gradients and dropout masks: the recipe does not run that
    // bf16 gradients: 2 bytes less per parameter of stage 0, 12 layers (weight matrices
    // 2 h^2 + 2 h h_kv + 2 h f, biases and norms 7 h + 2 h_kv + f) and the embedding, / t
    const double layer = 2.0 * 18432 * 18432 + 2.0 * 18432 * 1536 + 2.0 * 18432 * 73728 +
                         7.0 * 18432 + 2.0 * 1536 + 73728;
    const double params = (12 * layer + 256000.0 * 18432) / 8;
    EXPECT_NEAR(d.memory.grads_bytes - r.memory.grads_bytes, 2 * params, 1.0);
    // no masks: 2 s b h / t per layer-microbatch (sequence parallel); stage 0 holds 2 (p - 1)
    // + (v - 1) p + 1 = 103 chunks of one layer (16 microbatches, p 8, v 12)
    EXPECT_NEAR(d.memory.activations_bytes - r.memory.activations_bytes,
                103 * 2.0 * 4096 * 18432 / 8, 1.0);
    std::printf("  nemotron-340b stage 0: %.2f GiB (defaults %.2f) of %.2f usable\n",
                r.memory.total_bytes() / kGiB, d.memory.total_bytes() / kGiB,
                0.96 * recipe.hardware[0].gpu.hbm_bytes / kGiB);
}

TEST(PublishedMemory, Llama405bMlperfConfigurationFitsAnH200) {
    for (const bool fp8_params : {true, false}) {
        const Experiment e = parse_experiment(llama405b_h200(fp8_params), "l405.toml");

        const auto r = prism::evaluate_deterministic(e, e.defaults);

        EXPECT_TRUE(r.feasible) << "fp8_params " << fp8_params << ": " << r.reason;
        std::printf("  llama 3.1 405b on h200, fp8_params %d: %.2f GiB\n", int(fp8_params),
                    r.memory.total_bytes() / kGiB);
    }
}

}  // namespace
