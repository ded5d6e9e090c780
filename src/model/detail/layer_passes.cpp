#include "src/model/detail/layer_passes.hpp"

#include <algorithm>

#include "src/model/collectives.hpp"
#include "src/model/detail/roofline.hpp"

namespace prism::detail {

// ---- PassBuilder ----------------------------------------------------------------------------

void PassBuilder::compute(KernelClass cls, double time_s, int sync) {
    list.push_back(Segment{{Op{cls, time_s, sync, LinkLevel::local}}});
    ++kernels;
    compute_s += time_s;
}

void PassBuilder::comm(KernelClass cls, double time_s, LinkLevel link, Category cat) {
    if (time_s <= 0) return;
    list.push_back(Segment{{Op{cls, time_s, 1, link}}});
    ++kernels;
    exposed[cat] += time_s;
}

void PassBuilder::overlapped(const Op& compute_op, const Op& comm_op, Category cat) {
    kernels += 2;
    compute_s += compute_op.time_s;
    exposed[cat] += std::max(0.0, comm_op.time_s - compute_op.time_s);
    list.push_back(Segment{{compute_op, comm_op}});
}

namespace {
Op scaled(Op op, double factor) {
    op.time_s *= factor;
    return op;
}
}  // namespace

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

void PassBuilder::pipelined_scatter(const Op& gemm, const Op& scatter, int k, Category cat) {
    if (k <= 1 || scatter.time_s <= 0) {
        compute(gemm.cls, gemm.time_s, gemm.sync_size);
        comm(scatter.cls, scatter.time_s, scatter.link, cat);
        return;
    }
    const double split = 1.0 / k;
    const Op body = scaled(gemm, 1.0 - split);
    const Op body_comm = scaled(scatter, 1.0 - split);
    list.push_back(Segment{{scaled(gemm, split)}});
    list.push_back(Segment{{body, body_comm}});
    list.push_back(Segment{{scaled(scatter, split)}});
    kernels += 2 * k;
    compute_s += gemm.time_s;
    exposed[cat] += std::max(0.0, body_comm.time_s - body.time_s) + split * scatter.time_s;
}

void PassBuilder::append(const PassBuilder& other) {
    list.insert(list.end(), other.list.begin(), other.list.end());
    kernels += other.kernels;
    compute_s += other.compute_s;
    stretch_s += other.stretch_s;
    for (int i = 0; i < kCategories; ++i) exposed[i] += other.exposed[i];
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
    : m(model), tr(training), hw(hardware), p(point) {}

double Context::gemm(double flops, double m_rows, double k, double n) const {
    const double bytes = 2.0 * (m_rows * k + k * n + m_rows * n);
    return roofline_time_s(hw.gpu, gemm_curve, peak_gemm, flops, bytes);
}

double Context::gemm_bf16(double flops, double m_rows, double k, double n) const {
    const double bytes = 2.0 * (m_rows * k + k * n + m_rows * n);
    return roofline_time_s(hw.gpu, hw.gpu.gemm, peak_bf16, flops, bytes);
}

double Context::memory(double bytes) const { return roofline_time_s(hw.gpu, 1, 0, bytes); }

double Context::coll(KernelClass cls, double bytes, const GroupLink& link) const {
    return collective_time_s(cls, bytes, link, hw.collective_efficiency);
}

// ---- one layer -------------------------------------------------------------------------------

namespace {

/// The sequence-parallel AllGather / ReduceScatter of one activation (2 b s h / c bytes).
Op tp_op(const Context& c, KernelClass cls) {
    return Op{cls, c.coll(cls, 2 * c.tokens * c.h, c.tp_link), 1, c.tp_link.level};
}

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

/// A column-parallel GEMM with its input gathered first (SP), or by a ring exchange (overlap).
void column_forward(const Context& c, PassBuilder& b, double k, double n) {
    const Op g = gemm_op(c, k, n);
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
    if (c.tp_overlap) {
        b.pipelined_scatter(g, tp_op(c, KernelClass::reducescatter), kPipelinedScatterSplits, kTp);
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
    double flops = 4.0 * c.tokens * seq * c.h / c.t;
    double bytes = 2.0 * c.tokens * (2 * c.h + 2 * c.hk) / c.t;  // Q, K, V, O
    double score_bytes = 0;
    if (c.tr.flash_attention) {
        flops *= 0.5;
    } else {
        bytes += 4.0 * heads * c.tokens * seq;       // scores written, probabilities read
        score_bytes = 9.0 * heads * c.tokens * seq;  // softmax r/w, dropout r/w + mask
    }
    // efficiency of one of the two batched GEMMs: the curve is per GEMM call; a fused kernel at
    // its own efficiency, whose backward recomputes the scores: 2.5 x the forward FLOPs
    // (Dao 2023, FlashAttention-2, section 3.1.2) instead of 2 x
    const double call = 0.5 * flops;
    const bool fused = c.tr.flash_attention && c.hw.gpu.attention_efficiency > 0;
    const double efficiency =
        fused ? c.hw.gpu.attention_efficiency : gemm_efficiency(c.hw.gpu.gemm, call);
    const double flop_scale = fused && scale > 1 ? 2.5 : scale;
    const double compute = flop_scale * flops / (c.peak_bf16 * efficiency);
    const double time =
        std::max(compute, scale * bytes / (c.hw.gpu.hbm_bytes_per_s * c.hw.gpu.hbm_efficiency));
    const Op att{KernelClass::attention, time, c.sync, LinkLevel::local};
    if (c.p.cp > 1) {
        const double kv = 2.0 * 2.0 * c.tokens * c.hk / c.t;  // one K and V chunk, bf16
        const double ring =
            scale * (c.p.cp - 1) *
            collective_time_s(KernelClass::p2p, kv, c.cp_link, c.hw.collective_efficiency);
        b.overlapped(att, Op{KernelClass::p2p, ring, 1, c.cp_link.level}, kCp);
    } else {
        b.compute(KernelClass::attention, time, c.sync);
    }
    if (score_bytes > 0) b.compute(KernelClass::elementwise, scale * c.memory(score_bytes), c.sync);
}

void layer_forward(const Context& c, PassBuilder& b) {
    const double M = c.tokens, h = c.h, t = c.t;
    auto elementwise = [&](double bytes) {
        b.compute(KernelClass::elementwise, c.memory(bytes), c.sync);
    };
    elementwise(c.act(4 * M * h));  // layer norm
    column_forward(c, b, h, (h + 2 * c.hk) / t);
    attention_core(c, b, 1.0);
    row_forward(c, b, h / t, h);
    elementwise(c.act(7 * M * h));  // bias + dropout + residual
    elementwise(c.act(4 * M * h));  // layer norm
    column_forward(c, b, h, (c.m.gated_mlp ? 2.0 : 1.0) * c.f / t);
    elementwise(2 * M * (c.m.gated_mlp ? 3.0 : 2.0) * c.f / t);  // activation (GeLU / SwiGLU)
    row_forward(c, b, c.f / t, h);
    elementwise(c.act(7 * M * h));
}

/// Each GEMM becomes a data-gradient and a weight-gradient GEMM of the same size; elementwise
/// kernels move twice the bytes. TP as in Megatron's LinearWithGradAccumulationAndAsync-
/// Communication: a column-parallel linear's input-gradient AllReduce (ReduceScatter with SP)
/// runs concurrently with its weight-gradient GEMM, and with SP the re-gather of its input
/// concurrently with the data-gradient GEMM (TransformerEngine's "bulk" overlaps do the same);
/// a row-parallel linear's output gradient is all-gathered (SP) before it, exposed, or with
/// --tp-comm-overlap by a ring exchange beside its data-gradient GEMM.
void layer_backward(const Context& c, PassBuilder& b) {
    const double M = c.tokens, h = c.h, t = c.t;
    auto elementwise = [&](double bytes) {
        b.compute(KernelClass::elementwise, 2 * c.memory(bytes), c.sync);
    };
    auto row_parallel = [&](double k, double n) {
        const Op g = gemm_op(c, k, n);
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
        if (c.p.tp <= 1) {
            b.compute(KernelClass::gemm, g.time_s, c.sync);
            b.compute(KernelClass::gemm, g.time_s, c.sync);
            return;
        }
        if (c.p.sequence_parallel) {
            b.overlapped(g, tp_op(c, KernelClass::allgather), kTp);
            b.overlapped(g, tp_op(c, KernelClass::reducescatter), kTp);
        } else {
            b.compute(KernelClass::gemm, g.time_s, c.sync);
            b.overlapped(g, tp_op(c, KernelClass::allreduce), kTp);
        }
    };
    elementwise(c.act(7 * M * h));  // bias + dropout + residual
    row_parallel(c.f / t, h);
    elementwise(2 * M * (c.m.gated_mlp ? 3.0 : 2.0) * c.f / t);
    column_parallel(h, (c.m.gated_mlp ? 2.0 : 1.0) * c.f / t);
    elementwise(c.act(4 * M * h));  // layer norm
    elementwise(c.act(7 * M * h));
    row_parallel(h / t, h);
    attention_core(c, b, 2.0);
    column_parallel(h, (h + 2 * c.hk) / t);
    elementwise(c.act(4 * M * h));
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
    if (!prefetch) {
        // gathered on demand: exposed before the compute; the gradients' scatter still runs
        // on its own stream beside the rest of the backward
        out.comm(KernelClass::allgather, gather_s, link, kDp);
        if (scatter_s <= 0) {
            out.compute(KernelClass::gemm, merged, c.sync);
        } else {
            out.compute(KernelClass::gemm, half.time_s, c.sync);
            out.overlapped(half, scatter, kDp);
        }
    } else if (scatter_s <= 0) {
        out.overlapped(all, gather, kDp);
    } else {
        out.overlapped(half, gather, kDp);
        out.overlapped(half, scatter, kDp);
    }
    out.list.insert(out.list.end(), comm_only.begin(), comm_only.end());
    out.kernels = pass.kernels + (scatter_s > 0 ? 2 : 1);
    out.compute_s = pass.compute_s;
    out.stretch_s = pass.stretch_s;
    out.exposed[kTp] = pass.exposed[kTp];
    out.exposed[kCp] = pass.exposed[kCp];
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
