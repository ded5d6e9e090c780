#include "src/model/deterministic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "src/common/error.hpp"
#include "src/model/collectives.hpp"
#include "src/model/detail/roofline.hpp"
#include "src/model/flops.hpp"
#include "src/model/topology.hpp"

namespace prism {

namespace {

enum Category { kTp = 0, kCp, kDp, kCategories };

/// Gradients are reduced over DP in the training precision (16-bit; Megatron-Core's default
/// grad_reduce_in_fp32 = false, and fp16 in the SC'21 runs), although accumulated in fp32.
constexpr double kGradReduceBytesPerParam = 2;

/// Builds one SegmentList, counting kernels and exposed communication per group.
struct PassBuilder {
    SegmentList list;
    int kernels = 0;
    double compute_s = 0;
    std::array<double, kCategories> exposed{};

    void compute(KernelClass cls, double time_s, int sync) {
        list.push_back(Segment{{Op{cls, time_s, sync, LinkLevel::local}}});
        ++kernels;
        compute_s += time_s;
    }
    void comm(KernelClass cls, double time_s, LinkLevel link, Category cat) {
        if (time_s <= 0) return;
        list.push_back(Segment{{Op{cls, time_s, 1, link}}});
        ++kernels;
        exposed[cat] += time_s;
    }
    /// A compute op with a collective on another stream; the collective's excess is exposed.
    void overlapped(Op compute_op, Op comm_op, Category cat) {
        kernels += 2;
        compute_s += compute_op.time_s;
        exposed[cat] += std::max(0.0, comm_op.time_s - compute_op.time_s);
        list.push_back(Segment{{compute_op, comm_op}});
    }
    void append(const PassBuilder& other) {
        list.insert(list.end(), other.list.begin(), other.list.end());
        kernels += other.kernels;
        compute_s += other.compute_s;
        for (int i = 0; i < kCategories; ++i) exposed[i] += other.exposed[i];
    }
    double time_s() const { return deterministic_time(list); }
    /// Host-bound floor: the pass cannot be shorter than issuing its kernels.
    double apply_launch_floor(double kernel_launch_s) {
        const double floor = kernels * kernel_launch_s;
        const double t = time_s();
        if (t <= 0 || floor <= t) return 0;
        const double scale = floor / t;
        for (auto& seg : list)
            for (auto& op : seg.ops) op.time_s *= scale;
        compute_s *= scale;
        for (auto& e : exposed) e *= scale;
        return floor - t;
    }
};

/// Everything the per-op formulas need, computed once per point.
struct Context {
    const ModelSpec& m;
    const TrainingSpec& tr;
    const HardwareSpec& hw;
    const DesignPoint& p;
    double peak_gemm = 0;
    double peak_bf16 = 0;
    double tokens = 0;  ///< b s / c: tokens of a microbatch on one CP rank
    double h = 0, hk = 0, f = 0, t = 1;
    int sync = 1;  ///< tp * cp
    GroupLink tp_link, cp_link, pp_link, dp_link;

    Context(const ModelSpec& model, const TrainingSpec& training, const HardwareSpec& hardware,
            const DesignPoint& point)
        : m(model), tr(training), hw(hardware), p(point) {}

    double gemm(double flops, double m_rows, double k, double n) const {
        const double bytes = 2.0 * (m_rows * k + k * n + m_rows * n);
        return detail::roofline_time_s(hw.gpu, peak_gemm, flops, bytes);
    }
    double memory(double bytes) const { return detail::roofline_time_s(hw.gpu, 1, 0, bytes); }
    double coll(KernelClass cls, double bytes, const GroupLink& link) const {
        return collective_time_s(cls, bytes, link, hw.collective_efficiency);
    }
    /// Activation bytes of elementwise kernels: replicated over TP unless sequence parallel.
    double act(double bytes) const { return p.sequence_parallel ? bytes / t : bytes; }
};

/// TP communication of one "f/g" point (Megatron): AllReduce, or with sequence parallelism
/// the ReduceScatter (after a row-parallel GEMM) / AllGather (before a column-parallel GEMM).
void tp_gather(const Context& c, PassBuilder& b) {
    if (c.p.tp <= 1 || !c.p.sequence_parallel) return;
    b.comm(KernelClass::allgather, c.coll(KernelClass::allgather, 2 * c.tokens * c.h, c.tp_link),
           c.tp_link.level, kTp);
}
void tp_reduce(const Context& c, PassBuilder& b) {
    if (c.p.tp <= 1) return;
    const double bytes = 2 * c.tokens * c.h;
    if (c.p.sequence_parallel) {
        b.comm(KernelClass::reducescatter, c.coll(KernelClass::reducescatter, bytes, c.tp_link),
               c.tp_link.level, kTp);
    } else {
        b.comm(KernelClass::allreduce, c.coll(KernelClass::allreduce, bytes, c.tp_link),
               c.tp_link.level, kTp);
    }
}

/// Attention core (scores, softmax, dropout, scores x V) of one pass; `scale` = 1 forward,
/// 2 backward. CP: the K/V ring exchange runs concurrently with the attention kernel.
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
    // efficiency of one of the two batched GEMMs: the curve is per GEMM call
    const double call = 0.5 * flops;
    const double compute = call / (c.peak_bf16 * detail::gemm_efficiency(c.hw.gpu.gemm, call));
    const double time =
        scale * std::max(2 * compute, bytes / (c.hw.gpu.hbm_bytes_per_s * c.hw.gpu.hbm_efficiency));
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

/// One layer's forward.
void layer_forward(const Context& c, PassBuilder& b) {
    const double M = c.tokens, h = c.h, t = c.t;
    auto gemm = [&](double k, double n) {
        b.compute(KernelClass::gemm, c.gemm(2.0 * M * k * n, M, k, n), c.sync);
    };
    auto elementwise = [&](double bytes) {
        b.compute(KernelClass::elementwise, c.memory(bytes), c.sync);
    };
    elementwise(c.act(4 * M * h));  // layer norm
    tp_gather(c, b);
    gemm(h, (h + 2 * c.hk) / t);
    attention_core(c, b, 1.0);
    gemm(h / t, h);
    tp_reduce(c, b);
    elementwise(c.act(7 * M * h));  // bias + dropout + residual
    elementwise(c.act(4 * M * h));  // layer norm
    tp_gather(c, b);
    gemm(h, (c.m.gated_mlp ? 2.0 : 1.0) * c.f / t);
    elementwise(2 * M * (c.m.gated_mlp ? 3.0 : 2.0) * c.f / t);  // activation (GeLU / SwiGLU)
    gemm(c.f / t, h);
    tp_reduce(c, b);
    elementwise(c.act(7 * M * h));
}

/// One layer's backward (without recompute): each GEMM becomes a data-gradient and a
/// weight-gradient GEMM of the same size; elementwise kernels move twice the bytes. TP as in
/// Megatron's LinearWithGradAccumulationAndAsyncCommunication: a column-parallel linear's
/// input-gradient AllReduce (ReduceScatter with SP) runs concurrently with its weight-gradient
/// GEMM, and with SP the re-gather of its input concurrently with the data-gradient GEMM; a
/// row-parallel linear's output gradient is all-gathered (SP) before it, exposed.
void layer_backward(const Context& c, PassBuilder& b) {
    const double M = c.tokens, h = c.h, t = c.t;
    auto elementwise = [&](double bytes) {
        b.compute(KernelClass::elementwise, 2 * c.memory(bytes), c.sync);
    };
    auto row_parallel = [&](double k, double n) {
        tp_gather(c, b);
        const double one = c.gemm(2.0 * M * k * n, M, k, n);
        b.compute(KernelClass::gemm, one, c.sync);
        b.compute(KernelClass::gemm, one, c.sync);
    };
    auto column_parallel = [&](double k, double n) {
        const double one = c.gemm(2.0 * M * k * n, M, k, n);
        const Op gemm{KernelClass::gemm, one, c.sync, LinkLevel::local};
        if (c.p.tp <= 1) {
            b.compute(KernelClass::gemm, one, c.sync);
            b.compute(KernelClass::gemm, one, c.sync);
            return;
        }
        const double bytes = 2 * M * h;
        if (c.p.sequence_parallel) {
            b.overlapped(gemm,
                         Op{KernelClass::allgather,
                            c.coll(KernelClass::allgather, bytes, c.tp_link), 1, c.tp_link.level},
                         kTp);
            b.overlapped(
                gemm,
                Op{KernelClass::reducescatter, c.coll(KernelClass::reducescatter, bytes, c.tp_link),
                   1, c.tp_link.level},
                kTp);
        } else {
            b.compute(KernelClass::gemm, one, c.sync);
            b.overlapped(gemm,
                         Op{KernelClass::allreduce,
                            c.coll(KernelClass::allreduce, bytes, c.tp_link), 1, c.tp_link.level},
                         kTp);
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

/// ZeRO-3 / FSDP: the pass's compute (segments holding any compute op, with whatever TP/CP
/// collective runs beside it) merges into one op that runs concurrently with the DP collectives:
/// the forward with the prefetched AllGather of the weights; the backward as two halves, the
/// first beside the weights' AllGather, the second beside the ReduceScatter of the gradients
/// (sequential on the same ring). Communication-only segments keep their own segments.
PassBuilder fsdp_wrap(const Context& c, const PassBuilder& pass, double gather_s,
                      double scatter_s) {
    PassBuilder out;
    double merged = 0;
    SegmentList exposed;
    for (const auto& seg : pass.list) {
        const bool comm_only = std::all_of(seg.ops.begin(), seg.ops.end(),
                                           [](const Op& op) { return is_communication(op.cls); });
        if (comm_only) {
            exposed.push_back(seg);
        } else {
            merged += deterministic_time({seg});
        }
    }
    const LinkLevel link = c.dp_link.level;
    const Op gather{KernelClass::allgather, gather_s, 1, link};
    if (scatter_s <= 0) {
        out.overlapped(Op{KernelClass::gemm, merged, c.sync, LinkLevel::local}, gather, kDp);
    } else {
        const Op half{KernelClass::gemm, 0.5 * merged, c.sync, LinkLevel::local};
        out.overlapped(half, gather, kDp);
        out.overlapped(half, Op{KernelClass::reducescatter, scatter_s, 1, link}, kDp);
    }
    out.list.insert(out.list.end(), exposed.begin(), exposed.end());
    out.kernels = pass.kernels + (scatter_s > 0 ? 2 : 1);
    out.compute_s = pass.compute_s;
    out.exposed[kTp] = pass.exposed[kTp];
    out.exposed[kCp] = pass.exposed[kCp];
    return out;
}

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024)); }

}  // namespace

DeterministicResult evaluate_deterministic(const Experiment& e, const DesignPoint& p) {
    if (p.hardware < 0 || p.hardware >= int(e.hardware.size())) {
        throw ModelError(fmt::format("hardware index {} out of range ({} defined)", p.hardware,
                                     e.hardware.size()));
    }
    const ModelSpec& m = e.model;
    const HardwareSpec& hw = e.hardware[p.hardware];
    if (m.layers <= 0 || m.hidden <= 0 || m.heads <= 0 || m.seq <= 0 || m.vocab <= 0 ||
        m.ffn <= 0) {
        throw ModelError("model: layers, hidden, heads, ffn, vocab and seq must be positive");
    }
    if (hw.gpu.peak_bf16_flop_per_s <= 0 || hw.gpu.hbm_bytes_per_s <= 0) {
        throw ModelError(
            fmt::format("hardware {}: peak flop/s and hbm bandwidth must be positive", hw.name));
    }
    const std::int64_t batch =
        p.global_batch_seqs > 0 ? p.global_batch_seqs : e.training.global_batch_seqs;
    const std::int64_t per_replica = std::int64_t{p.dp} * p.microbatch;
    if (batch <= 0 || per_replica <= 0 || batch % per_replica != 0) {
        throw ModelError(fmt::format("global batch {} is not a multiple of dp * microbatch = {}",
                                     batch, per_replica));
    }
    const int microbatches = int(batch / per_replica);
    const int chunks = std::max(1, p.interleave);
    if (m.layers % (p.pp * chunks) != 0) {
        throw ModelError(fmt::format("layers {} not divisible by pp * interleave = {}", m.layers,
                                     p.pp * chunks));
    }

    Context c(m, e.training, hw, p);
    c.peak_bf16 = hw.gpu.peak_bf16_flop_per_s;
    c.peak_gemm = e.training.precision == Precision::fp8 && hw.gpu.peak_fp8_flop_per_s > 0
                      ? hw.gpu.peak_fp8_flop_per_s
                      : c.peak_bf16;
    c.tokens = double(p.microbatch) * m.seq / p.cp;
    c.h = m.hidden;
    c.hk = double(m.hidden) * (m.kv_heads > 0 ? m.kv_heads : m.heads) / m.heads;
    c.f = m.ffn;
    c.t = p.tp;
    c.sync = p.tp * p.cp;
    c.tp_link = group_link(hw, e.cluster, p, ParallelDim::tp);
    c.cp_link = group_link(hw, e.cluster, p, ParallelDim::cp);
    c.pp_link = group_link(hw, e.cluster, p, ParallelDim::pp);
    c.dp_link = group_link(hw, e.cluster, p, ParallelDim::dp);

    // ---- one layer ------------------------------------------------------------------------
    PassBuilder fwd;
    layer_forward(c, fwd);
    PassBuilder bwd;
    if (p.recompute == Recompute::full) {
        layer_forward(c, bwd);
    } else if (p.recompute == Recompute::selective) {
        attention_core(c, bwd, 1.0);
    }
    layer_backward(c, bwd);
    const double launch_fwd = fwd.apply_launch_floor(hw.kernel_launch_s);
    const double launch_bwd = bwd.apply_launch_floor(hw.kernel_launch_s);
    if (p.zero_stage >= 3 && p.dp > 1) {
        const double weights = kWeightBytesPerParam * layer_params(m) / c.t;
        const double gather = c.coll(KernelClass::allgather, weights, c.dp_link);
        const double scatter = c.coll(KernelClass::reducescatter,
                                      kGradReduceBytesPerParam * layer_params(m) / c.t, c.dp_link);
        fwd = fsdp_wrap(c, fwd, gather, 0);
        bwd = fsdp_wrap(c, bwd, gather, scatter);
    }

    // ---- embedding and head ---------------------------------------------------------------
    const double M = c.tokens;
    PassBuilder emb_f, emb_b, head_f, head_b;
    emb_f.compute(KernelClass::elementwise, c.memory(c.act(4 * M * c.h + 7 * M * c.h)), c.sync);
    emb_b.compute(KernelClass::elementwise, 2 * c.memory(c.act(4 * M * c.h + 7 * M * c.h)), c.sync);
    const double vocab_t = double(m.vocab) / c.t;
    head_f.compute(KernelClass::elementwise, c.memory(c.act(4 * M * c.h)), c.sync);
    tp_gather(c, head_f);
    head_f.compute(KernelClass::gemm, c.gemm(2 * M * c.h * vocab_t, M, c.h, vocab_t), c.sync);
    head_f.compute(KernelClass::elementwise, c.memory(10 * M * vocab_t), c.sync);  // fp32 loss
    if (p.tp > 1) {  // vocab-parallel cross entropy: max, sum and target logit over TP
        head_f.comm(KernelClass::allreduce, 3 * c.coll(KernelClass::allreduce, 4 * M, c.tp_link),
                    c.tp_link.level, kTp);
    }
    head_b.compute(KernelClass::elementwise, c.memory(6 * M * vocab_t), c.sync);
    for (int i = 0; i < 2; ++i) {
        head_b.compute(KernelClass::gemm, c.gemm(2 * M * c.h * vocab_t, M, c.h, vocab_t), c.sync);
    }
    tp_reduce(c, head_b);
    head_b.compute(KernelClass::elementwise, 2 * c.memory(c.act(4 * M * c.h)), c.sync);

    // ---- profile ----------------------------------------------------------------------------
    DeterministicResult r;
    StepProfile& prof = r.profile;
    prof.stages = p.pp;
    prof.chunks = chunks;
    prof.microbatches = microbatches;
    prof.layers_per_chunk = m.layers / (p.pp * chunks);
    prof.dp = p.dp;
    prof.tp = p.tp;
    prof.cp = p.cp;
    prof.dp_lockstep = p.zero_stage >= 3 && p.dp > 1;
    const double layer_forward_s = fwd.time_s();
    const double layer_backward_s = bwd.time_s();
    prof.layer_forward = std::move(fwd.list);
    prof.layer_backward = std::move(bwd.list);
    prof.embedding_forward = std::move(emb_f.list);
    prof.embedding_backward = std::move(emb_b.list);
    prof.head_forward = std::move(head_f.list);
    prof.head_backward = std::move(head_b.list);
    if (p.pp > 1 || chunks > 1) {
        const double act = 2.0 * M * c.h / c.t;  // scatter-gather / sequence-parallel shard
        prof.p2p =
            Op{KernelClass::p2p, c.coll(KernelClass::p2p, act, c.pp_link), 1, c.pp_link.level};
    }

    // gradient synchronization over DP (and the tied embedding between first and last stage)
    const double stage_params =
        (double(m.layers) / p.pp * layer_params(m) + embedding_params(m)) / c.t;
    PassBuilder sync;
    if (p.dp > 1 && p.zero_stage == 0) {
        sync.comm(
            KernelClass::allreduce,
            c.coll(KernelClass::allreduce, kGradReduceBytesPerParam * stage_params, c.dp_link),
            c.dp_link.level, kDp);
    } else if (p.dp > 1 && p.zero_stage <= 2) {
        sync.comm(
            KernelClass::reducescatter,
            c.coll(KernelClass::reducescatter, kGradReduceBytesPerParam * stage_params, c.dp_link),
            c.dp_link.level, kDp);
        sync.comm(KernelClass::allgather,
                  c.coll(KernelClass::allgather, kWeightBytesPerParam * stage_params, c.dp_link),
                  c.dp_link.level, kDp);
    }
    if (p.pp > 1) {
        const GroupLink ends =
            group_link(hw, e.cluster, 2, dim_stride(p, ParallelDim::pp) * (p.pp - 1));
        sync.comm(KernelClass::allreduce,
                  c.coll(KernelClass::allreduce,
                         kGradReduceBytesPerParam * embedding_params(m) / c.t, ends),
                  ends.level, kDp);
    }
    prof.dp_sync = sync.list;
    const double sync_s = sync.time_s();
    const double stage_backward_s = prof.layers_per_chunk * chunks * layer_backward_s;
    prof.dp_overlap_s = e.training.overlap_grad_reduce ? std::min(sync_s, stage_backward_s) : 0;

    // Adam: read grad, master, m, v (fp32), write master, m, v and the bf16 weights
    const double opt_params = stage_params / (p.zero_stage >= 1 ? p.dp : 1);
    prof.optimizer = {Segment{
        {Op{KernelClass::optimizer, c.memory(30.0 * opt_params), c.sync, LinkLevel::local}}}};

    r.step_time_s = deterministic_step_time(prof);
    r.megatron_flops_per_step = megatron_flops_per_step(m, batch);
    r.model_flops_per_step = model_flops_per_step(m, batch);
    r.tokens_per_step = double(batch) * m.seq;
    r.memory = memory_per_gpu(m, e.training, p, microbatches);

    // ---- breakdown (stage 0) ----------------------------------------------------------------
    Breakdown& bd = r.breakdown;
    const double layers_stage = double(m.layers) / p.pp;
    const double passes = layers_stage * microbatches;
    bd.layer_forward_s = layer_forward_s;
    bd.layer_backward_s = layer_backward_s;
    bd.compute_s = passes * (fwd.compute_s + bwd.compute_s) +
                   microbatches * (emb_f.compute_s + emb_b.compute_s);
    bd.tp_comm_exposed_s = passes * (fwd.exposed[kTp] + bwd.exposed[kTp]);
    bd.cp_comm_exposed_s = passes * (fwd.exposed[kCp] + bwd.exposed[kCp]);
    bd.pp_comm_s = p.pp > 1 ? 2.0 * microbatches * chunks * prof.p2p.time_s : 0;
    bd.dp_comm_exposed_s =
        std::max(0.0, sync_s - prof.dp_overlap_s) + passes * (fwd.exposed[kDp] + bwd.exposed[kDp]);
    bd.optimizer_s = deterministic_time(prof.optimizer);
    bd.host_bound_s = passes * (launch_fwd + launch_bwd);
    double busy = 0;
    for (int k = 0; k < chunks; ++k)
        busy += prof.chunk_forward_s(0, k) + prof.chunk_backward_s(0, k);
    busy *= microbatches;
    const double pipeline =
        r.step_time_s - std::max(0.0, sync_s - prof.dp_overlap_s) - bd.optimizer_s;
    bd.bubble_s = std::max(0.0, pipeline - busy);
    bd.memory = r.memory;

    const double capacity = hw.gpu.hbm_bytes * e.constraints.max_memory_fraction;
    if (hw.gpu.hbm_bytes > 0 && r.memory.total_bytes() > capacity) {
        r.feasible = false;
        r.reason =
            fmt::format("memory {} > {} capacity", gib(r.memory.total_bytes()), gib(capacity));
    }
    return r;
}

std::string format_breakdown(const DeterministicResult& r) {
    const Breakdown& b = r.breakdown;
    std::string out;
    auto row = [&](const char* name, double value, const char* unit) {
        out += fmt::format("  {:<28}{:>12.3f} {}\n", name, value, unit);
    };
    constexpr double ms = 1e3;
    constexpr double gib_d = 1024.0 * 1024 * 1024;
    out += fmt::format("  {:<28}{:>12.3f} {}\n", "step time", r.step_time_s * ms, "ms");
    row("layer forward (1 microbatch)", b.layer_forward_s * ms, "ms");
    row("layer backward", b.layer_backward_s * ms, "ms");
    row("compute (stage 0)", b.compute_s * ms, "ms");
    row("TP comm exposed", b.tp_comm_exposed_s * ms, "ms");
    row("CP comm exposed", b.cp_comm_exposed_s * ms, "ms");
    row("PP p2p", b.pp_comm_s * ms, "ms");
    row("DP comm exposed", b.dp_comm_exposed_s * ms, "ms");
    row("pipeline bubble", b.bubble_s * ms, "ms");
    row("optimizer", b.optimizer_s * ms, "ms");
    row("host-bound stretch", b.host_bound_s * ms, "ms");
    row("memory: weights", b.memory.weights_bytes / gib_d, "GiB");
    row("memory: gradients", b.memory.grads_bytes / gib_d, "GiB");
    row("memory: optimizer", b.memory.optimizer_bytes / gib_d, "GiB");
    row("memory: activations", b.memory.activations_bytes / gib_d, "GiB");
    row("memory: temporary", b.memory.temporary_bytes / gib_d, "GiB");
    row("memory: total", b.memory.total_bytes() / gib_d, "GiB");
    if (!r.feasible) out += "  infeasible: " + r.reason + "\n";
    return out;
}

}  // namespace prism
