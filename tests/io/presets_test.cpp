#include "io/presets.hpp"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "io/experiment_loader.hpp"
#include "src/common/error.hpp"

namespace {

using prism::io::parse_experiment;
using prism::io::preset_names;
using prism::io::preset_text;

prism::Experiment with_model(const std::string& model) {
    return parse_experiment("[model]\npreset = \"" + model +
                                "\"\n[training]\nglobal_batch = 1024\n"
                                "[hardware.h]\npreset = \"h100-sxm\"\n",
                            "preset.toml");
}

prism::HardwareSpec gpu(const std::string& name) {
    return parse_experiment(
               "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n"
               "[hardware.h]\npreset = \"" +
                   name + "\"\n",
               "preset.toml")
        .hardware.at(0);
}

// Parameters of a decoder-only transformer counted from its shape, independently of the
// model code: per layer Q and O (h x h each), K and V (h x kv_heads*head_dim each), the MLP
// (2 or, gated, 3 matrices h x f), two norms; token embeddings (twice when the output layer is
// untied), learned position embeddings where the model has them (GPT-3, Megatron GPT).
double parameter_count(const prism::ModelSpec& m, bool tied_embeddings, bool learned_positions) {
    const double h = m.hidden;
    const double kv = static_cast<double>(m.kv_heads) * (h / m.heads);
    const double attention = 2 * h * h + 2 * h * kv;
    const double mlp = (m.gated_mlp ? 3.0 : 2.0) * h * m.ffn;
    const double per_layer = attention + mlp + 2 * h;
    const double embeddings = (tied_embeddings ? 1.0 : 2.0) * m.vocab * h +
                              (learned_positions ? static_cast<double>(m.seq) * h : 0.0);
    return m.layers * per_layer + embeddings + h;
}

struct PublishedSize {
    const char* preset;
    double parameters;  // as published
    bool tied_embeddings;
    bool learned_positions;
};

// Llama 3 model cards (8.03B, 70.6B) and the 405B safetensors total; GPT-3 paper Table 2.1;
// Megatron-LM SC21 Table 1 (1008B).
const PublishedSize kPublished[] = {
    {"llama3-8b", 8.03e9, false, false},    {"llama3-70b", 70.6e9, false, false},
    {"llama3-405b", 405.9e9, false, false}, {"gpt3-175b", 175.0e9, true, true},
    {"megatron-1t", 1008e9, true, true},
};

TEST(Presets, ModelAndGpuNamesAreListedSorted) {
    EXPECT_EQ(preset_names("models"),
              (std::vector<std::string>{"deepseek-v3", "gpt3-175b", "llama3-405b", "llama3-70b",
                                        "llama3-8b", "megatron-1t", "mixtral-8x22b", "mixtral-8x7b",
                                        "qwen3-235b-a22b", "qwen3-30b-a3b"}));
    EXPECT_EQ(preset_names("gpus"),
              (std::vector<std::string>{"a100-40gb", "a100-80gb", "b200", "b300", "gb200-nvl72",
                                        "gb300-nvl72", "h100-sxm", "h200"}));
    EXPECT_EQ(preset_names("stacks"),
              (std::vector<std::string>{"deepspeed", "llm-foundry", "megatron-core", "nemo-mlperf",
                                        "torchtitan"}));
    EXPECT_TRUE(preset_names("nonsense").empty());
    EXPECT_FALSE(preset_text("models", "llama3-7b").has_value());
}

TEST(Presets, EmbeddedTextEqualsTheFileInTheRepository) {
    for (const char* kind : {"models", "gpus", "variability", "stacks"}) {
        for (const std::string& name : preset_names(kind)) {
            const std::string path =
                std::string(PRISM_SOURCE_DIR) + "/configs/presets/" + kind + "/" + name + ".toml";
            std::ifstream in(path, std::ios::binary);
            std::ostringstream file;
            file << in.rdbuf();

            EXPECT_EQ(std::string(*preset_text(kind, name)), file.str()) << path;
        }
    }
}

TEST(Presets, ModelParameterCountsMatchPublishedSizesWithinTwoPercent) {
    for (const PublishedSize& published : kPublished) {
        const prism::Experiment e = with_model(published.preset);

        const double count =
            parameter_count(e.model, published.tied_embeddings, published.learned_positions);

        EXPECT_EQ(e.model.name, published.preset);
        EXPECT_FALSE(e.model.source.empty()) << published.preset;
        EXPECT_NEAR(count / published.parameters, 1.0, 0.02) << published.preset << ": " << count;
    }
}

// Parameters of an MoE model counted from its shape, independently of the model code: per layer
// the attention (GQA with head_dim d: Q and O a d x h, K and V g d x h; or MLA's five matrices
// and two latent norms), two norms, and the MLP: dense layers 3 h f, MoE layers the router E h
// and (E + shared) experts of 3 h f_e (SwiGLU) of which top_k + shared are active.
struct PublishedMoe {
    const char* preset;
    double total;   // as published
    double active;  // as published
};

// DeepSeek-V3 report abstract (671B / 37B); Qwen3 model cards (235B / 22B, 30.5B / 3.3B);
// Mistral AI's announcements (46.7B / 12.9B; 141B / 39B).
const PublishedMoe kPublishedMoe[] = {
    {"deepseek-v3", 671e9, 37e9},     {"qwen3-235b-a22b", 235e9, 22e9},
    {"qwen3-30b-a3b", 30.5e9, 3.3e9}, {"mixtral-8x7b", 46.7e9, 12.9e9},
    {"mixtral-8x22b", 141e9, 39e9},
};

std::pair<double, double> moe_parameter_count(const prism::ModelSpec& m) {
    const double h = m.hidden, a = m.heads;
    double attention = 0;
    if (m.attention == prism::AttentionKind::mla) {
        const double ql = m.q_lora_rank, kl = m.kv_lora_rank, n = m.qk_nope_head_dim,
                     r = m.qk_rope_head_dim, v = m.v_head_dim;
        attention = h * ql + ql * a * (n + r) + h * (kl + r) + kl * a * (n + v) + a * v * h;
    } else {
        const double d = m.head_dim(), g = m.kv_heads;
        attention = 2 * h * a * d + 2 * h * g * d;
    }
    const double expert = 3 * h * m.expert_ffn;
    const double dense = attention + 3 * h * m.ffn + 2 * h;
    const double moe_layers = m.layers - m.dense_layers;
    const double common = attention + 2 * h + m.experts * h;
    const double embeddings = 2.0 * m.vocab * h;
    const double total = m.dense_layers * dense +
                         moe_layers * (common + (m.experts + m.shared_experts) * expert) +
                         embeddings;
    const double active = m.dense_layers * dense +
                          moe_layers * (common + (m.top_k + m.shared_experts) * expert) +
                          embeddings;
    return {total, active};
}

TEST(Presets, MoeTotalAndActiveParametersMatchPublishedSizesWithinTwoPercent) {
    for (const PublishedMoe& published : kPublishedMoe) {
        const prism::Experiment e = with_model(published.preset);

        const auto [total, active] = moe_parameter_count(e.model);

        EXPECT_TRUE(e.model.is_moe()) << published.preset;
        EXPECT_NEAR(total / published.total, 1.0, 0.02) << published.preset << ": " << total;
        EXPECT_NEAR(active / published.active, 1.0, 0.02) << published.preset << ": " << active;
    }
}

TEST(Presets, EveryModelAndGpuPresetValueHasASourceComment) {
    for (const char* kind : {"models", "gpus", "stacks"}) {
        for (const std::string& name : preset_names(kind)) {
            std::istringstream text{std::string(*preset_text(kind, name))};
            std::string line;
            while (std::getline(text, line)) {
                if (line.empty() || line[0] == '#' || line.rfind("source", 0) == 0) continue;

                EXPECT_NE(line.find('#'), std::string::npos) << kind << "/" << name << ": " << line;
            }
        }
    }
}

TEST(Presets, GpuPresetsCarryDatasheetValues) {
    // NVIDIA datasheets: dense BF16 peak, HBM capacity and bandwidth, NVLink per direction,
    // NIC per GPU (Gb/s / 8).
    const prism::HardwareSpec h100 = gpu("h100-sxm");
    EXPECT_DOUBLE_EQ(h100.gpu.peak_bf16_flop_per_s, 989e12);
    EXPECT_DOUBLE_EQ(h100.gpu.peak_fp8_flop_per_s, 1979e12);
    EXPECT_DOUBLE_EQ(h100.gpu.hbm_bytes_per_s, 3.35e12);
    EXPECT_DOUBLE_EQ(h100.nvlink_bytes_per_s, 450e9);
    EXPECT_DOUBLE_EQ(h100.nic_bytes_per_s, 50e9);
    const prism::HardwareSpec a100 = gpu("a100-80gb");
    EXPECT_DOUBLE_EQ(a100.gpu.peak_bf16_flop_per_s, 312e12);
    EXPECT_DOUBLE_EQ(a100.gpu.peak_fp8_flop_per_s, 0.0);
    EXPECT_DOUBLE_EQ(a100.gpu.hbm_bytes_per_s, 2039e9);
    EXPECT_DOUBLE_EQ(a100.nic_bytes_per_s, 25e9);
    // the 40GB part: the same die, links and kernel fractions; HBM2 at 1,555 GB/s, 40,536 MiB
    const prism::HardwareSpec a100_40 = gpu("a100-40gb");
    EXPECT_DOUBLE_EQ(a100_40.gpu.peak_bf16_flop_per_s, 312e12);
    EXPECT_DOUBLE_EQ(a100_40.gpu.hbm_bytes_per_s, 1555e9);
    EXPECT_NEAR(a100_40.gpu.hbm_bytes, 42505273344.0, 0.01 * 1024 * 1024 * 1024);
    EXPECT_DOUBLE_EQ(a100_40.nic_bytes_per_s, a100.nic_bytes_per_s);
    EXPECT_DOUBLE_EQ(a100_40.gpu.gemm.max_efficiency, a100.gpu.gemm.max_efficiency);
    const prism::HardwareSpec h200 = gpu("h200");
    EXPECT_DOUBLE_EQ(h200.gpu.hbm_bytes,
                     139.8 * 1024 * 1024 * 1024);  // "139.8 GiB" as CUDA reports
    EXPECT_DOUBLE_EQ(h200.gpu.hbm_bytes_per_s, 4.8e12);
    const prism::HardwareSpec b200 = gpu("b200");
    EXPECT_DOUBLE_EQ(b200.gpu.peak_bf16_flop_per_s, 2250e12);
    EXPECT_DOUBLE_EQ(b200.nvlink_bytes_per_s, 900e9);
    // Blackwell Ultra and the NVL72 racks: dense = with-sparsity / 2; per GPU = rack / 72
    const prism::HardwareSpec b300 = gpu("b300");
    EXPECT_DOUBLE_EQ(b300.gpu.peak_bf16_flop_per_s, 36e15 / 8 / 2);
    EXPECT_DOUBLE_EQ(b300.gpu.hbm_bytes, 288e9);    // 288 GB HBM3e per GPU (2.3 TB / 8)
    EXPECT_DOUBLE_EQ(b300.nic_bytes_per_s, 100e9);  // ConnectX-8 800 Gb/s
    const prism::HardwareSpec gb200 = gpu("gb200-nvl72");
    EXPECT_DOUBLE_EQ(gb200.gpu.peak_bf16_flop_per_s, 10e15 / 2 / 2);  // superchip of 2 GPUs
    EXPECT_DOUBLE_EQ(gb200.gpu.peak_fp8_flop_per_s, 20e15 / 2 / 2);
    EXPECT_DOUBLE_EQ(gb200.gpu.hbm_bytes, 185.0 * 1024 * 1024 * 1024);  // 189471 MiB reported
    EXPECT_DOUBLE_EQ(gb200.gpu.hbm_bytes_per_s, 576e12 / 72);
    EXPECT_DOUBLE_EQ(gb200.nvlink_bytes_per_s, 1.8e12 / 2);
    EXPECT_DOUBLE_EQ(gb200.nic_bytes_per_s, 50e9);  // ConnectX-7 400 Gb/s
    const prism::HardwareSpec gb300 = gpu("gb300-nvl72");
    EXPECT_DOUBLE_EQ(gb300.gpu.peak_bf16_flop_per_s, 360e15 / 72 / 2);
    EXPECT_DOUBLE_EQ(gb300.gpu.peak_fp8_flop_per_s, 720e15 / 72 / 2);
    EXPECT_DOUBLE_EQ(gb300.nic_bytes_per_s, 100e9);
    for (const std::string& name : preset_names("gpus")) {
        const prism::HardwareSpec hw = gpu(name);
        const bool rack_scale = name.ends_with("-nvl72");
        // NVL72: 18 trays of 4 GPUs in one NVLink domain; the others one 8-GPU node
        EXPECT_EQ(hw.gpus_per_node, rack_scale ? 4 : 8) << name;
        EXPECT_EQ(hw.nvlink_domain_gpus(), rack_scale ? 72 : 8) << name;
        EXPECT_GT(hw.nvlink_latency_s, 0) << name;
        EXPECT_GT(hw.nic_latency_s, 0) << name;
        EXPECT_FALSE(hw.gpu.source.empty()) << name;
    }
}

TEST(Presets, EveryVariabilityPresetParses) {
    for (const std::string& name : preset_names("variability")) {
        const std::string text =
            "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n"
            "[hardware.h]\npreset = \"h100-sxm\"\n[variability]\npreset = \"" +
            name + "\"\n";

        const prism::Experiment e = parse_experiment(text, "preset.toml");

        EXPECT_EQ(e.variability.source.substr(0, name.size()), name);
    }
}

TEST(Presets, FileKeysOverrideTheVariabilityPresetKeyByKey) {
    const std::vector<std::string> names = preset_names("variability");
    if (names.empty()) GTEST_SKIP() << "no variability preset embedded";
    const std::string base =
        "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n"
        "[hardware.h]\npreset = \"h100-sxm\"\n[variability]\npreset = \"" +
        names[0] + "\"\n";

    const prism::Experiment plain = parse_experiment(base, "exp.toml");
    const prism::Experiment overridden =
        parse_experiment(base +
                             "gemm = { dist = \"gamma\", cv = 0.123 }\n[variability.persistent]\n"
                             "slow_factor = 7.5\n",
                         "exp.toml");

    const auto gemm = static_cast<std::size_t>(prism::KernelClass::gemm);
    EXPECT_EQ(overridden.variability.transient[gemm].kind, prism::DistKind::gamma);
    EXPECT_DOUBLE_EQ(overridden.variability.transient[gemm].cv, 0.123);
    EXPECT_DOUBLE_EQ(overridden.variability.persistent.slow_factor, 7.5);
    for (std::size_t k = 0; k < prism::kKernelClassCount; ++k) {
        if (k == gemm) continue;
        EXPECT_EQ(overridden.variability.transient[k].kind, plain.variability.transient[k].kind);
        EXPECT_EQ(overridden.variability.transient[k].cv, plain.variability.transient[k].cv);
    }
    EXPECT_EQ(overridden.variability.persistent.slow_probability,
              plain.variability.persistent.slow_probability);
    EXPECT_EQ(overridden.variability.persistent.spatial.cv,
              plain.variability.persistent.spatial.cv);
}

TEST(Presets, ExplicitFieldsOverrideThePreset) {
    const prism::Experiment e = parse_experiment(
        "[model]\npreset = \"llama3-8b\"\nlayers = 16\n[training]\nglobal_batch = 8\n"
        "[hardware.h]\npreset = \"h100-sxm\"\nhbm_capacity = \"94 GB\"\n",
        "exp.toml");

    EXPECT_EQ(e.model.name, "llama3-8b");
    EXPECT_EQ(e.model.layers, 16);
    EXPECT_EQ(e.model.hidden, 4096);
    EXPECT_DOUBLE_EQ(e.hardware[0].gpu.hbm_bytes, 94e9);
    EXPECT_DOUBLE_EQ(e.hardware[0].gpu.peak_bf16_flop_per_s, 989e12);
}

}  // namespace
