#pragma once

// The published H100 measurements of tests/data/reference (NeMo / Megatron-Bridge performance
// summaries, llm-foundry's MPT throughput tables) as experiments of the model, with the fit /
// held-out split and the size classes the calibration reports. Header-only, shared by
// prism_calibrate and tests/calibration like reference_data.hpp.

#include <string>
#include <vector>

#include "tools/calibration/reference_data.hpp"

namespace prism::calibration {

/// Size classes of the error report, by total parameters.
inline const char* size_class(double params) {
    if (params < 2e9) return "<2B";
    if (params < 15e9) return "2-15B";
    if (params < 100e9) return "15-100B";
    return ">100B";
}

/// Step time (s) from a throughput in tokens per second per GPU.
inline double step_from_throughput(double tokens_per_s_per_gpu, std::int64_t global_batch, int seq,
                                   int gpus) {
    return double(global_batch) * seq / (tokens_per_s_per_gpu * gpus);
}

/// One of NVIDIA's NeMo / Megatron-Bridge performance tables on the given GPU preset (nemo_h100:
/// NeMo 24.07 / 24.03 (long sequences) and Megatron-Bridge 25.09-26.02 performance summaries on
/// DGX-H100; nemo_long_b200); measured = step time (s). Settings of NVIDIA's performance recipes
/// (NeMo- Framework-Launcher conf/training, Megatron-Bridge scripts/performance): Transformer
/// Engine with FP8, fused (flash) attention, no activation recomputation, sequence parallelism and
/// --tp-comm-overlap as the csv's columns say (with TP, but the NeMo 24.03 long-sequence rows:
/// the launcher's llama2_7b.yaml at 24.03.01 sets both off and has no userbuffer config for
/// their hidden size), the distributed optimizer with overlapped gradient reduction and
/// parameter gather (Megatron-FSDP where the table says FSDP), Megatron's embedding and loss
/// pipeline slots for Llama 3.1 405B's 126 layers.
/// Split: every other row of each table fits (the first, third, ...); the GPT3-175B rows are
/// held out (their configuration is MLPerf's, which checks the model elsewhere).
inline std::vector<Case> nemo_table(const std::string& data_dir, const std::string& file,
                                    const std::string& gpu) {
    const Table t = read_table(data_file(data_dir, file.c_str()));
    std::vector<Case> cases;
    std::string last_table;
    int index_in_table = 0;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        Case c;
        c.set = t.text(i, "table");
        index_in_table = c.set == last_table ? index_in_table + 1 : 0;
        last_table = c.set;
        c.label = c.set + " " + t.text(i, "model");
        // Llama 2 / 3 and Nemotron train without dropout (NeMo's LlamaConfig and NemotronConfig:
        // hidden_dropout = attention_dropout = 0.0; Megatron-Bridge's Llama providers alike); the
        // GPT3 rows keep Megatron's default masks (their NeMo 1.0 configs not read)
        c.dropout = t.text(i, "model").rfind("GPT3", 0) == 0;
        // bf16 gradient buffer and reduction in NVIDIA's performance runs: NeMo 1's launcher
        // scripts pass optim.grad_sync_dtype=bf16 (NeMo-Framework-Launcher
        // examples/training/*/h100/*.sh), NeMo 2's set_precision_configs and Megatron-Bridge's
        // performance overrides set grad_reduce_in_fp32 = False
        c.grad_reduce_in_fp32 = false;
        c.layers = int(t.number(i, "layers"));
        c.hidden = int(t.number(i, "hidden"));
        c.heads = int(t.number(i, "heads"));
        c.kv_heads = int(t.number(i, "kv_heads"));
        c.ffn = int(t.number(i, "ffn"));
        c.gated_mlp = t.number(i, "gated") != 0;
        c.vocab = int(t.number(i, "vocab"));
        c.tied_embeddings = t.number(i, "tied") != 0;
        c.seq = int(t.number(i, "seq"));
        const int gpus = int(t.number(i, "gpus"));
        c.global_batch = std::int64_t(t.number(i, "global_batch"));
        c.microbatch = int(t.number(i, "micro_batch"));
        c.tp = int(t.number(i, "tp"));
        c.pp = int(t.number(i, "pp"));
        c.cp = int(t.number(i, "cp"));
        c.interleave = int(t.number(i, "vp"));
        c.dp = gpus / (c.tp * c.pp * c.cp);
        c.zero_stage = t.number(i, "fsdp") != 0 ? 3 : 1;
        c.precision = t.text(i, "precision");
        c.flash_attention = true;
        c.sequence_parallel = t.number(i, "sequence_parallel") != 0;
        c.tp_comm_overlap = t.number(i, "tp_comm_overlap") != 0;
        c.overlap_grad_reduce = true;
        c.overlap_param_gather = true;
        c.pipeline_slots = c.layers % (c.pp * c.interleave) != 0;
        c.gpu = gpu;
        c.measured =
            step_from_throughput(t.number(i, "tokens_per_s_per_gpu"), c.global_batch, c.seq, gpus);
        c.train = index_in_table % 2 == 0 && t.text(i, "model") != "GPT3-175B";
        cases.push_back(c);
    }
    return cases;
}

inline std::vector<Case> nemo_h100(const std::string& data_dir) {
    return nemo_table(data_dir, "nemo_h100.csv", "h100-sxm");
}

/// NeMo 25.04's long-sequence table (docs/source/performance/performance_long_sequence.md):
/// Llama 3 8B at 8K-1M tokens with CP up to 16 on DGX-B200, FP8, the same TE / cuDNN fused
/// attention and settings as nemo_h100's; its TFLOP/s per GPU converted to tokens/s per GPU with
/// NeMo's Llama 3 FLOPs formula (tests/data/reference/README.md). The same split.
inline std::vector<Case> nemo_long_b200(const std::string& data_dir) {
    return nemo_table(data_dir, "nemo_long_b200.csv", "b200");
}

/// llm-foundry (MosaicML) MPT throughput tables (scripts/train/benchmarking/README.md): PyTorch
/// FSDP FULL_SHARD over all GPUs (ZeRO-3, prefetched), flash attention, full activation
/// checkpointing where the table says so; measured = step time (s). MPT: GeLU MLP of 4h, tied
/// embedding, a learned position embedding (not modelled: a lookup), no dropout (MPTConfig's
/// attn_pdrop, resid_pdrop and emb_pdrop default to 0.0 and the MPT yamls set none). The
/// llm-foundry stack (configs/presets/stacks/llm-foundry.toml); each table is a source of its own
/// (`set`) on its GPU preset. Split: every other row (the first, third, ...) fits.
inline std::vector<Case> llmfoundry_table(const std::string& data_dir, const std::string& file,
                                          const std::string& set, const std::string& gpu) {
    const Table t = read_table(data_file(data_dir, file.c_str()));
    std::vector<Case> cases;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        Case c;
        c.set = set;
        c.layers = int(t.number(i, "layers"));
        c.hidden = int(t.number(i, "hidden"));
        c.heads = int(t.number(i, "heads"));
        c.ffn = int(t.number(i, "ffn"));
        c.vocab = int(t.number(i, "vocab"));
        c.seq = int(t.number(i, "seq"));
        const int gpus = int(t.number(i, "gpus"));
        c.global_batch = std::int64_t(t.number(i, "global_batch"));
        c.microbatch = int(t.number(i, "micro_batch"));
        c.dp = gpus;
        // FSDP's sharding strategy: FULL_SHARD is ZeRO-3 (per-layer gathers, prefetched);
        // SHARD_GRAD_OP keeps the gathered parameters from the forward through the backward and
        // shards gradients and optimizer state: ZeRO-2's traffic, its gradient reduce-scatter
        // beside the backward and its gather beside the forward
        const std::string sharding = t.text(i, "sharding");
        if (sharding != "FULL_SHARD" && sharding != "SHARD_GRAD_OP") {
            throw IoError(file + ": row " + std::to_string(i + 1) + ": sharding '" + sharding +
                          "' (FULL_SHARD or SHARD_GRAD_OP)");
        }
        c.zero_stage = sharding == "FULL_SHARD" ? 3 : 2;
        c.overlap_grad_reduce = true;
        c.overlap_param_gather = true;
        c.precision = t.text(i, "precision");
        c.recompute = t.text(i, "recompute");
        c.flash_attention = true;
        c.dropout = false;
        c.stack = "llm-foundry";
        // Composer's FSDP mixed precision (the csv's mp_mode): DEFAULT (amp_bf16, amp_fp8)
        // reduces in fp32; PURE rows (the A100 40GB table, the A100 80GB table's 70B rows) ran
        // Composer's precision "bf16" (the tables' Precision column, not amp_bf16): the model in
        // bf16, its gradients, optimizer state and loss too
        c.pure_bf16 = t.text(i, "mp_mode") == "PURE";
        c.grad_reduce_in_fp32 = !c.pure_bf16;
        c.gpu = gpu;
        c.measured =
            step_from_throughput(t.number(i, "tokens_per_s_per_gpu"), c.global_batch, c.seq, gpus);
        c.label = fmt::format("{} s{} g{} mb{} {}", t.text(i, "model"), c.seq, gpus, c.microbatch,
                              c.precision);
        c.train = i % 2 == 0;
        cases.push_back(c);
    }
    return cases;
}

/// The H100 80GB BF16 and FP8 tables (one source: "llm-foundry").
inline std::vector<Case> llmfoundry_h100(const std::string& data_dir) {
    return llmfoundry_table(data_dir, "llmfoundry_mpt_h100.csv", "llm-foundry", "h100-sxm");
}

/// The "H100 80GB BF16 (Large Scale, >= 128 GPUs)" table: 18 rows of MPT 1B-70B on 128-512
/// H100, one microbatch per step, added to the README three months after the other H100 tables
/// (llm-foundry commit 5e85bd62d, 2024-01-06): a measurement campaign and a source of its own.
inline std::vector<Case> llmfoundry_h100_large(const std::string& data_dir) {
    return llmfoundry_table(data_dir, "llmfoundry_mpt_h100_large.csv", "llm-foundry-h100-large",
                            "h100-sxm");
}

/// The "A100 40GB with 1600 Gbps node-node interconnect (RoCE)" table: 78 rows of MPT 125M-70B on
/// 8-128 A100 40GB, every one pure bf16 ("bf16", FSDP mixed precision PURE: bf16 gradient
/// reduction), a source of its own ("llm-foundry-a100-40gb").
inline std::vector<Case> llmfoundry_a100_40gb(const std::string& data_dir) {
    return llmfoundry_table(data_dir, "llmfoundry_mpt_a100_40gb.csv", "llm-foundry-a100-40gb",
                            "a100-40gb");
}

/// The "A100 80GB with 1600 Gbps node-node interconnect (RoCE)" BF16 table: an earlier software
/// version (the README's tables predate its torch 2.0 update), a source of its own.
inline std::vector<Case> llmfoundry_a100(const std::string& data_dir) {
    return llmfoundry_table(data_dir, "llmfoundry_mpt_a100.csv", "llm-foundry-a100", "a100-80gb");
}

}  // namespace prism::calibration
