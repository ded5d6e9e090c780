#pragma once

// Every published source of tests/data/reference as rows of the model, for the leave-one-source-
// out calibration (`prism_calibrate loso`, docs/calibration.md). A source is one team's table for
// one software version; each row names its GPU preset and its software stack preset
// (configs/presets/stacks). Header-only, shared by prism_calibrate and tests/calibration.

#include <string>
#include <vector>

#include "tools/calibration/h100_reference_data.hpp"
#include "tools/calibration/reference_data.hpp"

namespace prism::calibration {

/// One row of a source: the case (its set = the source's name), what is measured.
struct SourceRow {
    Case c;
    Quantity q = Quantity::step_time_s;
};

/// The shared MLPerf Training medians (tests/data/reference/mlperf_medians.csv, from the
/// per-step logs of MLPerf Training v4.1-v5.1; LICENSE.NVIDIA-mlperf): NVIDIA's NeMo MLPerf
/// implementation on every system, so the nemo-mlperf stack. Settings of NVIDIA's MLPerf configs:
/// FP8 (FP8 parameters where the row says so), fused attention, no activation recomputation,
/// sequence parallelism with TP, TP communication overlap where the row says so (NVIDIA's configs
/// export TP_COMM_OVERLAP=True; the University of Florida's 405B config comments it out), the
/// distributed optimizer with
/// overlapped gradient reduction and parameter gather, Megatron's embedding and loss pipeline
/// slots where the layers do not divide (Llama 3.1 405B: 126 layers on pp 8, vp 8).
inline std::vector<Case> mlperf_medians(const std::string& data_dir) {
    const Table t = read_table(data_file(data_dir, "mlperf_medians.csv"));
    std::vector<Case> cases;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        Case c;
        c.set = t.text(i, "source");
        c.stack = "nemo-mlperf";
        c.gpu = t.text(i, "gpu");
        const int gpus = read_shape_and_batch(t, i, c);
        c.kv_heads = int(t.number(i, "kv_heads"));
        c.ffn = int(t.number(i, "ffn"));
        c.gated_mlp = t.number(i, "gated") != 0;
        c.tied_embeddings = t.number(i, "tied") != 0;
        c.tp = int(t.number(i, "tp"));
        c.pp = int(t.number(i, "pp"));
        c.cp = int(t.number(i, "cp"));
        c.interleave = int(t.number(i, "vp"));
        c.dp = gpus / (c.tp * c.pp * c.cp);
        c.zero_stage = 1;
        c.precision = t.text(i, "precision");
        c.fp8_params = t.number(i, "fp8_params") != 0;
        c.flash_attention = true;
        c.sequence_parallel = c.tp > 1;
        c.tp_comm_overlap = t.number(i, "tp_comm_overlap") != 0;
        c.overlap_grad_reduce = true;
        c.overlap_param_gather = true;
        c.pipeline_slots = c.layers % (c.pp * c.interleave) != 0;
        c.measured = t.number(i, "median_step_s");
        c.label = fmt::format("{} {} x{}", t.text(i, "model"), c.gpu, gpus);
        // NeMo's Llama 3.1 configuration: hidden and attention dropout 0.0 (the MLPerf examples
        // say so too); GPT-3 keeps Megatron's default masks
        c.dropout = t.text(i, "model").rfind("Llama", 0) != 0;
        // bf16 gradient buffer: MegatronMixedPrecision(grad_reduce_in_fp32=False) in the
        // submissions' pretrain.py (configs/examples/mlperf)
        c.grad_reduce_in_fp32 = false;
        cases.push_back(c);
    }
    return cases;
}

/// BLOOM 176B (BigScience, Megatron-DeepSpeed) on 384 A100 80GB of Jean Zay: "about 150
/// TFLOPs" per GPU (bigscience.notion.site, "BigScience 176B Model"; Le Scao et al. 2022, BLOOM
/// paper, section 3.4: 48 nodes of 8 A100 80GB, four 100 Gb/s Omni-Path links per node). The
/// tr11-176B-ml training script (bigscience-workshop/bigscience): tp 4, pp 12, dp 8, micro batch
/// 2, global batch 2048, seq 2048, bf16, ZeRO stage 1, activation checkpointing; 70 layers,
/// hidden 14336, 112 heads, vocabulary 250880 (padded), tied embedding, ALiBi. The network: 4 x
/// 100 Gb/s per node = 50 Gb/s per GPU. Megatron-DeepSpeed's pipeline partition counted the
/// embeddings ("type:transformer|embedding"): 72 slots, 6 per stage.
inline Case bloom_176b() {
    Case c;
    c.set = "bloom-176b";
    c.stack = "deepspeed";
    c.label = "BLOOM 176B x384";
    c.layers = 70;
    c.hidden = 14336;
    c.heads = 112;
    c.vocab = 250880;
    c.seq = 2048;
    c.tp = 4;
    c.pp = 12;
    c.dp = 8;
    c.microbatch = 2;
    c.global_batch = 2048;
    c.zero_stage = 1;
    c.recompute = "full";
    // DeepSpeed's BF16_Optimizer accumulates into fp32 gradient buffers and reduces those
    // (get_grads_for_reduction returns fp32_groups_gradients_flat)
    c.grad_reduce_in_fp32 = true;
    c.pipeline_slots = true;  // 70 layers + embedding + loss = 72 slots on 12 stages
    c.hardware_overrides = "nic_bandwidth = \"50 Gb/s\"\n";
    c.measured = 150;
    return c;
}

/// Megatron-Turing NLG 530B (Microsoft and NVIDIA, Megatron-DeepSpeed) on 280 / 350 / 420 DGX
/// A100 of Selene (tests/data/reference/mtnlg_530b_a100.csv; Smith et al. 2022, arXiv
/// 2201.11990): a check of the deepspeed stack at 2,240-3,360 GPUs, never fitted and not a source
/// (docs/calibration.md, Gaps). Settings of the run as the paper and vTrain's reading of it give
/// them: tp 8 x pp 35 on DeepSpeed's 1F1B pipeline engine, micro batch 1, full activation
/// checkpointing, ZeRO stage 1 (DeepSpeed's pipeline engine takes no higher stage); assumed: A100
/// 80 GB (the Microsoft blog's DGX A100 80GB; other readings say 40 GB), bf16 with fp32 gradient
/// reduction (DeepSpeed's BF16_Optimizer, as BLOOM's), unfused attention (2021: no
/// FlashAttention), Megatron's GPT with dropout, a tied embedding, DeepSpeed's
/// "type:transformer" partition (the 105 layers even over the 35 stages, the embedding and head
/// on the end stages beside them). measured = step time (s).
inline std::vector<Case> mtnlg_530b(const std::string& data_dir) {
    const Table t = read_table(data_file(data_dir, "mtnlg_530b_a100.csv"));
    std::vector<Case> cases;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        Case c;
        c.set = "mt-nlg-530b";
        c.stack = "deepspeed";
        c.label = t.text(i, "label");
        const int gpus = read_shape_and_batch(t, i, c);
        c.tp = int(t.number(i, "tp"));
        c.pp = int(t.number(i, "pp"));
        c.dp = gpus / (c.tp * c.pp);
        c.zero_stage = 1;
        c.recompute = "full";
        c.grad_reduce_in_fp32 = true;
        c.measured = t.number(i, "step_time_s");
        cases.push_back(c);
    }
    return cases;
}

/// The torchtitan team's 2024-12 H100s (Meta's Grand Teton): 96 GB HBM2e at 2.4 TB/s, run at the
/// default 500 W power limit, whose tensor-core peak "is between SXM and NVL, and we don't know
/// its exact value" (benchmarks/llama3_h100_202412_torchtitan.md, footnote 2). The bracket from
/// the datasheets: H100 SXM 989 / 1,979 TFLOP/s dense BF16 / FP8, H100 NVL 835.5 / 1,670.5
/// (1,671 / 3,341 with sparsity, NVIDIA H100 datasheet). The peaks are its midpoint, 0.922 of
/// the SXM's (at most 8.4% off whichever end is true); the SFU's exponential rate scales with the
/// same clock. Not fitted: a stated range, read at its middle (docs/calibration.md).
inline std::string grand_teton_h100_overrides() {
    constexpr double sxm_bf16 = 989.4, nvl_bf16 = 835.5, sxm_fp8 = 1979.0, nvl_fp8 = 1670.5;
    const double bf16 = 0.5 * (sxm_bf16 + nvl_bf16), fp8 = 0.5 * (sxm_fp8 + nvl_fp8);
    return fmt::format(
        "hbm_bandwidth = \"2.4 TB/s\"\npeak_bf16 = \"{:.1f} TFLOP/s\"\npeak_fp8 = \"{:.1f} "
        "TFLOP/s\"\nexp_rate = {:.4e}\n",
        bf16, fp8, 3.9e12 * bf16 / sxm_bf16);
}

/// torchtitan's published Llama 3.1 benchmarks (pytorch/torchtitan benchmarks/, BSD-3-Clause;
/// tests/data/reference/torchtitan_llama3.csv): the torchtitan team's of 2024-12 on Meta's Grand
/// Teton H100 (96 GB HBM2e at 2.4 TB/s, 500 W power limit: the h100-sxm preset with that HBM
/// bandwidth; its tensor-core peak is below the SXM datasheet's by an unknown amount, which the
/// stack's factors absorb), tables 1-5 with torch.compile (table 5: 1F1B and interleaved 1F1B, 2
/// stages per rank), the torchtitan team's of 2025-06 on the same H100s (Llama 3.1 70B on 256 and
/// 8B on 64, FSDP x TP 8, BF16 and float8 tensorwise, vanilla and async TP;
/// asyncTP_llama3_h100_2025-06_torchtitan.md, its float8 rowwise rows left out: rowwise scaling
/// is not modelled), and Trainy's of 2025-06 on H200 (llama3_8b_h200_2025-06_torchtitan.md).
/// Settings of torchtitan's train configs: FSDP2 over the data-parallel ranks (ZeRO-3, prefetched)
/// with TP, PP and CP as the table says, sequence parallelism with TP, AsyncTP as tp_comm_overlap,
/// SDPA attention (FlashAttention-2 backend), torchao Float8 linears as fp8 (Trainy: FP8 all-gather
/// as fp8_params), no grad accumulation without PP (micro batch = local batch); with PP the local
/// batch in PP-degree microbatches (torchtitan's default; the csv's micro_batch) and FSDP2's
/// stages gathered for the step (the stack preset's fsdp_pp_unsharded).
/// Rows with `selective` ran torchtitan's op-level selective activation checkpointing
/// (selective_ac_option = "op"): the torchtitan stack preset's selective_recompute
/// (docs/torchtitan_sac.md). memory_gib: the published peak reserved memory per GPU, checked by
/// torchtitan_memory.hpp, never fitted.
inline std::vector<Case> torchtitan_llama3(const std::string& data_dir) {
    const Table t = read_table(data_file(data_dir, "torchtitan_llama3.csv"));
    std::vector<Case> cases;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        Case c;
        c.set = t.text(i, "source");
        c.stack = "torchtitan";
        c.gpu = t.text(i, "gpu");
        const int gpus = read_shape_and_batch(t, i, c);
        c.kv_heads = int(t.number(i, "kv_heads"));
        c.ffn = int(t.number(i, "ffn"));
        c.gated_mlp = true;
        c.tied_embeddings = false;
        c.tp = int(t.number(i, "tp"));
        c.pp = int(t.number(i, "pp"));
        c.cp = int(t.number(i, "cp"));
        c.interleave = int(t.number(i, "vp"));
        c.dp = gpus / (c.tp * c.pp * c.cp);
        c.zero_stage = 3;
        c.precision = t.text(i, "precision");
        c.fp8_params = t.number(i, "fp8_params") != 0;
        c.recompute = t.text(i, "recompute");
        c.flash_attention = true;
        c.dropout = false;  // torchtitan's Llama 3 has no dropout layers
        // FSDP2's MixedPrecisionPolicy(reduce_dtype = float32): torchtitan's
        // mixed_precision_reduce default; the sharded gradients are fp32
        c.grad_reduce_in_fp32 = true;
        c.sequence_parallel = c.tp > 1;
        c.tp_comm_overlap = t.number(i, "tp_comm_overlap") != 0;
        c.overlap_grad_reduce = true;
        c.overlap_param_gather = true;
        // every table ran before torchtitan 83e6941 (2025-07-28), whose apply_fsdp wrapped the
        // blocks and then the whole model: tok_embeddings, norm and output in FSDP's root
        // (TrainingSpec::fsdp_ends; the preset takes today's units of their own)
        c.training_overrides = "fsdp_ends = \"root\"\n";
        c.pipeline_slots = c.layers % (c.pp * c.interleave) != 0;
        if (c.gpu == "h100-sxm") c.hardware_overrides = grand_teton_h100_overrides();
        c.measured =
            step_from_throughput(t.number(i, "tokens_per_s_per_gpu"), c.global_batch, c.seq, gpus);
        c.measured_memory_gib = t.number(i, "memory_gib");
        c.label = fmt::format("table {} {} s{} x{} {}{}{}", t.text(i, "table"), t.text(i, "model"),
                              c.seq, gpus, c.precision, c.tp_comm_overlap ? " asyncTP" : "",
                              c.interleave > 1 ? " interleaved" : "");
        cases.push_back(c);
    }
    return cases;
}

/// Every source's rows. vTrain's rows: every `vtrain_stride`-th (the fit's cost; the report
/// reads them all with stride 1).
inline std::vector<SourceRow> all_sources(const std::string& dir, int vtrain_stride = 1) {
    std::vector<SourceRow> rows;
    const auto vt = vtrain(dir);
    for (std::size_t i = 0; i < vt.size(); i += std::size_t(vtrain_stride)) rows.push_back({vt[i]});
    for (const Case& c : megatron_sc21(dir)) rows.push_back({c, Quantity::tflops_per_gpu});
    for (const Case& c : korthikanti_table5(dir)) rows.push_back({c});
    rows.push_back({bloom_176b(), Quantity::tflops_per_gpu});
    for (const Case& c : nemo_h100(dir)) rows.push_back({c});
    for (const Case& c : nemo_long_b200(dir)) rows.push_back({c});
    for (const Case& c : llmfoundry_h100(dir)) rows.push_back({c});
    for (const Case& c : llmfoundry_a100(dir)) rows.push_back({c});
    for (const Case& c : llmfoundry_h100_large(dir)) rows.push_back({c});
    for (const Case& c : llmfoundry_a100_40gb(dir)) rows.push_back({c});
    for (const Case& c : mlperf_medians(dir)) rows.push_back({c});
    for (const Case& c : torchtitan_llama3(dir)) rows.push_back({c});
    return rows;
}

}  // namespace prism::calibration
