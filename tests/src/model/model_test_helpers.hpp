#pragma once

// Hand-built experiments for the model's unit tests (no TOML: prism::model is tested alone).

#include "src/model/spec.hpp"

namespace prism::test {

/// small_experiment()'s shape: h = 1024, a = 16, L = 8, s = 1024, V = 32000, f = 4h, MHA; its
/// parameters per layer (12 h^2 + 13 h).
inline constexpr double kH = 1024, kLayerParams = 12 * kH * kH + 13 * kH, kVocab = 32000;

/// Ring ReduceScatter / AllGather of `bytes` over n ranks at 0.8 x `link_bytes_per_s` (the
/// helpers' collective efficiency) with `latency_s` per hop.
inline double ring(double bytes, int n, double link_bytes_per_s, double latency_s) {
    return double(n - 1) / n * bytes / (0.8 * link_bytes_per_s) + (n - 1) * latency_s;
}

/// A GPT-3-like model on an A100-like node with round numbers, so that hand calculations stay
/// simple: 8 GPUs per node, NVLink 300 GB/s, NIC 25 GB/s.
inline Experiment small_experiment() {
    Experiment e;
    e.model.layers = 8;
    e.model.hidden = 1024;
    e.model.heads = 16;
    e.model.kv_heads = 16;
    e.model.ffn = 4096;
    e.model.vocab = 32000;
    e.model.seq = 1024;
    e.training.global_batch_seqs = 16;
    e.training.overlap_grad_reduce = false;
    HardwareSpec hw;
    hw.name = "test";
    hw.gpu.peak_bf16_flop_per_s = 300e12;
    hw.gpu.peak_fp8_flop_per_s = 600e12;
    hw.gpu.hbm_bytes = 80e9;
    hw.gpu.hbm_bytes_per_s = 2e12;
    hw.gpu.hbm_efficiency = 0.8;
    hw.gpu.gemm = {0.7, 1e9};
    hw.gpus_per_node = 8;
    hw.nvlink_bytes_per_s = 300e9;
    hw.nvlink_latency_s = 3e-6;
    hw.nic_bytes_per_s = 25e9;
    hw.nic_latency_s = 10e-6;
    hw.collective_efficiency = 0.8;
    e.hardware.push_back(hw);
    e.cluster.nodes_per_rack = 4;
    e.cluster.racks_per_pod = 2;
    e.cluster.rack_oversubscription = 2;
    e.cluster.pod_oversubscription = 3;
    return e;
}

/// The same with h = 4096 (32 heads, f = 4h): 201 M parameters per layer, so that a stage's
/// gradients fill many of Megatron's 40 M-parameter buckets.
inline Experiment wide_experiment() {
    Experiment e = small_experiment();
    e.model.hidden = 4096;
    e.model.heads = 32;
    e.model.kv_heads = 32;
    e.model.ffn = 4 * 4096;
    return e;
}

/// The small model with 16 routed experts (top 2, f_e = 512, not gated) in every layer.
inline Experiment small_moe_experiment() {
    Experiment e = small_experiment();
    e.model.experts = 16;
    e.model.top_k = 2;
    e.model.expert_ffn = 512;
    return e;
}

/// tp 8 (a full node) x dp 4, microbatch 4 (one microbatch per replica of the helpers' 16).
inline DesignPoint tp8_dp4() {
    DesignPoint p;
    p.tp = 8;
    p.dp = 4;
    p.microbatch = 4;
    return p;
}

/// tp 2 x dp 2 in one node (the DP pair 2 ranks apart, on NVLink), ZeRO-2, 8 microbatches of one
/// sequence per replica: ZeRO-2's per-microbatch terms (DeepSpeed's, FSDP1 SHARD_GRAD_OP's).
inline DesignPoint tp2_dp2_zero2() {
    DesignPoint p;
    p.tp = 2;
    p.dp = 2;
    p.zero_stage = 2;
    p.microbatch = 1;
    return p;
}

}  // namespace prism::test
