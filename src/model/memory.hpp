#pragma once

// Memory per GPU (DESIGN.md section 1, "Memory per GPU").
// Model state: Megatron-LM's mixed-precision Adam keeps bf16 weights (2 bytes/param), an fp32
// gradient buffer (4) and fp32 master weights + Adam m + v (12): 18 bytes/param (Megatron-LM
// docs, distributed optimizer table; Korthikanti et al. 2022 Figure 1 is 18 x params / (t p)).
// Without grad_reduce_in_fp32 the gradient buffer is bf16 (2 bytes/param).
// ZeRO stage 1 (Megatron's distributed optimizer) shards the optimizer over d c, 2 also the
// gradients, 3 also the weights: context-parallel ranks hold the same weights, so Megatron-Core
// builds its data-parallel groups "with context parallelism" (d c ranks) for the optimizer
// shards and the gradient reduction (parallel_state.get_data_parallel_group(
// with_context_parallel=True)).
// Per stage: the first holds the word embedding, the last (pp > 1) the output layer (a tied
// copy of the embedding or its own weights: V h either way) and the fp32 logits.
// Activations: Korthikanti et al. 2022, section 4: per layer s b h (34 + 5 a s / h) bytes without
// parallelism, split as 10 s b h replicated over TP + (24 s b h + 5 a s^2 b) divided by t, all of
// it divided by t with sequence parallelism; selective recompute drops the 5 a s^2 b score
// term, full recompute keeps only the layer input (2 s b h). Generalized here to GQA (K, V of
// width h g / a) and gated MLPs (three f-wide tensors instead of two), to dropout p = 0 (no
// masks: 2 s b h less, scores 2 a s^2 b) and to FP8 training with TransformerEngine (the four
// GEMM inputs in 1 byte; docs/hardware.md, "Memory terms", also for the terms not counted).
// Reserve: the CUDA context, the GEMM libraries' workspaces and NCCL's per-communicator buffers
// (MemoryReserveSpec; the defaults an experiment file gets and their sources are in
// io/detail/toml_memory.hpp); the caching allocator's fragmentation is left out of
// [constraints] max_memory_fraction instead.

#include <vector>

#include "src/model/spec.hpp"

namespace prism {

inline constexpr double kWeightBytesPerParam = 2;
inline constexpr double kGradBytesPerParam = 4;
inline constexpr double kOptimizerBytesPerParam = 12;
/// Bytes per parameter of the main-gradient buffer, and so of the DP gradient reduction
/// (AllReduce, ZeRO's and FSDP's ReduceScatter, the expert and tied-embedding gradients), which
/// reduces that buffer in place. fp32 (4) with TrainingSpec::grad_reduce_in_fp32: Megatron-LM's
/// bf16 default (arguments.py: "accumulate and all-reduce gradients in fp32 for bfloat16 data
/// type"), FSDP's reduce_dtype = fp32 (torchtitan's mixed_precision_reduce default, Composer's
/// DEFAULT mixed precision), DeepSpeed's BF16_Optimizer (its fp32 gradient buffers,
/// get_grads_for_reduction); 16-bit (2) without it: Megatron-Core's
/// DistributedDataParallelConfig default, NVIDIA's performance recipes (NeMo's
/// optim.grad_sync_dtype = bf16, NeMo 2 / Megatron-Bridge perf overrides, MLPerf), fp16 runs,
/// pure_bf16.
inline double grad_bytes_per_param(const TrainingSpec& tr) {
    return tr.grad_reduce_in_fp32 ? kGradBytesPerParam : kWeightBytesPerParam;
}
/// Whether DeepSpeed's engine takes its BF16_Optimizer (TrainingSpec::bf16_optimizer): bf16
/// training with fp32 gradients (grad_reduce_in_fp32, not pure_bf16) at ZeRO stage 0-1
/// (`zero_stage`); elsewhere its ZeRO optimizers (or Megatron's, without the flag).
inline bool takes_bf16_optimizer(const TrainingSpec& tr, int zero_stage) {
    return tr.bf16_optimizer && tr.precision == Precision::bf16 && tr.grad_reduce_in_fp32 &&
           !tr.pure_bf16 && zero_stage <= 1;
}
/// Pure bf16 (TrainingSpec::pure_bf16): the two Adam moments in bf16, no fp32 master copy.
inline constexpr double kPureBf16OptimizerBytesPerParam = 4;
/// Bytes per parameter of the optimizer state for `tr`.
inline double optimizer_bytes_per_param(const TrainingSpec& tr) {
    return tr.pure_bf16 ? kPureBf16OptimizerBytesPerParam : kOptimizerBytesPerParam;
}

struct MemoryBreakdown {
    double weights_bytes = 0;
    double grads_bytes = 0;
    double optimizer_bytes = 0;
    double activations_bytes = 0;  ///< stored for backward, all microbatches in flight
    double temporary_bytes = 0;    ///< working buffers: recompute, logits, FSDP gathers
    double reserved_bytes = 0;     ///< CUDA context, workspaces, NCCL buffers (memory_reserve)
    double total_bytes() const {
        return weights_bytes + grads_bytes + optimizer_bytes + activations_bytes + temporary_bytes +
               reserved_bytes;
    }
};

/// Bytes of the stored weights of `layers` transformer layers and `embeddings` embedding tables,
/// unsharded: 2 per parameter (bf16), 1 per layer weight-matrix entry with fp8_params.
double weight_bytes(const ModelSpec& model, const TrainingSpec& training, double layers,
                    double embeddings);

/// Bytes of the routed experts' stored weights of `layers` (mean) layers, unsharded (a part of
/// weight_bytes): 2 per parameter, 1 with fp8_params.
double expert_weight_bytes(const ModelSpec& model, const TrainingSpec& training, double layers);

/// Activation bytes one layer stores for backward, one microbatch, one GPU (an MoE model: the
/// mean over its dense and MoE layers).
double activation_bytes_per_layer(const ModelSpec& model, const TrainingSpec& training,
                                  const DesignPoint& point);

/// Microbatches (in layer-equivalents of one stage) whose activations `stage` holds at its peak
/// under Megatron's schedule: the warm-up forwards plus one. 1F1B: min(m, p - stage).
/// Interleaved: min(m v, 2 (p - stage - 1) + (v - 1) p + 1) chunks (all m v when m = p, which
/// Megatron runs as all warm-up), / v; at stage 0 and m > p that is p (1 + (p - 1) / (p v)),
/// Korthikanti et al. 2022, section 4.2.3.
double inflight_microbatches(int pp, int interleave, int microbatches, int stage = 0);

/// Memory of the GPU of pipeline stage `stage` holding `layers` transformer layers, for
/// `microbatches` per replica per step.
MemoryBreakdown memory_of_stage(const ModelSpec& model, const TrainingSpec& training,
                                const DesignPoint& point, int microbatches, int stage, int layers);

/// memory_of_stage of every stage, stage s holding stage_layers[s] layers.
std::vector<MemoryBreakdown> memory_of_stages(const ModelSpec& model, const TrainingSpec& training,
                                              const DesignPoint& point, int microbatches,
                                              const std::vector<int>& stage_layers);

/// Memory of the first pipeline stage's GPU on an even split (L / p layers).
MemoryBreakdown memory_per_gpu(const ModelSpec& model, const TrainingSpec& training,
                               const DesignPoint& point, int microbatches);

/// NCCL's receive buffers of one connection (a peer on one channel) for its three protocols,
/// NCCL 2.x src/init.cc: DEFAULT_BUFFSIZE (Simple) 4 MiB, DEFAULT_LL128_BUFFSIZE 120 x 640 x 8 x 8
/// = 4,915,200 B, DEFAULT_LL_BUFFSIZE 8 x 512 x 8 x 16 = 524,288 B.
inline constexpr double kNcclConnectionBytes = 4194304.0 + 4915200.0 + 524288.0;
/// Connections per communicator assumed by default: 8 channels x 2 (ring receive and send
/// peers; NCCL's channel count depends on the topology, 8-32 on NVLink/InfiniBand H100 nodes).
inline constexpr double kNcclConnectionsPerCommunicator = 16;

/// The reserve an experiment file gets unless its [memory] table says otherwise:
/// - CUDA context 512 MiB: the context with lazily loaded kernels of a PyTorch + NCCL +
///   TransformerEngine process, which the caching allocator does not see (PyTorch "CUDA
///   semantics", memory management: nvidia-smi shows it above memory_reserved()); an estimate;
/// - workspaces 96 MiB: PyTorch's cuBLAS workspace (CUBLAS_WORKSPACE_CONFIG default :4096:8,
///   8 x 4 MiB) and TransformerEngine's 32 MiB cuBLASLt workspace on Hopper for the compute and
///   the communication-overlap streams;
/// - NCCL kNcclConnectionsPerCommunicator x kNcclConnectionBytes = 147 MiB per communicator.
MemoryReserveSpec default_memory_reserve();

/// The fraction of HBM an experiment file lets the tensors and the reserve use unless its
/// [constraints] max_memory_fraction says otherwise; the rest is left to the PyTorch caching
/// allocator's fragmentation (blocks reserved but not allocated; PyTorch "CUDA semantics",
/// memory management). Published runs that ran bound it from below: with the reserve and their
/// recipes' bf16 gradient buffers, the most loaded of NeMo's and Megatron-Bridge's H100 runs
/// (Nemotron-340B) counts 0.937 of HBM (tests/calibration/h100_fidelity_test.cpp), so 0.96
/// (3.2 GiB of an H100's 79.1) keeps every one of them.
inline constexpr double kDefaultMaxMemoryFraction = 0.96;

/// NCCL communicators a GPU of `point` belongs to, each with its own buffers: one per parallel
/// group of more than one GPU (tp, cp, pp, dp) and, with CP and DP, Megatron-Core's d c group of
/// the gradient reduction and the distributed optimizer.
int nccl_communicators(const DesignPoint& point);

/// What the process holds besides the model's tensors: the CUDA context, the GEMM workspaces and
/// NCCL's buffers for each of nccl_communicators(point).
double reserved_bytes(const MemoryReserveSpec& reserve, const DesignPoint& point);

/// Model state (weights + grads + optimizer) averaged over the t p model-parallel GPUs:
/// 18 x total params / (t p) (weights 2, fp32 gradients 4, optimizer 12; 2 + 2 + 4 with
/// pure_bf16, 16 bytes with bf16 gradients), ZeRO-sharded over d c at the point's sharding_stage
/// (FSDP under PP with fsdp_pp_unsharded holds stage 1's). Korthikanti et al.'s Figure 1
/// convention.
double model_state_bytes_average(const ModelSpec& model, const TrainingSpec& training,
                                 const DesignPoint& point);

}  // namespace prism
