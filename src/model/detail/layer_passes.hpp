#pragma once

// The kernels of one transformer layer's forward and backward pass, of the embedding and of the
// LM head with its loss, as segment lists (step_profile.hpp) with their time accounted per
// category: compute, exposed TP / CP / DP communication and the host-bound stretch. Used by
// evaluate_deterministic (deterministic.cpp); the formulas are DESIGN.md section 1.

#include <algorithm>
#include <array>

#include "src/model/spec.hpp"
#include "src/model/step_profile.hpp"
#include "src/model/topology.hpp"

namespace prism::detail {

/// kEp: the MoE dispatch / combine (and expert-TP) communication left exposed; kPp: pipeline
/// transfers on the compute stream (TrainingSpec::blocking_p2p).
enum Category { kTp = 0, kCp, kDp, kEp, kPp, kCategories };

/// Where an MoE layer's time goes (one pass, one microbatch): parts of compute_s (router,
/// experts) and the communication before any overlap (dispatch, combine).
struct MoeLines {
    double router_s = 0;          ///< gate GEMM, softmax / top-k, permute and unpermute
    double expert_compute_s = 0;  ///< shared and routed experts' GEMMs and activation
    double dispatch_s = 0;        ///< token dispatch (+ the expert-TP AllGather)
    double combine_s = 0;         ///< token combine (+ the expert-TP ReduceScatter)
    void add(const MoeLines& o, double w) {
        router_s += w * o.router_s;
        expert_compute_s += w * o.expert_compute_s;
        dispatch_s += w * o.dispatch_s;
        combine_s += w * o.combine_s;
    }
};

/// TransformerEngine's default split of a pipelined (chunked) ReduceScatter overlap
/// (userbuffers "pipeline" method: num_splits 4 for proj_fprop and fc2_fprop).
inline constexpr int kPipelinedScatterSplits = 4;

/// Rows of one tile of a grouped expert GEMM (TransformerEngine / CUTLASS grouped GEMMs on
/// Hopper tile M by 128): each expert's tokens are padded up to a multiple of it.
inline constexpr double kGroupedGemmTileRows = 128;

/// Causal fused attention reaches its ceiling only over long sequences: every query tile's row of
/// key tiles ends at a partly masked diagonal tile, and the short rows near the start leave SMs
/// idle, so the fixed cost per query tile is amortized over s / 2 key tiles on average. The
/// published causal forward sweeps follow eff(s) = eff_max s / (s + s_half) over 1k-16k keys:
/// FlashAttention PR #2605 (Dao-AILab/flash-attention, B200): cuDNN, head dim 64, 627 / 827 /
/// 977 / 1072 / 1120 TFLOP/s at 1k / 2k / 4k / 8k / 16k (s_half = 906, the curve within 1%);
/// FA4, head dim 128, 829 / 1172 / 1431 at 1k / 2k / 4k (s_half = 1308, within 2%). The mean of
/// the two, in keys per kernel call (the sequence, over CP ranks).
inline constexpr double kAttentionHalfSeq = 1100;
/// The attention ceilings of the GPU presets are read at the kernel papers' longest sequence
/// (16k, FlashAttention-2/3): the curve is 1 there.
inline constexpr double kAttentionCeilingSeq = 16384;

/// The fraction of its ceiling a causal fused attention kernel reaches over `keys` keys.
inline double attention_sequence_factor(double keys) {
    return keys / (keys + kAttentionHalfSeq) * (kAttentionCeilingSeq + kAttentionHalfSeq) /
           kAttentionCeilingSeq;
}

/// A fused attention pass's time from its two resources: the tensor cores' time on the MMAs
/// and the special function units' time on the exponentials, in series (overlap 0: each waits
/// for the other, Hopper's FlashAttention-3 / cuDNN head-dim curves), fully overlapped (1: the
/// slower sets the pace, Blackwell's asynchronous MMA) or in between (docs/attention_exp.md).
inline double fused_attention_time_s(double mma_s, double exp_s, double overlap) {
    return std::max(mma_s, exp_s) + (1.0 - overlap) * std::min(mma_s, exp_s);
}

/// FP8 casts in kernels of their own (HardwareSpec::fp8_cast_separate: torchao Float8 with
/// dynamic tensorwise scaling, torchtitan's FP8). Sized as torchao's own roofline of them
/// (pytorch/ao torchao/float8/roofline_utils.py, get_float8_mem_sympy): each bf16 GEMM input is
/// cast by an amax pass (a read, 2 bytes per element; fused into the kernel that produces the
/// tensor for activations and output gradients under torch.compile, not for weights), a small
/// second amax stage, and a quantize pass that reads it (2 bytes) and writes it in FP8 twice,
/// row- and column-major (2 x 1 byte), the second for the backward's transposed GEMM. A linear
/// layer casts its input (4 bytes per element) and weight (6) in the forward and its output
/// gradient (4) in the backward; the FP8 input and weight are saved for the backward (no
/// recast). TransformerEngine's fused modules (LayerNormLinear, LayerNormMLP) fuse the cast into
/// the producing kernel: nothing extra. A bare te.Linear (Fp8Cast::te_linear: llm-foundry's
/// fc_type = "te") casts its input, its weight (every call: no is_first_microbatch cache) and, in
/// the backward, its output gradient in one cast-transpose pass each (transformer_engine/pytorch/
/// module/linear.py, fp8_cast_transpose_fused: read 2 bytes, write the FP8 tensor and its
/// transpose, 2 x 1), the amax taken in that pass (delayed scaling): 4 bytes per element for all
/// three, no second amax stage (the scale update is one multi-tensor kernel per step).
inline constexpr double kFp8CastActivationBytes = 4;  ///< per element: quantize read 2, write 2
inline constexpr double kFp8CastWeightBytes = 6;      ///< per element: amax read 2 + quantize 4
inline constexpr double kTeCastTransposeBytes = 4;    ///< per element: read 2, write 2 x 1
/// The second stage of each tensor's amax reduction: torchao's measured single-element Triton
/// kernel on H100 (roofline_utils.py, TRITON_KERNEL_1_ELEMENT_TIME_SEC).
inline constexpr double kFp8AmaxStageTime_s = 2e-6;

/// Builds one SegmentList, keeping its time per category: time_s() = compute_s + the exposed
/// communication of every category + stretch_s, exactly (the breakdown's lines add up).
struct PassBuilder {
    SegmentList list;
    int kernels = 0;
    double compute_s = 0;
    std::array<double, kCategories> exposed{};
    double stretch_s = 0;  ///< host-bound stretch (apply_launch_floor)

    void compute(KernelClass cls, double time_s, int sync);
    void comm(KernelClass cls, double time_s, LinkLevel link, Category cat);
    /// A compute op with a collective on another stream; the collective's excess is exposed.
    /// `cost` (HardwareSpec::overlap_compute_cost): the compute beside the collective takes
    /// `cost` x its time more, so the pair takes max(c, g + cost c); what it adds over the
    /// compute is the category's.
    void overlapped(const Op& compute_op, const Op& comm_op, Category cat, double cost);
    /// An AllGather as TransformerEngine's ring exchange beside the GEMM that consumes it: the
    /// GEMM in n chunks, each computed while the next chunk arrives (n - 1 transfers of c / (n -
    /// 1)): (n - 1) max(g / n, c / (n - 1)) + g / n = max(g (n - 1) / n, c) + g / n.
    void ring_exchange(const Op& gemm, const Op& gather, int n, Category cat);
    /// A ReduceScatter pipelined behind the GEMM that produces it in k splits (each split's
    /// scatter beside the next split's GEMM): g / k + max(g, c) (k - 1) / k + c / k, the GEMM
    /// splits beside a scatter charged `cost` of its time as overlapped() does (max(g, c) becomes
    /// max(c, g + cost c)).
    void pipelined_scatter(const Op& gemm, const Op& scatter, int k, Category cat, double cost);
    MoeLines moe;         ///< the MoE block's lines (zeros for a dense layer)
    bool routed = false;  ///< ops added now are routed work (Op::routed)

    void append(const PassBuilder& other);
    /// Appends `other` with every op's time (and its accounted lines) scaled by `weight`: the
    /// mean layer of a model whose layers differ (dense and MoE) as one segment list.
    void append_scaled(const PassBuilder& other, double weight);
    double time_s() const { return deterministic_time(list); }
    /// Host-bound floor: the pass cannot be shorter than issuing its kernels; stretches every
    /// op by the same factor and records the difference in stretch_s.
    void apply_launch_floor(double kernel_launch_s);
};

/// The achieved fraction of `level`'s bandwidth for NCCL collectives: the hardware's
/// collective_nic_efficiency across NVLink domains (where it gives one), else its
/// collective_efficiency.
double collective_efficiency_at(const HardwareSpec& hw, LinkLevel level);

/// Everything the per-op formulas need, computed once per point.
struct Context {
    const ModelSpec& m;
    const TrainingSpec& tr;
    const HardwareSpec& hw;
    const DesignPoint& p;
    double peak_gemm = 0;  ///< of the training precision's GEMMs
    double peak_bf16 = 0;
    GemmEfficiency gemm_curve;  ///< of the training precision's GEMMs
    double tokens = 0;          ///< b s / c: tokens of a microbatch on one CP rank
    double h = 0, hk = 0, f = 0, t = 1;
    double hq = 0;  ///< query width a d (MLA: a (d_nope + d_rope)); h for classic MHA
    double hv = 0;  ///< value / output-projection input width a d (MLA: a d_v)
    // ---- MoE (docs/moe.md) ----
    double moe_tokens = 0;  ///< tokens entering one GPU's MoE block: b s / (c t) (SP shard)
    int ep = 1, etp = 1;
    ExpertGroup ep_group, etp_group;  ///< a2a view: per-domain members, NIC share
    GroupLink ep_ring;                ///< the EP group as a ring (AllGather dispatcher)
    /// The busiest EP rank's expected load over its balanced share: with moe_force_balance
    /// the capacity factor (buffers padded to it; 1 dropless), with the routing law
    /// E[min(Z, capacity)] (routing.hpp); it sets the expert GEMMs and the dispatch / combine
    double busiest_rank = 1;
    /// Variable-length packing ([variability.documents]): the fused attention's FLOPs at E[S] /
    /// seq^2 of full causal attention, its op marked Op::documents (docs/document_lengths.md)
    bool documents = false;
    double documents_factor = 1;
    int sync = 1;             ///< tp * cp
    bool tp_overlap = false;  ///< --tp-comm-overlap in effect (tp > 1 with SP)
    GroupLink tp_link, cp_link, pp_link;
    GroupLink dp_link;  ///< the data-parallel group with CP: d c ranks
    /// The ZeRO stage of the point's traffic (sharding_stage: FSDP under PP may move 1's)
    int zero = 0;

    Context(const ModelSpec& model, const TrainingSpec& training, const HardwareSpec& hardware,
            const DesignPoint& point);

    /// A GEMM in the training precision, and one in bf16.
    double gemm(double flops, double m_rows, double k, double n) const;
    double gemm_bf16(double flops, double m_rows, double k, double n) const;
    double memory(double bytes) const;
    /// A collective over `link` at its link level's efficiency (collective_efficiency_at).
    double coll(KernelClass cls, double bytes, const GroupLink& link) const;
    /// Activation bytes of elementwise kernels: replicated over TP unless sequence parallel.
    double act(double bytes) const { return p.sequence_parallel ? bytes / t : bytes; }
};

/// The separate FP8 casts of one linear layer's forward (its input of `input_elements` and its
/// weight of `weight_elements` elements on this GPU) and backward (its output gradient of
/// `grad_elements`, its weight of `weight_elements`); 0 unless the training precision is FP8
/// and the stack casts outside the producing kernels (Fp8Cast::separate or te_linear).
double fp8_cast_forward_s(const Context& c, double input_elements, double weight_elements);
double fp8_cast_backward_s(const Context& c, double grad_elements, double weight_elements);

/// torchao's Float8 weights under per-layer FSDP with fp8_params (`enable_fsdp_float8_all_gather`):
/// FSDP gathers FP8 weights that torchao cast on the local shard in `fsdp_pre_all_gather`
/// (pytorch/ao torchao/float8/fsdp_utils.py) with a scale precomputed once per step for all of
/// them (`precompute_float8_dynamic_scale_for_fsdp`): a read of 2 and a write of 1 byte per shard
/// element at each gather (the forward's; a recomputed forward's), no amax pass of its own.
/// Float8Linear then casts no weight itself (`tensor_already_casted_to_fp8`), but the
/// backward's input-gradient GEMM takes the gathered row-major FP8 weight as its second operand
/// and `preprocess_addmm` copies it column-major (float8_ops.py, `b_data.t().contiguous().t()`:
/// read 1, write 1 byte per element of the whole weight).
bool fsdp_fp8_weights(const Context& c);
inline constexpr double kFsdpFp8ShardCastBytes = 3;    ///< per shard element: read 2, write 1
inline constexpr double kFp8WeightTransposeBytes = 2;  ///< per element: read 1, write 1

/// A TP collective of one activation (2 b s h / c bytes over the TP group): the
/// sequence-parallel AllGather / ReduceScatter, or the AllReduce.
Op tp_op(const Context& c, KernelClass cls);
/// One pipeline transfer: a microbatch's activation (or gradient) split over the TP ranks,
/// 2 b s h / (c t) bytes per rank to the next stage (Megatron's scatter-gather or
/// sequence-parallel shard; DeepSpeed's PartitionedTensor).
Op stage_transfer(const Context& c);

/// Attention core (scores, softmax, dropout, scores x V) of one pass; `scale` = 1 forward,
/// 2 backward. CP: the K/V ring exchange runs concurrently with the attention kernel.
void attention_core(const Context& c, PassBuilder& b, double scale);
/// One layer's forward; `moe` = an MoE layer (router, dispatch, experts, combine) instead of
/// the dense MLP.
void layer_forward(const Context& c, PassBuilder& b, bool moe = false);
/// The forward work a point with recompute = "selective" re-runs in one layer's backward: the
/// [training] recompute_modules of that layer's kind (docs/recompute_modules.md).
void layer_recompute(const Context& c, PassBuilder& b, bool moe = false);
/// One layer's backward (without recompute).
void layer_backward(const Context& c, PassBuilder& b, bool moe = false);

/// Bytes one GPU sends to one NVLink-domain peer (nvlink) and over its NIC (nic) to dispatch
/// `tokens` tokens of `bytes_per_token` each to top_k experts spread evenly over an EP group of
/// `ep` ranks, `per_domain` of them in a domain (`domains` domains):
///  - alltoall: copies to each rank in proportion; self 1/ep, domain (per_domain - 1)/ep, the
///    rest over the NIC;
///  - deepep / hybridep: a token is sent once to each rank that holds one of its experts
///    (the rank's E / ep local experts share one copy: expected ep p ranks, p = 1 -
///    C(E - E/ep, k) / C(E, k) for k distinct experts drawn evenly), crossing the NIC once per
///    remote domain it is routed to (expected (domains - 1)(1 - (1 - 1/domains)^k) domains) and
///    NVLink once per other rank (directly, or forwarded inside the remote domain);
///  - allgather: every rank receives every token once (ring AllGather over the group).
struct DispatchBytes {
    double nvlink = 0;
    double nic = 0;
};
DispatchBytes dispatch_bytes(TrainingSpec::MoeDispatcher dispatcher, double tokens,
                             double bytes_per_token, int top_k, int experts,
                             const ExpertGroup& group);
/// Time of one dispatch (or combine) of those bytes: the NVLink and NIC parts run at once,
/// max(nvlink / (nvlink bw x eff), nic / (nic bw x eff)) + the latencies of the levels used.
double dispatch_time_s(const Context& c, double tokens, double bytes_per_token);

/// ZeRO-3 / FSDP: the pass's compute beside the per-layer AllGather of the weights (and, in the
/// backward, the ReduceScatter of the gradients); see deterministic.hpp. With no gather
/// (gather_s 0: DeepSpeed's ZeRO-2 with overlap_comm) the scatter runs beside all of it.
PassBuilder fsdp_wrap(const Context& c, const PassBuilder& pass, double gather_s, double scatter_s,
                      bool prefetch);

/// The word embedding and the LM head with its loss, forward and backward.
struct EndPasses {
    PassBuilder embedding_forward, embedding_backward, head_forward, head_backward;
};
EndPasses end_passes(const Context& c);

}  // namespace prism::detail
