#include "src/model/detail/layer_passes.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "src/model/collectives.hpp"
#include "src/model/detail/roofline.hpp"

namespace prism::detail {

// ---- PassBuilder ----------------------------------------------------------------------------

void PassBuilder::compute(KernelClass cls, double time_s, int sync) {
    list.push_back(Segment{{Op{cls, time_s, sync, LinkLevel::local, routed}}});
    ++kernels;
    compute_s += time_s;
}

void PassBuilder::comm(KernelClass cls, double time_s, LinkLevel link, Category cat) {
    if (time_s <= 0) return;
    list.push_back(Segment{{Op{cls, time_s, 1, link, routed}}});
    ++kernels;
    exposed[cat] += time_s;
}

namespace {
Op scaled(Op op, double factor) {
    op.time_s *= factor;
    return op;
}

/// `compute` slowed by the collective `comm` beside it (HardwareSpec::overlap_compute_cost).
Op beside(Op compute, const Op& comm, double cost) {
    compute.time_s += cost * comm.time_s;
    return compute;
}
}  // namespace

void PassBuilder::overlapped(const Op& compute_op, const Op& comm_op, Category cat, double cost) {
    kernels += 2;
    compute_s += compute_op.time_s;
    const Op slowed = beside(compute_op, comm_op, cost);
    exposed[cat] += std::max(slowed.time_s, comm_op.time_s) - compute_op.time_s;
    list.push_back(Segment{{slowed, comm_op}});
}

void PassBuilder::ring_exchange(const Op& gemm, const Op& gather, int n, Category cat) {
    if (n <= 1 || gather.time_s <= 0) {
        compute(gemm.cls, gemm.time_s, gemm.sync_size);
        return;
    }
    const double chunk = 1.0 / n;
    const Op body = scaled(gemm, 1.0 - chunk);
    list.push_back(Segment{{body, gather}});
    list.push_back(Segment{{scaled(gemm, chunk)}});
    kernels += n + 1;
    compute_s += gemm.time_s;
    exposed[cat] += std::max(0.0, gather.time_s - body.time_s);
}

void PassBuilder::pipelined_scatter(const Op& gemm, const Op& scatter, int k, Category cat,
                                    double cost) {
    if (k <= 1 || scatter.time_s <= 0) {
        compute(gemm.cls, gemm.time_s, gemm.sync_size);
        comm(scatter.cls, scatter.time_s, scatter.link, cat);
        return;
    }
    const double split = 1.0 / k;
    const Op body = scaled(gemm, 1.0 - split);
    const Op body_comm = scaled(scatter, 1.0 - split);
    const Op slowed = beside(body, body_comm, cost);
    list.push_back(Segment{{scaled(gemm, split)}});
    list.push_back(Segment{{slowed, body_comm}});
    list.push_back(Segment{{scaled(scatter, split)}});
    kernels += 2 * k;
    compute_s += gemm.time_s;
    exposed[cat] +=
        std::max(slowed.time_s, body_comm.time_s) - body.time_s + split * scatter.time_s;
}

void PassBuilder::append(const PassBuilder& other) {
    list.insert(list.end(), other.list.begin(), other.list.end());
    kernels += other.kernels;
    compute_s += other.compute_s;
    stretch_s += other.stretch_s;
    for (int i = 0; i < kCategories; ++i) exposed[i] += other.exposed[i];
}

void PassBuilder::append_scaled(const PassBuilder& other, double weight) {
    for (const Segment& seg : other.list) {
        Segment scaled_seg = seg;
        for (Op& op : scaled_seg.ops) op.time_s *= weight;
        list.push_back(std::move(scaled_seg));
    }
    kernels += int(std::lround(weight * other.kernels));
    compute_s += weight * other.compute_s;
    stretch_s += weight * other.stretch_s;
    for (int i = 0; i < kCategories; ++i) exposed[i] += weight * other.exposed[i];
    moe.add(other.moe, weight);
}

void PassBuilder::apply_launch_floor(double kernel_launch_s) {
    const double floor = kernels * kernel_launch_s;
    const double t = time_s();
    if (t <= 0 || floor <= t) return;
    const double scale = floor / t;
    for (auto& seg : list)
        for (auto& op : seg.ops) op.time_s *= scale;
    stretch_s += time_s() - t;
}

// ---- Context ---------------------------------------------------------------------------------

Context::Context(const ModelSpec& model, const TrainingSpec& training, const HardwareSpec& hardware,
                 const DesignPoint& point)
    : m(model), tr(training), hw(hardware), p(point), zero(sharding_stage(training, point)) {}

double Context::gemm(double flops, double m_rows, double k, double n) const {
    const double bytes = 2.0 * (m_rows * k + k * n + m_rows * n);
    return roofline_time_s(hw.gpu, gemm_curve, peak_gemm, flops, bytes);
}

double Context::gemm_bf16(double flops, double m_rows, double k, double n) const {
    const double bytes = 2.0 * (m_rows * k + k * n + m_rows * n);
    return roofline_time_s(hw.gpu, hw.gpu.gemm, peak_bf16, flops, bytes);
}

double Context::memory(double bytes) const { return roofline_time_s(hw.gpu, 1, 0, bytes); }

double collective_efficiency_at(const HardwareSpec& hw, LinkLevel level) {
    const bool nic = level == LinkLevel::nic || level == LinkLevel::rack || level == LinkLevel::pod;
    return nic && hw.collective_nic_efficiency > 0 ? hw.collective_nic_efficiency
                                                   : hw.collective_efficiency;
}

double Context::coll(KernelClass cls, double bytes, const GroupLink& link) const {
    return collective_time_s(cls, bytes, link, collective_efficiency_at(hw, link.level));
}

bool fsdp_fp8_weights(const Context& c) {
    return c.tr.precision == Precision::fp8 && c.tr.fp8_params && c.zero >= 3 &&
           c.hw.fp8_cast == Fp8Cast::separate;
}

double fp8_cast_forward_s(const Context& c, double input_elements, double weight_elements) {
    if (c.tr.precision != Precision::fp8) return 0;
    switch (c.hw.fp8_cast) {
        case Fp8Cast::fused:
            return 0;
        case Fp8Cast::separate:
            if (fsdp_fp8_weights(c)) {
                const double shards = double(c.p.dp) * c.p.cp;
                return c.memory(kFp8CastActivationBytes * input_elements +
                                kFsdpFp8ShardCastBytes * weight_elements / shards) +
                       (input_elements > 0 ? kFp8AmaxStageTime_s : 0.0);
            }
            return c.memory(kFp8CastActivationBytes * input_elements +
                            kFp8CastWeightBytes * weight_elements) +
                   2 * kFp8AmaxStageTime_s;
        case Fp8Cast::te_linear:
            return c.memory(kTeCastTransposeBytes * (input_elements + weight_elements));
    }
    return 0;
}

double fp8_cast_backward_s(const Context& c, double grad_elements, double weight_elements) {
    if (c.tr.precision != Precision::fp8) return 0;
    switch (c.hw.fp8_cast) {
        case Fp8Cast::fused:
            return 0;
        case Fp8Cast::separate:
            return c.memory(
                       kFp8CastActivationBytes * grad_elements +
                       (fsdp_fp8_weights(c) ? kFp8WeightTransposeBytes * weight_elements : 0.0)) +
                   kFp8AmaxStageTime_s;
        case Fp8Cast::te_linear:
            return c.memory(kTeCastTransposeBytes * grad_elements);
    }
    return 0;
}

// ---- one layer -------------------------------------------------------------------------------

Op tp_op(const Context& c, KernelClass cls) {
    return Op{cls, c.coll(cls, 2 * c.tokens * c.h, c.tp_link), 1, c.tp_link.level};
}

Op stage_transfer(const Context& c) {
    return Op{KernelClass::p2p, c.coll(KernelClass::p2p, 2 * c.tokens * c.h / c.t, c.pp_link), 1,
              c.pp_link.level};
}

namespace {

/// TP communication of one "f/g" point (Megatron): AllReduce, or with sequence parallelism
/// the ReduceScatter (after a row-parallel GEMM) / AllGather (before a column-parallel GEMM).
void tp_gather(const Context& c, PassBuilder& b) {
    if (c.p.tp <= 1 || !c.p.sequence_parallel) return;
    const Op op = tp_op(c, KernelClass::allgather);
    b.comm(op.cls, op.time_s, op.link, kTp);
}

void tp_reduce(const Context& c, PassBuilder& b) {
    if (c.p.tp <= 1) return;
    const Op op =
        tp_op(c, c.p.sequence_parallel ? KernelClass::reducescatter : KernelClass::allreduce);
    b.comm(op.cls, op.time_s, op.link, kTp);
}

Op gemm_op(const Context& c, double k, double n) {
    const double rows = c.tokens;
    return Op{KernelClass::gemm, c.gemm(2.0 * rows * k * n, rows, k, n), c.sync, LinkLevel::local};
}

/// Adds a linear layer's separate FP8 casts (fp8_cast_forward_s / fp8_cast_backward_s).
void add_cast(const Context& c, PassBuilder& b, double time_s) {
    if (time_s > 0) b.compute(KernelClass::elementwise, time_s, c.sync);
}

/// A column-parallel GEMM with its input gathered first (SP), or by a ring exchange (overlap).
/// Separate FP8 casts: of the input before it is gathered (the SP shard: torchao's FP8
/// all-gather for TP) and of the local weight.
void column_forward(const Context& c, PassBuilder& b, double k, double n) {
    const Op g = gemm_op(c, k, n);
    add_cast(c, b, fp8_cast_forward_s(c, c.act(c.tokens * k), k * n));
    if (c.tp_overlap) {
        b.ring_exchange(g, tp_op(c, KernelClass::allgather), c.p.tp, kTp);
        return;
    }
    tp_gather(c, b);
    b.compute(g.cls, g.time_s, g.sync_size);
}

/// A row-parallel GEMM with its output reduced after it, or pipelined behind it (overlap).
void row_forward(const Context& c, PassBuilder& b, double k, double n) {
    const Op g = gemm_op(c, k, n);
    add_cast(c, b, fp8_cast_forward_s(c, c.tokens * k, k * n));
    if (c.tp_overlap) {
        b.pipelined_scatter(g, tp_op(c, KernelClass::reducescatter), kPipelinedScatterSplits, kTp,
                            c.hw.overlap_compute_cost);
        return;
    }
    b.compute(g.cls, g.time_s, g.sync_size);
    tp_reduce(c, b);
}

}  // namespace

void attention_core(const Context& c, PassBuilder& b, double scale) {
    const double heads = c.m.heads / c.t;
    const double seq = c.m.seq;
    // each CP rank's queries meet all s keys; the full square is computed unless flash+causal
    double flops = 2.0 * c.tokens * seq * (c.hq + c.hv) / c.t;
    double bytes = 2.0 * c.tokens * (c.hq + c.hv + 2 * c.hk) / c.t;  // Q, K, V, O
    double score_bytes = 0;
    // variable-length packing masks the fused kernel per document: it computes the documents'
    // squares, E[S] on average (the unfused path computes the whole square whatever the mask);
    // the kernel's efficiency stays that of the whole sequence's call (its tiles skip the
    // masked blocks)
    const bool documents = c.documents && c.tr.flash_attention;
    double masked = 1.0;
    if (c.tr.flash_attention) {
        flops *= 0.5;
        if (documents) masked = c.documents_factor;
    } else {
        bytes += 4.0 * heads * c.tokens * seq;       // scores written, probabilities read
        score_bytes = 9.0 * heads * c.tokens * seq;  // softmax r/w, dropout r/w + mask
    }
    // efficiency of one of the two batched GEMMs: the curve is per GEMM call; a fused kernel at
    // its own efficiency, whose backward recomputes the scores: 2.5 x the forward FLOPs
    // (Dao 2023, FlashAttention-2, section 3.1.2) instead of 2 x
    const double call = 0.5 * flops;
    const bool fused = c.tr.flash_attention && c.hw.gpu.attention_efficiency > 0;
    const double sequence = attention_sequence_factor(seq / std::max(1, c.p.cp));
    const double efficiency = fused ? std::min(1.0, c.hw.gpu.attention_efficiency * sequence)
                                    : gemm_efficiency(c.hw.gpu.gemm, call);
    const double flop_scale = fused && scale > 1 ? 2.5 : scale;
    double compute = flop_scale * masked * flops / (c.peak_bf16 * efficiency);
    if (fused && c.hw.gpu.exp_per_s > 0) {
        // one exponential per score element and query head, in the forward and again in the
        // backward's recompute of P (GQA / MLA: query heads; causal: half the square)
        const double exps = masked * 0.5 * c.tokens * seq * heads;
        compute = fused_attention_time_s(compute, exps / (c.hw.gpu.exp_per_s * sequence),
                                         c.hw.gpu.attention_exp_overlap);
    }
    const double time =
        std::max(compute, scale * bytes / (c.hw.gpu.hbm_bytes_per_s * c.hw.gpu.hbm_efficiency));
    Op att{KernelClass::attention, time, c.sync, LinkLevel::local};
    // the microbatch's S scales the op where its FLOPs set its time (not memory-bound)
    att.documents = documents && compute >= time;
    if (c.p.cp > 1) {
        const double kv = 2.0 * 2.0 * c.tokens * c.hk / c.t;  // one K and V chunk, bf16
        const double ring = scale * (c.p.cp - 1) * c.coll(KernelClass::p2p, kv, c.cp_link);
        b.overlapped(att, Op{KernelClass::p2p, ring, 1, c.cp_link.level}, kCp,
                     c.hw.overlap_compute_cost);
    } else {
        b.compute(KernelClass::attention, time, c.sync);
        b.list.back().ops.back().documents = att.documents;
    }
    if (score_bytes > 0) b.compute(KernelClass::elementwise, scale * c.memory(score_bytes), c.sync);
}

namespace {

/// MLA's down projections (h -> r_q + r_kv + d_rope, replicated over TP, on the gathered
/// sequence), and the column-parallel up projections (r_q -> a (d_nope + d_rope), r_kv ->
/// a (d_nope + d_v)); without r_q the queries come from h directly.
struct MlaShapes {
    double down_n = 0;          ///< output width of the down projections (not / t)
    double q_k = 0, q_n = 0;    ///< the query up (or direct) projection, n / t
    double kv_k = 0, kv_n = 0;  ///< the key/value up projection, n / t
};

MlaShapes mla_shapes(const Context& c) {
    const ModelSpec& m = c.m;
    MlaShapes s;
    const double a = m.heads;
    s.down_n = m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim;
    s.q_k = m.q_lora_rank > 0 ? m.q_lora_rank : c.h;
    s.q_n = a * (m.qk_nope_head_dim + m.qk_rope_head_dim) / c.t;
    s.kv_k = m.kv_lora_rank;
    s.kv_n = a * (m.qk_nope_head_dim + m.v_head_dim) / c.t;
    return s;
}

Op gemm_rows(const Context& c, double rows, double k, double n) {
    return Op{KernelClass::gemm, c.gemm(2.0 * rows * k * n, rows, k, n), c.sync, LinkLevel::local};
}

double cap(const Context& c) {
    return c.tr.moe_capacity_factor > 0 ? c.tr.moe_capacity_factor : 1.0;
}

/// The grouped expert GEMMs of one pass on one GPU: E / ep local experts, each with n_e =
/// T k ep etp / E tokens (x the busiest rank's load factor: the capacity factor with forced
/// balance, E[min(Z, capacity)] with the routing law), f_e / etp wide. A grouped GEMM is one
/// kernel, every expert's rows padded to the kernel's 128-row tile (kGroupedGemmTileRows): few
/// tokens per expert waste most of their last tile. It is timed on the GEMM curve at the FLOPs
/// of the experts whose tiles fill the GPU together (the stack's grouped_gemm_wave_experts,
/// at most the local experts; 0 = all of them): small experts (few tokens, a narrow f_e) fill
/// the GPU as badly as a small GEMM, however many of them the rank holds. Every expert's
/// weights are read once.
double grouped_gemm_s(const Context& c, double k_dim, double n_dim) {
    const ModelSpec& m = c.m;
    const double local = double(m.experts) / c.ep;
    const double n_e = c.moe_tokens * m.top_k * c.ep * c.etp / m.experts * c.busiest_rank;
    if (n_e <= 0) return 0;
    const double rows = std::ceil(n_e / kGroupedGemmTileRows) * kGroupedGemmTileRows;
    const double flops = 2.0 * local * rows * k_dim * n_dim;
    const double bytes = 2.0 * local * (n_e * k_dim + k_dim * n_dim + n_e * n_dim);
    GemmEfficiency curve = c.gemm_curve;
    curve.max_efficiency *= c.hw.grouped_gemm_factor;  // the stack's grouped-GEMM factor
    const double wave = c.hw.grouped_gemm_wave_experts > 0
                            ? std::min(local, c.hw.grouped_gemm_wave_experts)
                            : local;
    const double compute = flops / (c.peak_gemm * gemm_efficiency(curve, flops / local * wave));
    return std::max(compute, roofline_time_s(c.hw.gpu, curve, c.peak_gemm, 0, bytes));
}

LinkLevel ep_level(const Context& c) {
    return c.ep_group.domains > 1 ? c.ep_group.link.level : LinkLevel::nvlink;
}

/// The expert-TP AllGather (before the experts) / ReduceScatter (after) of the dispatched
/// tokens, over the etp group.
double etp_collective_s(const Context& c, KernelClass cls) {
    if (c.etp <= 1) return 0;
    const double bytes = 2.0 * c.moe_tokens * c.m.top_k * c.etp * c.h * cap(c);
    return c.coll(cls, bytes, c.etp_group.link);
}

/// The shared experts' forward: a dense MLP of shared x f_e, TP-split as the attention.
void shared_experts_forward(const Context& c, PassBuilder& b) {
    const double gates = c.m.gated_mlp ? 2.0 : 1.0;
    const double fs = double(c.m.shared_experts) * c.m.expert_ffn;
    if (fs <= 0) return;
    column_forward(c, b, c.h, gates * fs / c.t);
    b.compute(KernelClass::elementwise, c.memory(2.0 * c.tokens * (gates + 1.0) * fs / c.t),
              c.sync);
    row_forward(c, b, fs / c.t, c.h);
}

/// The routed experts' activation function (SwiGLU / GeLU) of one forward: reads the FC1
/// output (gates x f_e / etp per dispatched copy), writes the FC2 input.
double moe_activation_s(const Context& c) {
    const double gates = c.m.gated_mlp ? 2.0 : 1.0;
    const double fe = double(c.m.expert_ffn) / c.etp;
    const double n_tokens = c.moe_tokens * c.m.top_k * c.etp * cap(c);
    return c.memory(2.0 * n_tokens * (gates + 1.0) * fe);
}

/// One MoE block pass (forward: scale 1; backward: the data- and weight-gradient GEMMs, the
/// elementwise kernels' bytes twice). The a2a is added to `*deferred` instead of the list when
/// it overlaps another microbatch's compute (moe_a2a_overlap).
void moe_block(const Context& c, PassBuilder& b, bool backward, double* deferred) {
    const ModelSpec& m = c.m;
    const double T = c.moe_tokens, h = c.h, E = m.experts, k = m.top_k;
    const double pass = backward ? 2.0 : 1.0;
    const double gates = m.gated_mlp ? 2.0 : 1.0;
    const double fe = double(m.expert_ffn) / c.etp;
    MoeLines& lines = b.moe;
    auto router_part = [&]() {
        const double gemm = pass * c.gemm_bf16(2.0 * T * h * E, T, h, E);
        // index gathers at the stack's permute factor of a streaming kernel's bandwidth
        const double softmax =
            pass * c.memory(3.0 * 4.0 * T * E) / c.hw.permute_factor;  // fp32 logits, top-k
        // the permute (T tokens read, T k copies written) and, on the combine side, the
        // unpermute (the copies read, T tokens written), bf16
        const double copies = 2.0 * T * k * h * cap(c);
        double bytes = 2.0 * (2.0 * T * h + copies);
        // Megatron's all-to-all dispatcher sorts the received copies by local expert after
        // the a2a and unsorts them before the combine's (token_dispatcher.py
        // sort_chunks_by_idxs, "Permutation 2", with more than one local expert): two more
        // passes over the copies, read and written; the flex dispatcher's backends deliver
        // them per rank and permute once
        const bool sorts = c.tr.moe_dispatcher == TrainingSpec::MoeDispatcher::alltoall &&
                           double(m.experts) / c.ep > 1.0;
        if (sorts) bytes += 2.0 * 2.0 * copies;
        const double permute = pass * c.memory(bytes) / c.hw.permute_factor;
        b.compute(KernelClass::gemm, gemm, c.sync);
        b.compute(KernelClass::elementwise, softmax, c.sync);
        b.compute(KernelClass::elementwise, permute, c.sync);
        lines.router_s += gemm + softmax + permute;
    };
    auto a2a = [&](double time_s, double& line) {
        line += time_s;
        if (deferred != nullptr) {
            *deferred += time_s;
        } else {
            b.routed = true;  // at the busiest rank's load
            b.comm(KernelClass::alltoall, time_s, ep_level(c), kEp);
            b.routed = false;
        }
    };
    auto etp_comm = [&](KernelClass cls, double& line) {
        const double time_s = etp_collective_s(c, cls);
        line += time_s;
        b.comm(cls, time_s, c.etp_group.link.level, kEp);
    };
    auto experts = [&]() {
        const double before = b.compute_s;
        const double fc1 = grouped_gemm_s(c, h, gates * fe);
        const double fc2 = grouped_gemm_s(c, fe, h);
        const double act = pass * moe_activation_s(c);
        const double fs = double(m.shared_experts) * m.expert_ffn;
        if (!backward) {
            shared_experts_forward(c, b);
            b.routed = true;  // the grouped GEMMs at the busiest rank's load
            b.compute(KernelClass::gemm, fc1, c.sync);
            b.routed = false;
            b.compute(KernelClass::elementwise, act, c.sync);
            b.routed = true;
            b.compute(KernelClass::gemm, fc2, c.sync);
            b.routed = false;
        } else {
            b.routed = true;
            b.compute(KernelClass::gemm, 2.0 * fc2, c.sync);
            b.routed = false;
            b.compute(KernelClass::elementwise, act, c.sync);
            b.routed = true;
            b.compute(KernelClass::gemm, 2.0 * fc1, c.sync);
            b.routed = false;
            if (fs > 0) {
                // the shared expert's backward as the dense MLP's, without TP overlap detail
                const Op g2 = gemm_rows(c, c.tokens, fs / c.t, h);
                const Op g1 = gemm_rows(c, c.tokens, h, gates * fs / c.t);
                tp_gather(c, b);
                b.compute(KernelClass::gemm, 2.0 * g2.time_s, c.sync);
                b.compute(KernelClass::elementwise,
                          2.0 * c.memory(2.0 * c.tokens * (gates + 1.0) * fs / c.t), c.sync);
                b.compute(KernelClass::gemm, 2.0 * g1.time_s, c.sync);
                tp_reduce(c, b);
            }
        }
        lines.expert_compute_s += b.compute_s - before;
    };
    // the a2a ends when the busiest rank has received (sent back) its tokens. Every dispatch
    // and combine moves bf16 whatever the GEMMs' precision: Megatron-Core's dispatchers send the
    // hidden states as they are, the flex dispatcher's backends too
    // (megatron/core/transformer/moe/fused_a2a.py, 2025-11 to 2026-04: DeepEP gets the bf16
    // activations, HybridEP asserts "does not support fp8 dispatch"); FP8 on the wire
    // (DeepSeek's own DeepEP training; Megatron's ncclep backend with moe_dispatch_fwd_dtype =
    // "mxfp8", 2026-08) is not modelled. So the dispatch and the combine take the same time.
    const double a2a_s = dispatch_time_s(c, T * c.busiest_rank, 2.0 * h);
    if (!backward) {
        router_part();
        a2a(a2a_s, lines.dispatch_s);
        etp_comm(KernelClass::allgather, lines.dispatch_s);
        experts();
        etp_comm(KernelClass::reducescatter, lines.combine_s);
        a2a(a2a_s, lines.combine_s);
    } else {
        // the combine's backward sends the output gradients the way the dispatch sent tokens
        a2a(a2a_s, lines.combine_s);
        etp_comm(KernelClass::allgather, lines.combine_s);
        experts();
        etp_comm(KernelClass::reducescatter, lines.dispatch_s);
        a2a(a2a_s, lines.dispatch_s);
        router_part();
    }
}

/// Adds the deferred (overlapped) a2a of a layer pass: what the pass's own compute since
/// `compute_before` cannot hide stays exposed (Megatron's 1F1B EP overlap runs another
/// microbatch's compute of about the same length beside it).
void settle_overlapped_a2a(const Context& c, PassBuilder& b, double deferred,
                           double compute_before) {
    if (deferred <= 0) return;
    const double window = b.compute_s - compute_before;
    b.routed = true;  // at the busiest rank's load
    b.comm(KernelClass::alltoall, std::max(0.0, deferred - window), ep_level(c), kEp);
    b.routed = false;
}

/// The probability that a rank holding `local` of `experts` experts is among a token's
/// destinations when it picks `top_k` distinct experts evenly: 1 - C(E - L, k) / C(E, k).
double rank_hit_probability(int experts, double local, int top_k) {
    if (experts <= 0 || local <= 0) return 0;
    double miss = 1;  // C(E - L, k) / C(E, k) = prod_i (E - L - i) / (E - i)
    for (int i = 0; i < top_k; ++i) {
        miss *= std::max(0.0, (double(experts) - local - i) / (double(experts) - i));
    }
    return 1.0 - miss;
}

}  // namespace

DispatchBytes dispatch_bytes(TrainingSpec::MoeDispatcher dispatcher, double tokens,
                             double bytes_per_token, int top_k, int experts, const ExpertGroup& g) {
    DispatchBytes out;
    const double ep = g.size;
    if (ep <= 1) return out;
    const double n_in = g.per_domain;
    const double copies = tokens * top_k * bytes_per_token;
    switch (dispatcher) {
        case TrainingSpec::MoeDispatcher::alltoall:
            out.nvlink = copies * (n_in - 1) / ep;
            out.nic = copies * (ep - n_in) / ep;
            break;
        case TrainingSpec::MoeDispatcher::deepep:
        case TrainingSpec::MoeDispatcher::hybridep: {
            const double d = g.domains;
            const double remote =
                d > 1 ? (d - 1) * (1.0 - std::pow(1.0 - 1.0 / d, double(top_k))) : 0.0;
            out.nic = tokens * bytes_per_token * remote;
            // one copy per destination rank: ep p of them, p per rank
            const double per_rank = tokens * bytes_per_token *
                                    rank_hit_probability(experts, double(experts) / ep, top_k);
            out.nvlink = per_rank * (n_in - 1) + per_rank * (ep - n_in) * (n_in - 1) / n_in;
            break;
        }
        case TrainingSpec::MoeDispatcher::allgather: {
            const double received = tokens * bytes_per_token * (ep - 1);
            out.nvlink = received * (n_in - 1) / (ep - 1);
            out.nic = received * (ep - n_in) / (ep - 1);
            break;
        }
    }
    return out;
}

double dispatch_time_s(const Context& c, double tokens, double bytes_per_token) {
    if (c.ep <= 1) return 0;
    if (c.tr.moe_dispatcher == TrainingSpec::MoeDispatcher::allgather) {
        // a ring AllGather of every rank's tokens over the EP group
        const double bytes = tokens * bytes_per_token * c.ep;
        return c.coll(KernelClass::allgather, bytes, c.ep_ring);
    }
    const DispatchBytes d = dispatch_bytes(c.tr.moe_dispatcher, tokens, bytes_per_token, c.m.top_k,
                                           c.m.experts, c.ep_group);
    // each link level at its a2a efficiency (the kernel's ceiling x the stack's factor); the
    // flex dispatcher's backends have their own NVLink ceilings where the GPU gives them
    const double eff = c.hw.collective_efficiency;
    const double backend = c.tr.moe_dispatcher == TrainingSpec::MoeDispatcher::deepep
                               ? c.hw.deepep_nvlink_efficiency
                           : c.tr.moe_dispatcher == TrainingSpec::MoeDispatcher::hybridep
                               ? c.hw.hybridep_nvlink_efficiency
                               : 0.0;
    const double eff_nvlink = backend > 0                      ? backend
                              : c.hw.a2a_nvlink_efficiency > 0 ? c.hw.a2a_nvlink_efficiency
                                                               : eff;
    const double eff_nic = c.hw.a2a_nic_efficiency > 0 ? c.hw.a2a_nic_efficiency : eff;
    const double nvlink =
        d.nvlink > 0 ? d.nvlink / (c.hw.nvlink_bytes_per_s * eff_nvlink) + c.hw.nvlink_latency_s
                     : 0.0;
    const double nic =
        d.nic > 0 ? d.nic / (c.ep_group.link.bytes_per_s * eff_nic) + c.ep_group.link.latency_s
                  : 0.0;
    return std::max(nvlink, nic);
}

void layer_forward(const Context& c, PassBuilder& b, bool moe) {
    const double M = c.tokens, h = c.h, t = c.t;
    const double compute_before = b.compute_s;
    double deferred = 0;
    auto elementwise = [&](double bytes) {
        b.compute(KernelClass::elementwise, c.memory(bytes), c.sync);
    };
    elementwise(c.act(4 * M * h));  // layer norm
    if (c.m.is_mla()) {
        const MlaShapes s = mla_shapes(c);
        column_forward(c, b, h, s.down_n);
        const Op q = gemm_rows(c, M, s.q_k, s.q_n);
        const Op kv = gemm_rows(c, M, s.kv_k, s.kv_n);
        b.compute(KernelClass::gemm, q.time_s, c.sync);
        b.compute(KernelClass::gemm, kv.time_s, c.sync);
    } else {
        column_forward(c, b, h, (c.hq + 2 * c.hk) / t);
    }
    attention_core(c, b, 1.0);
    row_forward(c, b, c.hv / t, h);
    elementwise(c.act(7 * M * h));  // bias + dropout + residual
    elementwise(c.act(4 * M * h));  // layer norm
    if (moe) {
        moe_block(c, b, false, c.tr.moe_a2a_overlap ? &deferred : nullptr);
    } else {
        column_forward(c, b, h, (c.m.gated_mlp ? 2.0 : 1.0) * c.f / t);
        elementwise(2 * M * (c.m.gated_mlp ? 3.0 : 2.0) * c.f / t);  // activation (GeLU / SwiGLU)
        row_forward(c, b, c.f / t, h);
    }
    elementwise(c.act(7 * M * h));
    settle_overlapped_a2a(c, b, deferred, compute_before);
}

namespace {

/// torchtitan's op-level SAC under torch.compile (docs/torchtitan_sac.md): the compiled
/// block's partitioner re-runs, in the backward, every op the policy does not save that the
/// backward needs. Of the GEMMs: wk (its K feeds SDPA's backward), w3 (the SiLU-mul backward
/// and w2's weight gradient), and wo where its output is not saved (without a TP
/// reduce-scatter: h = x + wo(...) feeds ffn_norm's backward). Of the rest: the two RMSNorms,
/// the residual add h, SiLU * mul; with separate FP8 casts every cast the backward's GEMMs use
/// (torchao's casts are not in the save list: inputs and weights cast again). RoPE and GQA's
/// repeat_kv are not timed, as the forward does not time them. In the backward's order: the
/// MLP part, then the attention part.
void op_sac_recompute(const Context& c, PassBuilder& b) {
    const double M = c.tokens, h = c.h, t = c.t, f = c.f;
    auto elementwise = [&](double bytes) {
        b.compute(KernelClass::elementwise, c.memory(bytes), c.sync);
    };
    add_cast(c, b, fp8_cast_forward_s(c, M * c.hv / t, c.hv / t * h));  // wo's input, weight
    if (!op_sac_saves_wo_output(c.p)) {
        const Op wo = gemm_op(c, c.hv / t, h);
        b.compute(wo.cls, wo.time_s, wo.sync_size);
    }
    elementwise(c.act(6 * M * h));  // the residual add h = x + o: two reads, one write
    elementwise(c.act(4 * M * h));  // ffn_norm
    tp_gather(c, b);
    add_cast(c, b, fp8_cast_forward_s(c, c.act(M * h), h * f / t));  // w3's input and weight
    const Op w3 = gemm_op(c, h, f / t);
    b.compute(w3.cls, w3.time_s, w3.sync_size);
    add_cast(c, b, fp8_cast_forward_s(c, 0, h * f / t));          // w1's weight
    elementwise(2 * M * 3.0 * f / t);                             // SiLU(w1 x) * w3 x
    add_cast(c, b, fp8_cast_forward_s(c, M * f / t, f / t * h));  // w2's input and weight
    elementwise(c.act(4 * M * h));                                // attention_norm
    tp_gather(c, b);
    add_cast(c, b, fp8_cast_forward_s(c, c.act(M * h), h * c.hk / t));  // wk's input, weight
    const Op wk = gemm_op(c, h, c.hk / t);
    b.compute(wk.cls, wk.time_s, wk.sync_size);
    add_cast(c, b, fp8_cast_forward_s(c, 0, h * (c.hq + c.hk) / t));  // wq's and wv's weights
}

}  // namespace

void layer_recompute(const Context& c, PassBuilder& b, bool moe) {
    if (c.tr.torchtitan_op_sac()) {
        op_sac_recompute(c, b);
        return;
    }
    const TrainingSpec::RecomputeModules& rm = c.tr.recompute_modules;
    const double M = c.tokens, h = c.h, t = c.t;
    // in the backward's order: the MLP part first, then the attention part
    if (moe && rm.moe) {
        // the whole MoE block (router, dispatch, experts, combine) again; its a2a overlaps
        // another microbatch's compute as the block's own does
        const double compute_before = b.compute_s;
        double deferred = 0;
        moe_block(c, b, false, c.tr.moe_a2a_overlap ? &deferred : nullptr);
        settle_overlapped_a2a(c, b, deferred, compute_before);
    } else if (moe) {
        if (rm.shared_experts) shared_experts_forward(c, b);
        if (rm.moe_act) b.compute(KernelClass::elementwise, moe_activation_s(c), c.sync);
    } else if (rm.mlp) {
        const double gates = c.m.gated_mlp ? 2.0 : 1.0;
        column_forward(c, b, h, gates * c.f / t);
        b.compute(KernelClass::elementwise, c.memory(2 * M * (gates + 1.0) * c.f / t), c.sync);
        row_forward(c, b, c.f / t, h);
    }
    if (rm.layernorm) {
        b.compute(KernelClass::elementwise, c.memory(c.act(4 * M * h)), c.sync);  // pre-MLP
    }
    if (rm.core_attn) attention_core(c, b, 1.0);
    if (rm.mla_up_proj && c.m.is_mla()) {
        const MlaShapes s = mla_shapes(c);
        b.compute(KernelClass::gemm, gemm_rows(c, M, s.q_k, s.q_n).time_s, c.sync);
        b.compute(KernelClass::gemm, gemm_rows(c, M, s.kv_k, s.kv_n).time_s, c.sync);
    }
    if (rm.layernorm) {
        b.compute(KernelClass::elementwise, c.memory(c.act(4 * M * h)), c.sync);  // input
    }
}

/// Each GEMM becomes a data-gradient and a weight-gradient GEMM of the same size; elementwise
/// kernels move twice the bytes. TP as in Megatron's LinearWithGradAccumulationAndAsync-
/// Communication: a column-parallel linear's input-gradient AllReduce (ReduceScatter with SP)
/// runs concurrently with its weight-gradient GEMM, and with SP the re-gather of its input
/// concurrently with the data-gradient GEMM (TransformerEngine's "bulk" overlaps do the same);
/// a row-parallel linear's output gradient is all-gathered (SP) before it, exposed, or with
/// --tp-comm-overlap by a ring exchange beside its data-gradient GEMM.
void layer_backward(const Context& c, PassBuilder& b, bool moe) {
    const double M = c.tokens, h = c.h, t = c.t;
    const double compute_before = b.compute_s;
    double deferred = 0;
    auto elementwise = [&](double bytes) {
        b.compute(KernelClass::elementwise, 2 * c.memory(bytes), c.sync);
    };
    // separate FP8 casts of the output gradient: a row-parallel linear's (h wide) on the SP
    // shard before its gather, a column-parallel linear's (n / t wide) whole
    auto row_parallel = [&](double k, double n) {
        const Op g = gemm_op(c, k, n);
        add_cast(c, b, fp8_cast_backward_s(c, c.act(c.tokens * n), k * n));
        if (c.tp_overlap) {
            b.ring_exchange(g, tp_op(c, KernelClass::allgather), c.p.tp, kTp);
        } else {
            tp_gather(c, b);
            b.compute(KernelClass::gemm, g.time_s, c.sync);
        }
        b.compute(KernelClass::gemm, g.time_s, c.sync);
    };
    auto column_parallel = [&](double k, double n) {
        const Op g = gemm_op(c, k, n);
        add_cast(c, b, fp8_cast_backward_s(c, c.tokens * n, k * n));
        if (c.p.tp <= 1) {
            b.compute(KernelClass::gemm, g.time_s, c.sync);
            b.compute(KernelClass::gemm, g.time_s, c.sync);
            return;
        }
        if (c.p.sequence_parallel) {
            b.overlapped(g, tp_op(c, KernelClass::allgather), kTp, c.hw.overlap_compute_cost);
            b.overlapped(g, tp_op(c, KernelClass::reducescatter), kTp, c.hw.overlap_compute_cost);
        } else {
            b.compute(KernelClass::gemm, g.time_s, c.sync);
            b.overlapped(g, tp_op(c, KernelClass::allreduce), kTp, c.hw.overlap_compute_cost);
        }
    };
    elementwise(c.act(7 * M * h));  // bias + dropout + residual
    if (moe) {
        moe_block(c, b, true, c.tr.moe_a2a_overlap ? &deferred : nullptr);
    } else {
        row_parallel(c.f / t, h);
        elementwise(2 * M * (c.m.gated_mlp ? 3.0 : 2.0) * c.f / t);
        column_parallel(h, (c.m.gated_mlp ? 2.0 : 1.0) * c.f / t);
    }
    elementwise(c.act(4 * M * h));  // layer norm
    elementwise(c.act(7 * M * h));
    row_parallel(c.hv / t, h);
    attention_core(c, b, 2.0);
    if (c.m.is_mla()) {
        const MlaShapes s = mla_shapes(c);
        for (int i = 0; i < 2; ++i) {
            b.compute(KernelClass::gemm, gemm_rows(c, M, s.q_k, s.q_n).time_s, c.sync);
            b.compute(KernelClass::gemm, gemm_rows(c, M, s.kv_k, s.kv_n).time_s, c.sync);
        }
        column_parallel(h, s.down_n);
    } else {
        column_parallel(h, (c.hq + 2 * c.hk) / t);
    }
    elementwise(c.act(4 * M * h));
    settle_overlapped_a2a(c, b, deferred, compute_before);
}

// ---- FSDP ------------------------------------------------------------------------------------

PassBuilder fsdp_wrap(const Context& c, const PassBuilder& pass, double gather_s, double scatter_s,
                      bool prefetch) {
    PassBuilder out;
    double merged = 0;
    SegmentList comm_only;
    for (const auto& seg : pass.list) {
        const bool only = std::all_of(seg.ops.begin(), seg.ops.end(),
                                      [](const Op& op) { return is_communication(op.cls); });
        if (only) {
            comm_only.push_back(seg);
        } else {
            merged += deterministic_time({seg});
        }
    }
    const LinkLevel link = c.dp_link.level;
    const Op gather{KernelClass::allgather, gather_s, 1, link};
    const Op all{KernelClass::gemm, merged, c.sync, LinkLevel::local};
    const Op half{KernelClass::gemm, 0.5 * merged, c.sync, LinkLevel::local};
    const Op scatter{KernelClass::reducescatter, scatter_s, 1, link};
    if (gather_s <= 0) {
        // nothing to gather (ZeRO-2's per-microbatch reduction): the scatter beside the compute
        out.overlapped(all, scatter, kDp, c.hw.overlap_compute_cost);
    } else if (!prefetch) {
        // gathered on demand: exposed before the compute; the gradients' scatter still runs
        // on its own stream beside the rest of the backward
        out.comm(KernelClass::allgather, gather_s, link, kDp);
        if (scatter_s <= 0) {
            out.compute(KernelClass::gemm, merged, c.sync);
        } else {
            out.compute(KernelClass::gemm, half.time_s, c.sync);
            out.overlapped(half, scatter, kDp, c.hw.overlap_compute_cost);
        }
    } else if (scatter_s <= 0) {
        out.overlapped(all, gather, kDp, c.hw.overlap_compute_cost);
    } else {
        out.overlapped(half, gather, kDp, c.hw.overlap_compute_cost);
        out.overlapped(half, scatter, kDp, c.hw.overlap_compute_cost);
    }
    out.list.insert(out.list.end(), comm_only.begin(), comm_only.end());
    out.kernels = pass.kernels + (gather_s > 0 ? 1 : 0) + (scatter_s > 0 ? 1 : 0);
    out.compute_s = pass.compute_s;
    out.stretch_s = pass.stretch_s;
    out.exposed[kTp] = pass.exposed[kTp];
    out.exposed[kCp] = pass.exposed[kCp];
    out.exposed[kEp] = pass.exposed[kEp];
    out.exposed[kPp] = pass.exposed[kPp];
    out.moe = pass.moe;
    return out;
}

// ---- embedding and head ----------------------------------------------------------------------

// The output layer is Megatron's ColumnParallelLinear, outside TransformerEngine's FP8 layers:
// its logits GEMMs run in bf16 whatever the training precision.

EndPasses end_passes(const Context& c) {
    const double M = c.tokens;
    EndPasses e;
    const double emb_bytes = c.memory(c.act(4 * M * c.h + 7 * M * c.h));
    e.embedding_forward.compute(KernelClass::elementwise, emb_bytes, c.sync);
    e.embedding_backward.compute(KernelClass::elementwise, 2 * emb_bytes, c.sync);

    PassBuilder& hf = e.head_forward;
    const double vocab_t = double(c.m.vocab) / c.t;
    hf.compute(KernelClass::elementwise, c.memory(c.act(4 * M * c.h)), c.sync);  // final norm
    tp_gather(c, hf);
    hf.compute(KernelClass::gemm, c.gemm_bf16(2 * M * c.h * vocab_t, M, c.h, vocab_t), c.sync);
    hf.compute(KernelClass::elementwise, c.memory(10 * M * vocab_t), c.sync);  // fp32 loss
    if (c.p.tp > 1) {  // vocab-parallel cross entropy: max, sum and target logit over TP
        hf.comm(KernelClass::allreduce, 3 * c.coll(KernelClass::allreduce, 4 * M, c.tp_link),
                c.tp_link.level, kTp);
    }
    PassBuilder& hb = e.head_backward;
    hb.compute(KernelClass::elementwise, c.memory(6 * M * vocab_t), c.sync);
    for (int i = 0; i < 2; ++i) {
        hb.compute(KernelClass::gemm, c.gemm_bf16(2 * M * c.h * vocab_t, M, c.h, vocab_t), c.sync);
    }
    tp_reduce(c, hb);
    hb.compute(KernelClass::elementwise, 2 * c.memory(c.act(4 * M * c.h)), c.sync);
    return e;
}

}  // namespace prism::detail
