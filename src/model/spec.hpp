#pragma once

// The plain data an experiment is made of. Everything here is in SI units (seconds, bytes,
// bytes/s, FLOP/s) whatever unit the TOML file used; names say the unit.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/cotune/spec.hpp"

namespace prism {

enum class AttentionKind { standard, mla };

/// Decoder-only transformer (DESIGN.md "Workload"), dense or Mixture-of-Experts (docs/moe.md).
struct ModelSpec {
    std::string name;        ///< preset name or "custom"
    std::string source;      ///< where the numbers come from (preset provenance)
    int layers = 0;          ///< transformer blocks L
    int hidden = 0;          ///< hidden size h
    int heads = 0;           ///< attention heads a
    int kv_heads = 0;        ///< key/value heads g (GQA); == heads for multi-head attention
    int ffn = 0;             ///< FFN inner size f
    bool gated_mlp = false;  ///< SwiGLU-style gated MLP (three FFN GEMMs instead of two)
    int vocab = 0;           ///< vocabulary size V
    /// Output layer shares the word embedding's weights (GPT); false: its own V h weights
    /// (Llama), so no embedding-gradient AllReduce between the first and last stage.
    bool tied_embeddings = true;
    int seq = 0;  ///< sequence length s (tokens)
    /// Width of one attention head d; 0 = hidden / heads. Qwen3: 128 with hidden / heads = 64
    /// (the Q and O projections are h x a d, not h x h).
    int head_dim_override = 0;

    // ---- Mixture-of-Experts (docs/moe.md); experts = 0: dense ----
    int experts = 0;         ///< routed experts E per MoE layer
    int top_k = 0;           ///< routed experts per token k
    int shared_experts = 0;  ///< always-active experts of expert_ffn each (DeepSeek: 1)
    int expert_ffn = 0;      ///< inner size of one expert f_e (gated like the dense MLP)
    int dense_layers = 0;    ///< leading dense layers (DeepSeek-V3: the first 3)
    /// After the leading dense layers, every moe_every-th layer is MoE (the others dense):
    /// layer j (0-based after dense_layers) is MoE when (j + 1) % moe_every == 0 (Llama 4's
    /// interleave_moe_layer_step); 1 = every one.
    int moe_every = 1;

    // ---- multi-head latent attention (DeepSeek-V2/V3); attention = "mla" ----
    AttentionKind attention = AttentionKind::standard;
    int q_lora_rank = 0;  ///< 0 = Q projected directly from h (DeepSeek-V2-Lite)
    int kv_lora_rank = 0;
    int qk_nope_head_dim = 0;
    int qk_rope_head_dim = 0;
    int v_head_dim = 0;

    int head_dim() const {
        if (head_dim_override > 0) return head_dim_override;
        return heads > 0 ? hidden / heads : 0;
    }
    /// Width of the queries (heads x head dim) and of the keys or values (KV heads x head dim,
    /// all heads without GQA) of standard attention; MLA's are its own.
    double q_width() const { return double(heads) * head_dim(); }
    double kv_width() const { return double(kv_heads > 0 ? kv_heads : heads) * head_dim(); }
    bool is_moe() const { return experts > 0; }
    bool is_mla() const { return attention == AttentionKind::mla; }
    /// Whether layer `layer` (0-based) is an MoE layer.
    bool is_moe_layer(int layer) const {
        if (!is_moe() || layer < dense_layers) return false;
        return (layer - dense_layers + 1) % (moe_every > 0 ? moe_every : 1) == 0;
    }
    /// MoE layers among the `layers`.
    int moe_layers() const {
        if (!is_moe() || layers <= dense_layers) return 0;
        return (layers - dense_layers) / (moe_every > 0 ? moe_every : 1);
    }
};

enum class Precision { bf16, fp8 };
enum class Optimizer { adam };  ///< Adam, mixed precision: 16 bytes/param (Megatron/ZeRO count)

struct TrainingSpec {
    std::int64_t global_batch_seqs =
        0;  ///< global batch in sequences (tokens / seq if given in tokens)
    Precision precision = Precision::bf16;
    Optimizer optimizer = Optimizer::adam;
    double total_tokens = 0;  ///< tokens of the whole run (0 = not given)
    /// Fused flash-style attention (no materialized s x s scores; causal half skipped). false =
    /// Megatron's unfused core (QK^T, softmax, dropout, PV), as in the published A100 runs.
    bool flash_attention = false;
    /// DP gradient reduction in buckets overlapped with the last microbatch's backward (Megatron
    /// --overlap-grad-reduce); the last bucket's reduction stays exposed.
    bool overlap_grad_reduce = true;
    /// With the distributed optimizer (ZeRO 1/2): the parameter AllGather after the optimizer
    /// step overlapped with the first microbatch's forward of the next step (Megatron
    /// --overlap-param-gather); the first bucket's gather stays exposed.
    bool overlap_param_gather = true;
    /// TP communication overlapped with the GEMMs (Megatron --tp-comm-overlap, TransformerEngine
    /// userbuffers; needs sequence parallelism): AllGathers as a ring exchange beside the GEMM
    /// that consumes them, forward ReduceScatters pipelined in chunks behind the GEMM.
    bool tp_comm_overlap = false;
    /// FP8 parameters (TransformerEngine's fp8_model_init, Megatron --fp8-param-gather, MLPerf's
    /// FP8_PARAMS; needs precision fp8): the transformer layers' weight matrices are kept and
    /// gathered (distributed optimizer, FSDP) in 1 byte instead of bf16's 2. Embeddings, norms
    /// and biases stay bf16; the fp32 main gradients and the optimizer's fp32 master copy and
    /// moments are unchanged.
    bool fp8_params = false;
    /// Main-gradient buffer (and its reduction) in fp32, 4 bytes per parameter: Megatron-LM's
    /// default with bf16 (--accumulate-allreduce-grads-in-fp32, set by arguments.py for bf16).
    /// false: in the parameters' bf16, 2 bytes (Megatron-Core DistributedDataParallelConfig
    /// grad_reduce_in_fp32 = False; NeMo's optim.grad_sync_dtype = bf16, as NeMo's Nemotron-4
    /// 340B recipe and NVIDIA's MLPerf Llama 3.1 405B submissions run).
    bool grad_reduce_in_fp32 = true;
    /// Pure bf16 training: the bf16 weights are the optimizer's master copy (no fp32 copy), the
    /// Adam moments and the gradients are bf16 (grad_reduce_in_fp32 off), the logits and their
    /// gradient bf16 (no fp32 upcast for the loss): Composer's precision "bf16" with FSDP's PURE
    /// mixed precision (param, reduce and buffer dtypes bf16), as llm-foundry's A100 40GB table
    /// ran. Optimizer state 4 bytes per parameter instead of 12, its step 14 bytes of HBM traffic
    /// per parameter instead of 30. Numerics (bf16 updates lose small steps) are the user's call.
    bool pure_bf16 = false;
    /// Hidden and attention dropout with p > 0: their 1-byte masks (and the dropped attention
    /// probabilities without fused attention) are stored for the backward, Korthikanti et al.'s
    /// count. false: p = 0, as the Llama 3 and Nemotron-4 recipes train (hidden_dropout =
    /// attention_dropout = 0.0): PyTorch's dropout returns its input and stores no mask.
    bool dropout = true;
    /// ZeRO-3/FSDP: the next layer's AllGather prefetched beside this layer's compute (PyTorch
    /// FSDP backward/forward prefetch; Megatron-FSDP). false: every gather exposed.
    bool fsdp_prefetch = true;
    /// ZeRO-3/FSDP: how the word embedding and the output layer are sharded (fsdp_ends = ...).
    /// Their collectives run every microbatch like a layer's, but the embedding's gather is the
    /// microbatch's first and its gradients' scatter the last: nothing to hide them beside.
    ///  - units: each table an FSDP unit of its own (torchtitan since 83e6941 of 2025-07-28:
    ///    tok_embeddings, then [norm, output] not resharded after the forward; DeepSpeed's ZeRO-3,
    ///    which fetches per submodule): the embedding's gather and scatter exposed, the output
    ///    layer's prefetched and overlapped like a layer's.
    ///  - root: both in FSDP's root (FSDP1's auto-wrap of the transformer blocks: Composer /
    ///    llm-foundry wrap MPT's blocks and the root holds the tied `wte`; torchtitan before
    ///    83e6941, whose apply_fsdp wrapped the blocks and then the whole model): gathered at
    ///    every microbatch's start and kept for its backward (PyTorch does not reshard the root
    ///    after the forward), reduce-scattered after the embedding's backward: both exposed.
    ///  - kept: outside FSDP's units and never released (Megatron-FSDP: its units are the
    ///    transformer layers, mcore_fsdp_adapter.py; the other parameters' buckets are gathered
    ///    by their modules' pre-forward hooks and not marked releasable, megatron_fsdp.py
    ///    _root_pre_backward; their gradients are reduced in the root's post-backward, every
    ///    microbatch with optim_grads_params): gathered once a step, scattered every microbatch
    ///    after the last backward, exposed.
    /// Applies where ZeRO-3 gathers per microbatch (deterministic.cpp, add_fsdp_end_tables).
    enum class FsdpEnds : std::uint8_t { units, root, kept } fsdp_ends = FsdpEnds::units;
    /// ZeRO-3/FSDP under pipeline parallelism, PyTorch's FSDP2 in torch.distributed.pipelining
    /// (torchtitan): each stage's parameters stay gathered and its gradients unsharded for the
    /// whole step. torchtitan passes reshard_after_forward = False with PP ("to avoid
    /// per-microbatch all-gathers", torchtitan/parallelisms/parallelize_llama.py @3f20451);
    /// the stage's backward sets set_reshard_after_backward(False) and
    /// set_requires_gradient_sync(False) for every microbatch and runs FSDP's post-backward
    /// (the reduce-scatter) after the last one (torch/distributed/pipelining/stage.py,
    /// backward_maybe_with_nosync). So the stage gathers once per step (prefetched under the
    /// first forward) and reduce-scatters once, after its last backward: ZeRO-1's traffic and
    /// memory (full weights and gradients, sharded optimizer state; sharding_stage()).
    /// false: every microbatch gathers and scatters each layer (Megatron-FSDP's per-layer
    /// FSDP). No effect at pp = 1 or below zero_stage 3.
    bool fsdp_pp_unsharded = false;
    /// DeepSpeed's pipeline engine (deepspeed/runtime/pipe/engine.py, p2p.py): each stage sends
    /// and receives on the compute stream (a blocking dist.send / dist.recv per transfer), the
    /// activation or its gradient split over the TP ranks before the send (PartitionedTensor
    /// over the slice-parallel group; is_pipe_partitioned / is_grad_partitioned) and gathered
    /// on the receiving stage before its pass. So a chunk's forward and backward each take two
    /// transfers (receive, send) and one TP AllGather longer, and no transfer overlaps the
    /// next microbatch's compute. false: Megatron's schedule (the transfers on their own
    /// stream, a lag between stages, mostly hidden). No effect without a pipeline.
    bool blocking_p2p = false;
    /// DeepSpeed's BF16_Optimizer (deepspeed/runtime/bf16_optimizer.py), with bf16 training and
    /// fp32 gradients (grad_reduce_in_fp32, not pure_bf16): after every microbatch's backward
    /// `update_hp_grads` adds each bf16 gradient into its fp32 copy, `hp_grad.add_(lp.grad.to(
    /// fp32))`: a cast (read 2, write 4 bytes) and an add (read 4 + 4, write 4) per parameter of
    /// the stage, 18 bytes, every microbatch (at ZeRO stage 0-1: DeepSpeed's engine takes the
    /// BF16_Optimizer there only). false: the fp32 gradient is accumulated in the weight-gradient
    /// GEMM (Megatron's gradient_accumulation_fusion), no pass of its own.
    bool bf16_optimizer = false;
    /// DeepSpeed's ZeRO stage 2 (deepspeed/runtime/zero/stage_1_and_2.py): the gradients are
    /// reduced (reduce-scattered to their partitions' owners) in every microbatch's backward,
    /// `reduce_ready_partitions_and_remove_grads` reducing `if self.partition_gradients or
    /// self.is_gradient_accumulation_boundary()` (stage 1 only at the boundary), in buckets on
    /// the compute stream unless overlap_comm (overlap_grad_reduce here; DeepSpeed's default is
    /// off below stage 3). So each layer's backward carries its gradients' ReduceScatter, and the
    /// embedding's and output layer's backward theirs, every microbatch; the step keeps the
    /// parameter AllGather after the optimizer. false: one reduction per step, after the last
    /// microbatch (Megatron's distributed optimizer). Applies at zero_stage 2 with d c > 1.
    bool grad_reduce_every_microbatch = false;
    /// PyTorch FSDP1's SHARD_GRAD_OP (llm-foundry's ZeRO-2): the parameters resharded after
    /// every backward, so every microbatch's forward gathers each layer's again (and the word
    /// embedding's and output layer's), beside its compute with overlap_param_gather (FSDP's
    /// prefetch), exposed before it without; the step's parameter AllGather after the optimizer
    /// goes. Composer wraps no FSDP microbatch in no_sync (its ddp_sync_context returns for a
    /// model that is not DistributedDataParallel), so its gradients are reduce-scattered every
    /// microbatch too (grad_reduce_every_microbatch). Applies at zero_stage 2 with d c > 1.
    bool param_gather_every_microbatch = false;
    /// DeepSpeed's ZeRO stage 1-2 optimizer (DeepSpeedZeroOptimizer, deepspeed/runtime/zero/
    /// stage_1_and_2.py, setup_buckets): with contiguous_gradients (DeepSpeed's default) every
    /// microbatch's backward allocates the gradient bucket whole, `torch.empty(reduce_bucket_size,
    /// dtype=the 16-bit parameters' dtype)`, a second one with overlap_comm (overlap_grad_reduce
    /// here): reduce_bucket_size elements x 2 bytes of memory beside the gradients, whatever the
    /// model's size (DeepSpeed's default 5e8: 0.93 GiB); its ZeRO-3 optimizer holds one from its
    /// start (stage3.py, the IPG bucket's buffer). Not where DeepSpeed takes the BF16_Optimizer
    /// instead (bf16_optimizer: bf16 with fp32 gradients at ZeRO 0-1), nor at ZeRO 0. 0: none
    /// (Megatron's gradient buffer is the gradients themselves).
    double reduce_bucket_elements = 0;
    /// Uneven pipeline split (Megatron --decoder-first-pipeline-num-layers /
    /// --decoder-last-pipeline-num-layers): layers on the first / last stage, the other stages
    /// sharing the rest evenly; 0 = not set. Ignored at pp = 1.
    int first_stage_layers = 0;
    int last_stage_layers = 0;
    /// Megatron-Core --account-for-embedding-in-pipeline-split / --account-for-loss-in-
    /// pipeline-split: the input embedding (the output layer and loss) takes one layer's slot
    /// on the first (last) stage, so L + 1 (+ 1) slots are split evenly: Llama 3 405B's 126
    /// layers as 7, 8 x 14, 7 on 16 stages, or 15, 16 x 6, 15 on 8.
    bool account_for_embedding_in_pipeline_split = false;
    bool account_for_loss_in_pipeline_split = false;
    /// Explicit layers of every stage (Megatron --pipeline-model-parallel-layout in spirit);
    /// applies to points whose pp equals its length, others are filtered. Empty = not set.
    std::vector<int> layers_per_stage;
    /// Explicit decoder layers of every virtual pipeline stage (Megatron-Core's
    /// --pipeline-model-parallel-layout), in model order: entry k runs on pipeline rank k % pp
    /// as its model chunk k / pp; the input embedding is in the first, the output layer and
    /// loss in the last, which alone may hold no layers (DeepSeek-V3's "Et|(tt|)*30mL"). Applies
    /// to points whose pp x interleave equals its length, others are filtered. Empty = not set.
    std::vector<int> layers_per_chunk;

    // ---- Mixture-of-Experts (docs/moe.md) ----
    /// Token dispatcher: NCCL all-to-all, Megatron's AllGather dispatcher (every EP rank gathers
    /// all tokens, the combine is a ReduceScatter), or the flex dispatcher with DeepEP or
    /// HybridEP (all-to-all that sends a token once to each rank holding one of its experts, and
    /// once over the NIC to each other NVLink domain, forwarded there over NVLink). DeepEP and
    /// HybridEP move the same bytes; they differ in the bandwidth their kernels reach at
    /// Megatron's SM budgets (the GPU's deepep_ / hybridep_nvlink_efficiency).
    enum class MoeDispatcher {
        alltoall,
        allgather,
        deepep,
        hybridep
    } moe_dispatcher = MoeDispatcher::alltoall;
    /// Megatron's EP communication overlap (--overlap-moe-expert-parallel-comm, 1F1B a2a overlap):
    /// one microbatch's dispatch / combine runs beside another's compute; what the layer's
    /// compute cannot hide stays exposed.
    bool moe_a2a_overlap = false;
    /// Tokens an expert takes, as a multiple of the balanced share; buffers padded to it. 0 =
    /// dropless (Megatron's default).
    double moe_capacity_factor = 0;
    /// true: every expert gets its share of the tokens (Megatron's
    /// --moe-router-force-load-balancing, as NVIDIA's tables are measured); false: multinomial
    /// routing with [variability] routing_skew, the busiest EP rank setting the expert GEMMs and
    /// the a2a at its expected load (src/stochastic/routing.hpp; docs/moe.md).
    bool moe_force_balance = true;

    /// Megatron-Core's --recompute-modules (transformer_config.py): what a point with
    /// recompute = "selective" recomputes in its backward; points with "none" or "full" ignore
    /// it, as Megatron does. Default {core_attn}, Megatron's. docs/recompute_modules.md.
    struct RecomputeModules {
        bool core_attn = true;        ///< the attention core (scores, softmax, P V)
        bool moe_act = false;         ///< the routed experts' activation function (SwiGLU)
        bool layernorm = false;       ///< the input and pre-MLP layer norms
        bool mla_up_proj = false;     ///< MLA's Q and KV up projections (and RoPE)
        bool mlp = false;             ///< a dense layer's whole MLP
        bool moe = false;             ///< an MoE layer's whole MoE block
        bool shared_experts = false;  ///< an MoE layer's shared experts

        bool operator==(const RecomputeModules&) const = default;
    } recompute_modules;
    /// What recompute = "selective" means (docs/torchtitan_sac.md): Megatron-Core's
    /// recompute_modules (the default), or torchtitan's op-level selective activation
    /// checkpointing under torch.compile ([activation_checkpoint] mode = "selective",
    /// selective_ac_option = "op"): every aten.mm, SDPA and TP reduce-scatter output saved but
    /// every second mm of a block (wk, wo, w3), everything else (norms, RoPE, SiLU, mul,
    /// residual adds, FP8 casts) recomputed where the backward needs it. Dense models with
    /// fused attention only (the loader checks). The stack preset's `selective_recompute`,
    /// [training] selective_recompute overriding it.
    enum class SelectiveRecompute {
        megatron,
        torchtitan_op
    } selective_recompute = SelectiveRecompute::megatron;
    bool torchtitan_op_sac() const {
        return selective_recompute == SelectiveRecompute::torchtitan_op;
    }
};

/// Size-dependent GEMM efficiency, eff(F) = eff_max * F / (F + flops_half), F = FLOPs of one
/// GEMM call. A fitted curve per GPU preset (provenance in the preset file).
struct GemmEfficiency {
    double max_efficiency = 0.75;  ///< asymptotic fraction of peak for large GEMMs
    double half_flops = 1.0e9;     ///< GEMM size (FLOPs) at which eff reaches max/2
};

struct GpuSpec {
    std::string name;
    std::string source;
    double peak_bf16_flop_per_s = 0;  ///< dense tensor-core peak
    double peak_fp8_flop_per_s = 0;   ///< dense; 0 = no fp8 support
    double hbm_bytes = 0;             ///< capacity
    double hbm_bytes_per_s = 0;       ///< bandwidth
    double hbm_efficiency = 0.8;  ///< achievable fraction of hbm bandwidth for streaming kernels
    GemmEfficiency gemm;
    /// The fraction of the BF16 GEMM ceiling (gemm.max_efficiency, a kernel microbenchmark's)
    /// that training sustains on this GPU, whatever the stack: GEMMs are cuBLAS in every stack,
    /// so what every stack with BF16 rows on the GPU loses against its ceiling in common is the
    /// GPU's (docs/calibration.md, "Sustained BF16 GEMMs on Hopper"). Applied with the stack's
    /// factor; 1 = the ceiling.
    double gemm_sustained = 1;
    /// The same for fused attention: the fraction of its ceiling (a kernel benchmark's, at the
    /// benchmark's clocks) training sustains at the GPU's power limit, whatever the stack; applied
    /// with the stack's attention factor to the kernel's tensor-core and exponential rates
    /// (docs/calibration.md, "Attention at the power limit on Hopper"); 1 = the ceiling.
    double attention_sustained = 1;
    /// FP8 GEMMs: eff_max of the curve against the fp8 peak (F_half scaled by the fp8 / bf16
    /// peak ratio: the same kernel shapes fill the GPU at twice the FLOPs); 0 = gemm's.
    double fp8_gemm_max_efficiency = 0;
    /// Fused (flash) attention: the fraction of the bf16 peak its tensor-core work (QK^T and
    /// PV: forward, and the backward's 2.5 x forward FLOPs, Dao 2023) reaches; the kernel's
    /// exponentials are timed beside it (exp_per_s); 0 = the GEMM curve.
    double attention_efficiency = 0;
    /// The special function units' exponential rate (MUFU.EX2, per second): a fused attention
    /// kernel takes one exponential per score element and head in the forward and one more in
    /// the backward's recompute of P; 0 = not timed (the tensor-core term alone).
    double exp_per_s = 0;
    /// How far a fused attention pass overlaps its exponentials with its MMAs: 0 = in series
    /// (t = t_mma + t_exp; Hopper, Ampere), 1 = fully (t = max; Blackwell's asynchronous
    /// tcgen05 MMA), between: t = max + (1 - overlap) min.
    double attention_exp_overlap = 0;
    /// Ceilings of the other attention kernel families (FlashAttention-2, FlashAttention-3), as
    /// attention_efficiency (which is the cuDNN / TransformerEngine fused kernel's); 0 = none
    /// published. The software stack (configs/presets/stacks) picks the family and scales it.
    double attention_efficiency_fa2 = 0;
    double attention_efficiency_fa3 = 0;
};

/// Where a stack casts FP8 GEMM inputs (HardwareSpec::fp8_cast).
enum class Fp8Cast : std::uint8_t {
    fused,     ///< in the producing kernel (TransformerEngine's fused modules): nothing extra
    separate,  ///< torchao Float8, dynamic tensorwise: amax + quantize kernels (torchtitan)
    te_linear  ///< TransformerEngine te.Linear: one cast-transpose pass per tensor (llm-foundry)
};

/// A GPU model inside a node type and its network.
struct HardwareSpec {
    std::string name;  ///< key of [hardware.<name>]
    GpuSpec gpu;
    int gpus_per_node = 8;
    /// GPUs joined by one NVLink fabric (GB200 / GB300 NVL72: 72, 18 trays of 4); 0 = one node
    /// (gpus_per_node). A multiple of gpus_per_node. Groups inside it run at NVLink bandwidth.
    int nvlink_domain = 0;
    double nvlink_bytes_per_s = 0;  ///< per GPU, one direction
    double nvlink_latency_s = 0;
    double nic_bytes_per_s = 0;  ///< per GPU (each GPU has its own NIC share), one direction
    double nic_latency_s = 0;
    double collective_efficiency = 0.8;  ///< achieved fraction of link bandwidth by NCCL rings
    /// The same across NVLink domains (a group whose link is the NIC, rack or pod level): NCCL's
    /// inter-node rings at their own achieved fraction of the NIC (nccl-tests across nodes), times
    /// the stack's factor; 0 = collective_efficiency.
    double collective_nic_efficiency = 0;
    /// What a collective overlapped with compute costs the compute beside it, as a fraction of
    /// the collective's time (the stack's `overlap_compute_cost`): its kernels hold SMs and HBM
    /// bandwidth the GEMMs would use, so compute of B beside a collective of C takes B + this C
    /// while C lasts (a compute rate of 1 / (1 + s) beside it: this = s / (1 + s)); 0 = free.
    /// Copy-engine transfers (TransformerEngine's ring exchange) are not charged.
    double overlap_compute_cost = 0;
    /// MoE token dispatch / combine (all-to-all, DeepEP): achieved fraction of the link
    /// bandwidth on NVLink and on the NIC, anchored on DeepEP's microbenchmarks (GPU presets)
    /// times the stack's factor; 0 = collective_efficiency (docs/moe_calibration.md).
    double a2a_nvlink_efficiency = 0;
    double a2a_nic_efficiency = 0;
    /// The flex dispatcher's NVLink ceilings, per backend, where its kernels reach a different
    /// fraction than a2a_nvlink_efficiency at Megatron's SM budgets (20 SMs DeepEP, 16 HybridEP),
    /// times the stack's a2a NVLink factor; 0 = a2a_nvlink_efficiency.
    double deepep_nvlink_efficiency = 0;
    double hybridep_nvlink_efficiency = 0;
    /// The stack's factor on the GEMM curve's eff_max for grouped expert GEMMs (small
    /// per-expert shapes; 1 = a dense GEMM's), and on hbm_efficiency for the router, permute and
    /// unpermute kernels (index gathers, not streaming copies; 1 = a streaming kernel's).
    double grouped_gemm_factor = 1;
    double permute_factor = 1;
    /// The stack's grouped expert GEMM kernel: how many experts' GEMMs fill the GPU together,
    /// i.e. the kernel is timed on the GEMM curve at the FLOPs of that many experts' GEMMs (at
    /// most the rank's local experts); 0 = all local experts (one GEMM of their FLOPs).
    double grouped_gemm_wave_experts = 0;
    /// Host (framework) time to issue one kernel: a layer pass takes at least its kernel count
    /// times this (launch-bound small models). Fitted; see configs/presets/gpus.
    double kernel_launch_s = 0;
    /// Where the stack casts each FP8 GEMM input (`fp8_cast` of configs/presets/stacks;
    /// memory-bound kernels per FP8 GEMM, layer_passes.hpp): fused into the kernel that produces
    /// it (TransformerEngine's fused modules), in torchao Float8's amax and quantize kernels
    /// (dynamic tensorwise scaling), or in TransformerEngine's cast-transpose kernel of a bare
    /// te.Linear (delayed scaling: the amax taken in the same pass).
    Fp8Cast fp8_cast = Fp8Cast::fused;

    /// GPUs per NVLink domain: nvlink_domain, or the node when it is not set.
    int nvlink_domain_gpus() const { return nvlink_domain > 0 ? nvlink_domain : gpus_per_node; }
};

/// Network topology above the node: nodes grouped in racks (one leaf switch), racks in pods.
struct ClusterSpec {
    int nodes_per_rack = 32;
    int racks_per_pod = 16;
    double rack_oversubscription = 1.0;  ///< bandwidth divisor for traffic leaving a rack
    double pod_oversubscription = 1.0;   ///< further divisor for traffic leaving a pod
    std::int64_t total_gpus = 0;         ///< size of the machine (0 = unbounded)
};

enum class Recompute { none, selective, full };

/// How ranks are laid onto GPUs. `ordered` follows `order` from innermost (fastest-varying,
/// consecutive GPUs) to outermost; TP is innermost unless stated.
enum class PlacementKind { ordered, random, variability_aware };
enum class ParallelDim { tp, cp, pp, dp };

struct Placement {
    PlacementKind kind = PlacementKind::ordered;
    std::array<ParallelDim, 4> order{ParallelDim::tp, ParallelDim::cp, ParallelDim::pp,
                                     ParallelDim::dp};

    bool operator==(const Placement&) const = default;
};

/// One point of the design space: what `evaluate` takes. Fields not varied in [space]
/// keep the experiment's defaults.
struct DesignPoint {
    int tp = 1;
    int pp = 1;
    int dp = 1;
    int cp = 1;
    int microbatch = 1;  ///< sequences per microbatch b
    int zero_stage = 0;  ///< 0..3; 3 = FSDP (per-layer gather/scatter)
    Recompute recompute = Recompute::none;
    bool sequence_parallel = false;
    int interleave = 1;  ///< virtual pipeline stages per rank v
    int hardware = 0;    ///< index into Experiment::hardware
    Placement placement;
    std::int64_t global_batch_seqs = 0;  ///< 0 = TrainingSpec's
    double checkpoint_interval_s = 0;    ///< 0 = the [failures] policy
    double learning_rate = 0;            ///< 0 = not part of the study
    double b_noise_tokens = 0;           ///< gradient noise scale ([cotune]); 0 = the study's
    /// Expert parallelism (MoE models): Megatron-Core's folding lays the experts over etp x ep x
    /// edp on the same tp x cp x dp ranks of a stage as the attention; edp = tp cp dp / (etp ep).
    int ep = 1;
    int etp = 1;  ///< expert tensor parallelism

    std::int64_t gpus() const { return std::int64_t{tp} * pp * dp * cp; }
    /// Expert data-parallel degree (0 when etp ep does not divide tp cp dp: filtered).
    int edp() const {
        const std::int64_t ranks = std::int64_t{tp} * cp * dp, inner = std::int64_t{etp} * ep;
        return inner > 0 && ranks % inner == 0 ? int(ranks / inner) : 0;
    }

    bool operator==(const DesignPoint&) const = default;
};

/// The ZeRO stage whose traffic and memory the point has: its zero_stage, except FSDP under
/// pipeline parallelism with TrainingSpec::fsdp_pp_unsharded, which gathers and reduce-scatters
/// once per step and holds full weights and gradients: stage 1's.
inline int sharding_stage(const TrainingSpec& tr, const DesignPoint& p) {
    return p.zero_stage >= 3 && p.pp > 1 && tr.fsdp_pp_unsharded ? 1 : p.zero_stage;
}

/// torchtitan's op-level SAC (TrainingSpec::selective_recompute, docs/torchtitan_sac.md): the
/// policy saves a TP reduce-scatter's output, so with sequence parallelism the attention
/// output projection's (wo's) output is kept; otherwise wo is re-run in the backward (the
/// residual sum h = x + wo(...) feeds ffn_norm's backward, and no saved op holds it).
inline bool op_sac_saves_wo_output(const DesignPoint& p) { return p.tp > 1 && p.sequence_parallel; }

// ---- variability (DESIGN.md section 2) -------------------------------------------------------

/// Kernel classes whose transient variability is specified separately.
enum class KernelClass : std::uint8_t {
    gemm,
    attention,
    elementwise,
    allreduce,
    allgather,
    reducescatter,
    p2p,
    alltoall,
    optimizer,
    dataloader,
};
inline constexpr int kKernelClassCount = 10;
inline constexpr std::array<const char*, kKernelClassCount> kKernelClassNames{
    "gemm",          "attention", "elementwise", "allreduce", "allgather",
    "reducescatter", "p2p",       "alltoall",    "optimizer", "dataloader"};

inline bool is_communication(KernelClass k) {
    return k == KernelClass::allreduce || k == KernelClass::allgather ||
           k == KernelClass::reducescatter || k == KernelClass::p2p || k == KernelClass::alltoall;
}

enum class DistKind { constant, normal, lognormal, gamma, empirical, mixture };

struct DistributionSpec;
struct MixtureComponent;

/// A positive random factor. For transient factors the mean is 1. `normal` is truncated at 0.
/// Parameters are given by mean and cv (std/mean); gamma may also be given by shape/scale
/// (converted to mean/cv by the loader).
struct DistributionSpec {
    DistKind kind = DistKind::constant;
    double mean = 1.0;
    double cv = 0.0;
    std::vector<double> samples;               ///< empirical
    std::vector<MixtureComponent> components;  ///< mixture

    bool operator==(const DistributionSpec&) const = default;
};

struct MixtureComponent {
    double weight = 0;
    DistributionSpec dist;

    bool operator==(const MixtureComponent&) const = default;
};

/// Persistent per-GPU factor G: a spatial spread plus a rare slow ("lemon") mode.
struct PersistentSpec {
    DistributionSpec spatial;     ///< per GPU, mean 1
    double slow_probability = 0;  ///< probability that a node (or GPU) is slow
    double slow_factor = 1.0;     ///< its compute slowdown (e.g. 1.5)
    bool slow_per_node = true;    ///< slow mode applies to whole nodes (else single GPUs)
};

/// Rare hiccups H (DESIGN.md section 2, issue 35): in every step each node independently, with
/// probability `probability`, stalls for a delay (lognormal: median `delay_median_s`, log-space
/// sd `delay_sigma`; or a Pareto tail of shape `delay_tail` with that median) -- an OS or driver
/// interrupt, a retransmit. Every rank waits for it at the next collective, so the step takes the
/// largest delay over the job's nodes on top of its time without hiccups: P(no hiccup) = (1 -
/// q)^nodes, the CDF of the max a product. The family of a hiccup's delay: lognormal (median,
/// sigma) or a Pareto tail (median, shape alpha: P(D > d) = (d_m / d)^alpha above d_m = median
/// 2^(-1/alpha)).
enum class HiccupFamily { lognormal, pareto };

struct HiccupSpec {
    double probability = 0;     ///< per node and step, in [0, 1]
    double delay_median_s = 0;  ///< the delay's median (s)
    double delay_sigma = 0;     ///< lognormal: log-space standard deviation (0: a fixed delay)
    HiccupFamily family = HiccupFamily::lognormal;
    double delay_tail = 0;  ///< pareto: the tail's shape alpha (> 2: a finite variance)

    bool active() const { return probability > 0 && delay_median_s > 0; }
    bool operator==(const HiccupSpec&) const = default;
};

/// Small stalls that every synchronization waits for (operating-system noise; Hoefler et al.,
/// SC'10, "Characterizing the influence of system noise on large-scale applications by
/// simulation"): each node is stalled a fraction `fraction` of its time, in stalls of
/// `duration_s` that arrive at random (Poisson, rate fraction / duration per node and second of
/// step). A group that synchronizes waits for its slowest member at each synchronization, so
/// what a step loses depends on how often its data-parallel group synchronizes: FSDP every
/// layer (each node's stall stops the whole group: the loss grows with the nodes), 3D
/// parallelism once a step (only the largest replica's total counts: a slow growth).
/// docs/tails.md, "Stalls"; stall_law in src/stochastic/detail/hiccup.hpp.
struct StallSpec {
    double fraction = 0;    ///< a node's stalled fraction of its time, in [0, 0.5]
    double duration_s = 0;  ///< one stall's duration (s)

    bool active() const { return fraction > 0 && duration_s > 0; }
    bool operator==(const StallSpec&) const = default;
};

/// A host event that recurs every `every` steps (manual garbage collection, logging, an
/// evaluation or checkpoint boundary; issue 35): that step takes `duration_s` longer.
struct PeriodicEvent {
    std::string name;
    std::int64_t every = 1;  ///< steps between two events (>= 1)
    double duration_s = 0;   ///< the time it adds to its step (s)

    bool operator==(const PeriodicEvent&) const = default;
};

/// The communication regime per link level (issue 35): a collective whose slowest link is on
/// level L (NVLink domain, leaf = `nic`, spine = `rack`, core = `pod`; topology.hpp) sees a
/// regime of comm_regime's family with cv `multiplier_L` x comm_regime's cv, one fabric state
/// per step for every level (comonotone). The job's regime R is the collective-time-weighted
/// mix: cv(R) = sum_L w_L multiplier_L cv, w_L the share of the step's collective time on
/// level L (build_step_model), so the step's total collective time keeps its law and a job whose
/// traffic crosses more racks or pods is noisier. All 1 (the default): every collective alike.
struct RegimeLevels {
    double nvlink = 1;  ///< inside an NVLink domain (and collectives that leave no GPU)
    double nic = 1;     ///< across nodes under one leaf switch (a rack)
    double rack = 1;    ///< across racks of a pod (the spine)
    double pod = 1;     ///< across pods (the core)

    bool active() const { return nvlink != 1 || nic != 1 || rack != 1 || pod != 1; }
    bool operator==(const RegimeLevels&) const = default;
};

/// Variable-length documents packed into the training sequences ([variability.documents],
/// docs/document_lengths.md): with packing = "concat" the documents, of lognormal token lengths
/// (median, log-space sigma), are concatenated and cut into sequences of `seq` tokens, and the
/// fused attention is masked per document, so a sequence's attention costs the sum of its
/// pieces' squared lengths instead of seq^2. Unset (concat false): full causal attention over
/// the sequence, no term.
struct DocumentLengths {
    bool concat = false;
    double median_tokens = 0;  ///< the documents' median length (tokens)
    double sigma = 0;          ///< log-space standard deviation of the length (0: all equal)
    std::string source;        ///< provenance

    bool active() const { return concat && median_tokens > 0; }
    bool operator==(const DocumentLengths&) const = default;
};

struct VariabilitySpec {
    std::array<DistributionSpec, kKernelClassCount> transient;  ///< X per kernel class
    PersistentSpec persistent;                                  ///< G per GPU
    DistributionSpec comm_regime;                               ///< R per step, all collectives
    RegimeLevels regime_levels;                                 ///< R's amplitude per link level
    HiccupSpec hiccup;                                          ///< H per node and step
    std::vector<PeriodicEvent> periodic;                        ///< E at recurring steps
    StallSpec stalls;  ///< W, small stalls charged at each synchronization of the DP group
    /// MoE routing with moe_force_balance = false ([variability.routing], docs/moe.md): sigma
    /// of the persistent lognormal expert popularity (0 = uniform popularity, multinomial noise
    /// only), sigma of its lognormal drift redrawn every step, and their provenance
    double routing_skew = 0;
    double routing_drift = 0;
    std::string routing_source;
    DocumentLengths documents;  ///< variable-length packing (inactive: full causal attention)
    /// Lag-1 autocorrelation of consecutive steps' noise (a stationary AR(1) in the steps, the
    /// marginal law unchanged): the run model's sums of steps (run_model.hpp); 0 = independent
    double step_autocorrelation = 0;
    std::string source;  ///< preset provenance

    bool is_deterministic() const;
};

enum class Method { analytic, montecarlo };

struct EvaluationSpec {
    Method method = Method::analytic;
    int samples = 1000;                                 ///< Monte Carlo samples per point
    std::vector<double> slow_deltas{0.05, 0.10, 0.25};  ///< P(step > (1+delta) * deterministic)
    bool histogram = false;                             ///< store a step-time histogram per point
    int histogram_bins = 64;
    bool sensitivity = true;  ///< per-kernel-class sensitivity metrics
    /// MoE: routing_share_p50 / _p95, the routing imbalance's share of the step quantiles (a
    /// second, forced-balance step-time distribution per point with a routing law)
    bool routing_share = true;
    /// analytic evaluator: points of one replica's grid (and of the step's lattice step); fewer
    /// is faster and coarser (docs/model.md: the measured error and speed of 65, 129 and 257)
    int grid_points = 257;
    /// a sweep skips the stochastic evaluation of points whose bounds are dominated (exact
    /// Pareto front; explorer/pruning.hpp)
    bool prune = true;
    /// after an analytic sweep, re-evaluate the Pareto front's points by Monte Carlo
    /// (`samples` each) into the result file's /verify group
    bool verify_montecarlo = false;
};

// ---- failures and checkpoints (DESIGN.md section 4) ------------------------------------------

struct FailureCause {
    std::string name;
    bool per_node = false;       ///< rate scales with nodes rather than GPUs
    double mtbf_s = 0;           ///< mean time between failures of ONE gpu (or node)
    double weibull_shape = 1.0;  ///< 1 = exponential
};

enum class CheckpointPolicy { fixed, young_daly, optimal };

struct FailureSpec {
    bool enabled = false;
    std::vector<FailureCause> causes;
    double detection_s = 0;
    double restart_s = 0;
    CheckpointPolicy checkpoint_policy = CheckpointPolicy::young_daly;
    double checkpoint_interval_s = 0;   ///< for `fixed`
    double checkpoint_bytes_per_s = 0;  ///< aggregate storage write bandwidth
    bool async_checkpoint = false;
    std::vector<double> deadlines_s;  ///< P(run <= deadline) reported for each
    /// Straggler draining (run_model.hpp): a simulated cluster whose mean step is more than
    /// `straggler_threshold` above the healthy cluster's (no slow units) is detected after
    /// `straggler_detection_s` of its run, checkpointed and restarted without its slow units
    /// (`straggler_replacement_s`: a spare swapped in and the job restarted), and runs healthy
    /// from then on. 0 = slow units stay for the whole run.
    double straggler_detection_s = 0;
    double straggler_threshold = 0.05;
    double straggler_replacement_s = 0;  ///< default: restart_s
};

// ---- the design space -------------------------------------------------------------------------

/// One [space] dimension: a name from `design_dimension_names()` and its values, kept as
/// given (integers, numbers or strings; validated and converted when decoded).
struct DimensionValue {
    enum class Type { integer, number, string, boolean } type = Type::integer;
    std::int64_t i = 0;
    double d = 0;
    std::string s;
    bool b = false;
};

struct Dimension {
    std::string name;
    std::vector<DimensionValue> values;
};

struct SpaceSpec {
    std::vector<Dimension> dimensions;  ///< in file order; the last one varies fastest
    /// Dimensions that describe what is uncertain rather than what the user picks
    /// (`[space] scenarios`, default: b_noise where [space] lists it), in [space] order:
    /// fronts are computed per scenario (explorer/scenarios.hpp).
    std::vector<std::string> scenarios;
};

/// Cheap filters applied before evaluation; a point failing one is not evaluated, only counted.
struct Constraints {
    std::int64_t min_gpus = 0;
    std::int64_t max_gpus = 0;          ///< 0 = no bound
    std::vector<std::int64_t> gpus_in;  ///< if non-empty, the total must be one of these
    /// of HBM the tensors and the reserve may use; above it the point is infeasible
    /// (memory.hpp: kDefaultMaxMemoryFraction)
    double max_memory_fraction = 1.0;
};

/// What a training process holds on a GPU besides the model's tensors (memory.hpp, "Reserve"):
/// every term counts in a point's memory.
struct MemoryReserveSpec {
    double cuda_context_bytes = 0;           ///< CUDA context, loaded kernels (per process)
    double workspace_bytes = 0;              ///< cuBLAS / TransformerEngine GEMM workspaces
    double nccl_bytes_per_communicator = 0;  ///< NCCL's buffers per communicator it is in
};

struct Objective {
    std::string metric;  ///< a name from the metric schema
    bool maximize = false;
};

/// A file an experiment reads besides itself (a variability profile written by `prism trace
/// fit` or `prism steps fit`): part of the experiment's identity for `--resume`.
struct IncludedFile {
    std::string name;  ///< as the experiment names it
    std::string text;  ///< its exact text
};

struct Experiment {
    std::string name;
    std::string file;                    ///< path it was loaded from
    std::string text;                    ///< exact file text (stored in results)
    std::vector<IncludedFile> included;  ///< files it reads besides itself, in reading order
    std::uint64_t seed = 0;
    DesignPoint defaults;                 ///< values of dimensions not in [space]
    std::optional<DesignPoint> baseline;  ///< for speedup metrics
    ModelSpec model;
    TrainingSpec training;
    std::vector<HardwareSpec> hardware;  ///< at least one
    ClusterSpec cluster;
    VariabilitySpec variability;
    EvaluationSpec evaluation;
    FailureSpec failures;
    SpaceSpec space;
    Constraints constraints;
    MemoryReserveSpec memory_reserve;  ///< zeros here; an experiment file's loader fills defaults
    /// No sequence_parallel in [defaults], [space] or the point: it follows tp (on when tp > 1),
    /// as Megatron-LM's and NeMo's recipes run TP (resolve_point_defaults)
    bool sequence_parallel_follows_tp = false;
    std::vector<Objective> objectives;
    CotuneSpec cotune;  ///< [cotune]: learning-rate / batch / throughput co-tuning
    enum class OnError { skip, abort } on_error = OnError::skip;
};

}  // namespace prism
