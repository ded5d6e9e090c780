#include "src/model/deterministic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "src/common/error.hpp"
#include "src/model/detail/layer_passes.hpp"
#include "src/model/flops.hpp"
#include "src/model/memory.hpp"
#include "src/model/pipeline_split.hpp"
#include "src/model/topology.hpp"
#include "src/stochastic/documents.hpp"
#include "src/stochastic/routing.hpp"

namespace prism {

namespace {

using detail::Context;
using detail::EndPasses;
using detail::kCp;
using detail::kDp;
using detail::kTp;
using detail::PassBuilder;

/// The point's shape, checked: batch split, microbatches, chunks and the layers of each stage.
struct Shape {
    std::int64_t batch = 0;
    int microbatches = 0;
    int chunks = 1;
    std::vector<int> chunk_layers;  ///< p v entries (pipeline_split.hpp)
    std::vector<int> stage_layers;  ///< p entries: the chunks' layers summed per stage
};

Shape check_point(const Experiment& e, const DesignPoint& p) {
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
    if (p.recompute == Recompute::selective && e.training.torchtitan_op_sac() &&
        (m.is_moe() || m.is_mla() || !e.training.flash_attention)) {
        // the loader reports it with its place in the file (docs/torchtitan_sac.md)
        throw ModelError(
            "selective_recompute = \"torchtitan-op\" is modelled for dense models with "
            "standard fused attention");
    }
    if (hw.gpu.peak_bf16_flop_per_s <= 0 || hw.gpu.hbm_bytes_per_s <= 0) {
        throw ModelError(
            fmt::format("hardware {}: peak flop/s and hbm bandwidth must be positive", hw.name));
    }
    Shape s;
    s.batch = p.global_batch_seqs > 0 ? p.global_batch_seqs : e.training.global_batch_seqs;
    const std::int64_t per_replica = std::int64_t{p.dp} * p.microbatch;
    if (s.batch <= 0 || per_replica <= 0 || s.batch % per_replica != 0) {
        throw ModelError(fmt::format("global batch {} is not a multiple of dp * microbatch = {}",
                                     s.batch, per_replica));
    }
    s.microbatches = int(s.batch / per_replica);
    s.chunks = std::max(1, p.interleave);
    s.chunk_layers = chunk_layers(m, e.training, p.pp, s.chunks);
    s.stage_layers.assign(std::size_t(p.pp), 0);
    for (std::size_t i = 0; i < s.chunk_layers.size(); ++i) {
        s.stage_layers[i / std::size_t(s.chunks)] += s.chunk_layers[i];
    }
    return s;
}

/// The routing law of one MoE layer for one microbatch (routing.hpp): the N = T k ep token
/// copies an EP group routes per microbatch over the experts with the [variability] routing
/// popularity (skew in the experiment seed's order, drift), capped by the capacity factor.
/// Inactive with moe_force_balance, a dense model or ep = 1.
stochastic::RoutingLoad routing_load(const Experiment& e, const DesignPoint& p) {
    const ModelSpec& m = e.model;
    stochastic::RoutingLoad r;
    if (!m.is_moe() || e.training.moe_force_balance || p.ep <= 1) return r;
    r.copies = double(p.microbatch) * m.seq / (double(p.cp) * p.tp) * m.top_k * p.ep;
    r.popularity = stochastic::skewed_popularity(m.experts, e.variability.routing_skew, e.seed);
    r.ep = p.ep;
    r.drift = e.variability.routing_drift;
    r.capacity = e.training.moe_capacity_factor;
    r.seed = e.seed;
    return r;
}

/// The busiest EP rank's load factor the deterministic model times the routed ops at: the
/// capacity factor with forced balance (buffers padded to it; 1 dropless), else the law's
/// E[min(Z, capacity)].
double busiest_rank_factor(const Experiment& e, const DesignPoint& p) {
    const stochastic::RoutingLoad r = routing_load(e, p);
    if (!r.active()) {
        return e.training.moe_capacity_factor > 0 ? e.training.moe_capacity_factor : 1.0;
    }
    return stochastic::load_factor_moments(r).mean;
}

/// The document packing of the point ([variability.documents]; inactive when unset).
stochastic::DocumentPacking document_packing(const Experiment& e) {
    const DocumentLengths& d = e.variability.documents;
    stochastic::DocumentPacking out;
    if (!d.active()) return out;
    out.median_tokens = d.median_tokens;
    out.sigma = d.sigma;
    out.seq = e.model.seq;
    return out;
}

Context make_context(const Experiment& e, const DesignPoint& p) {
    const HardwareSpec& hw = e.hardware[p.hardware];
    const ModelSpec& m = e.model;
    Context c(m, e.training, hw, p);
    c.peak_bf16 = hw.gpu.peak_bf16_flop_per_s;
    c.peak_gemm = c.peak_bf16;
    c.gemm_curve = hw.gpu.gemm;
    if (e.training.precision == Precision::fp8 && hw.gpu.peak_fp8_flop_per_s > 0) {
        // the same kernel shapes at the fp8 rate: F_half scales with the peak
        c.peak_gemm = hw.gpu.peak_fp8_flop_per_s;
        c.gemm_curve.half_flops *= c.peak_gemm / c.peak_bf16;
        if (hw.gpu.fp8_gemm_max_efficiency > 0) {
            c.gemm_curve.max_efficiency = hw.gpu.fp8_gemm_max_efficiency;
        }
    }
    c.tokens = double(p.microbatch) * m.seq / p.cp;
    c.h = m.hidden;
    if (m.is_mla()) {
        c.hq = double(m.heads) * (m.qk_nope_head_dim + m.qk_rope_head_dim);
        c.hv = double(m.heads) * m.v_head_dim;
        c.hk = 0.5 * (c.hq + c.hv);  // K as wide as Q, V of d_v per head
    } else {
        c.hq = c.hv = m.q_width();
        c.hk = m.kv_width();
    }
    c.f = m.ffn;
    c.moe_tokens = c.tokens / p.tp;  // the MoE block runs on the sequence-parallel shard
    c.ep = p.ep;
    c.etp = p.etp;
    c.ep_group = expert_group(hw, e.cluster, p, p.ep, p.etp, false);
    c.ep_ring = expert_group(hw, e.cluster, p, p.ep, p.etp, true).link;
    c.etp_group = expert_group(hw, e.cluster, p, p.etp, 1, true);
    c.busiest_rank = busiest_rank_factor(e, p);
    const stochastic::DocumentPacking docs = document_packing(e);
    if (docs.active()) {
        c.documents = true;
        c.documents_factor =
            stochastic::packed_square_moments(docs).mean / (double(m.seq) * double(m.seq));
    }
    c.t = p.tp;
    c.sync = p.tp * p.cp;
    c.tp_overlap = e.training.tp_comm_overlap && p.tp > 1 && p.sequence_parallel;
    c.tp_link = group_link(hw, e.cluster, p, ParallelDim::tp);
    c.cp_link = group_link(hw, e.cluster, p, ParallelDim::cp);
    c.pp_link = group_link(hw, e.cluster, p, ParallelDim::pp);
    c.dp_link = group_link(hw, e.cluster, p, ParallelDim::dp, ParallelDim::cp);
    return c;
}

/// One layer's forward and backward (with recompute), launch floor and FSDP applied.
struct LayerPasses {
    PassBuilder forward, backward;
    /// An MoE model with dense layers (DeepSeek-V3's first 3): `forward` / `backward` are the
    /// MoE layers' passes and these the dense layers', each placed in the chunks that hold it
    /// (StepProfile::dense_chunk_layers); `dense_share` = dense layers / layers. Otherwise
    /// unused (share 0).
    PassBuilder dense_forward, dense_backward;
    double dense_share = 0;
    /// The mean layer's forward / backward time over the model's layers.
    double mean_forward_s() const {
        return (1 - dense_share) * forward.time_s() + dense_share * dense_forward.time_s();
    }
    double mean_backward_s() const {
        return (1 - dense_share) * backward.time_s() + dense_share * dense_backward.time_s();
    }
};

/// The passes of one layer of one kind (dense or MoE), launch floor applied.
LayerPasses build_kind_passes(const Context& c, bool moe) {
    LayerPasses l;
    detail::layer_forward(c, l.forward, moe);
    if (c.p.recompute == Recompute::full) {
        detail::layer_forward(c, l.backward, moe);
    } else if (c.p.recompute == Recompute::selective) {
        detail::layer_recompute(c, l.backward, moe);
    }
    detail::layer_backward(c, l.backward, moe);
    l.forward.apply_launch_floor(c.hw.kernel_launch_s);
    l.backward.apply_launch_floor(c.hw.kernel_launch_s);
    return l;
}

/// FSDP's collectives beside the layers (detail::fsdp_wrap) hide each layer's gather beside its
/// own compute, as the next layer's prefetch hides beside this one's: the first gather of a
/// chunk's forward has no compute before it (the embedding's is short), the last scatter of its
/// backward none after it. One of each per chunk pass is exposed: a layer's `time_s` on `link`,
/// spread over the chunk's `chunk_layers` layers as a comm op of each layer pass.
void expose_chunk_end(PassBuilder& b, KernelClass cls, double time_s, LinkLevel link,
                      double chunk_layers) {
    if (b.list.empty() || time_s <= 0 || chunk_layers <= 0) return;
    b.comm(cls, time_s / chunk_layers, link, kDp);
}

/// One layer's passes of each kind. An MoE model's dense and MoE layers differ: the profile
/// holds both kinds' passes and places each dense layer in the chunk that holds it (Megatron
/// places the layers in model order: DeepSeek-V3's 3 leading dense layers on the first virtual
/// stage; docs/moe.md). ZeRO-3: each layer gathers and scatters beside its compute, a chunk's
/// first gather (with prefetch; without, every gather is exposed already) and last scatter
/// exposed (expose_chunk_end, `chunk_layers` the chunk's layers).
LayerPasses build_layer_passes(const Context& c, double chunk_layers) {
    LayerPasses l;
    const int moe_layers = c.m.moe_layers();
    if (moe_layers == 0) {
        l = build_kind_passes(c, false);
    } else if (moe_layers == c.m.layers) {
        l = build_kind_passes(c, true);
    } else {
        l = build_kind_passes(c, true);
        const LayerPasses dense = build_kind_passes(c, false);
        l.dense_forward = dense.forward;
        l.dense_backward = dense.backward;
        l.dense_share = 1.0 - double(moe_layers) / c.m.layers;
    }
    if (c.zero >= 3 && c.dp_link.size > 1) {
        const double params = layer_params(c.m) / c.t;
        const double gather =
            c.coll(KernelClass::allgather, weight_bytes(c.m, c.tr, 1, 0) / c.t, c.dp_link);
        const double scatter =
            c.coll(KernelClass::reducescatter, grad_bytes_per_param(c.tr) * params, c.dp_link);
        const bool prefetch = c.tr.fsdp_prefetch;
        l.forward = detail::fsdp_wrap(c, l.forward, gather, 0, prefetch);
        l.backward = detail::fsdp_wrap(c, l.backward, gather, scatter, prefetch);
        if (l.dense_share > 0) {
            l.dense_forward = detail::fsdp_wrap(c, l.dense_forward, gather, 0, prefetch);
            l.dense_backward = detail::fsdp_wrap(c, l.dense_backward, gather, scatter, prefetch);
        }
        const LinkLevel link = c.dp_link.level;
        for (PassBuilder* b : {&l.forward, &l.dense_forward}) {
            expose_chunk_end(*b, KernelClass::allgather, prefetch ? gather : 0, link, chunk_layers);
        }
        for (PassBuilder* b : {&l.backward, &l.dense_backward}) {
            expose_chunk_end(*b, KernelClass::reducescatter, scatter, link, chunk_layers);
        }
    }
    return l;
}

/// ZeRO-3 / FSDP's word embedding and output layer (TrainingSpec::fsdp_ends), their tables (over
/// TP) over the d c ranks. The embedding's gather is a microbatch's first collective and its
/// gradients' scatter the last, with no compute to hide beside: both exposed, every microbatch
/// (`kept`: the gather once a step, a microbatch's share of it). The output layer's: with
/// `root` and `kept` the root's, gathered and scattered with the embedding's, exposed; as a unit
/// of its own (`units`) its gather is prefetched beside the compute before it (fsdp_wrap: its
/// own pass's, as a layer's) and its scatter runs beside the backward after it (not resharded
/// after the forward: no gather in the backward). A tied output layer on the embedding's stage
/// uses the embedding's table: nothing more. Nothing without ZeRO-3's per-microbatch sharding
/// (FSDP2 under PP with fsdp_pp_unsharded: the step's DP sync carries the tables).
void add_fsdp_end_tables(const Context& c, const Shape& s, EndPasses& ends) {
    if (c.zero < 3 || c.dp_link.size <= 1) return;
    using Ends = TrainingSpec::FsdpEnds;
    const double table = embedding_params(c.m) / c.t;
    const double share = c.tr.fsdp_ends == Ends::kept ? 1.0 / s.microbatches : 1.0;
    const double gather =
        c.coll(KernelClass::allgather, weight_bytes(c.m, c.tr, 0, 1) / c.t, c.dp_link);
    const double scatter =
        c.coll(KernelClass::reducescatter, grad_bytes_per_param(c.tr) * table, c.dp_link);
    const LinkLevel link = c.dp_link.level;
    ends.embedding_forward.comm(KernelClass::allgather, share * gather, link, kDp);
    ends.embedding_backward.comm(KernelClass::reducescatter, scatter, link, kDp);
    if (c.p.pp == 1 && c.m.tied_embeddings) return;
    if (c.tr.fsdp_ends == Ends::units) {
        ends.head_forward = detail::fsdp_wrap(c, ends.head_forward, gather, 0, c.tr.fsdp_prefetch);
        ends.head_backward = detail::fsdp_wrap(c, ends.head_backward, 0, scatter, true);
    } else {
        ends.head_forward.comm(KernelClass::allgather, share * gather, link, kDp);
        ends.head_backward.comm(KernelClass::reducescatter, scatter, link, kDp);
    }
}

/// DeepSpeed's pipeline transfers on the compute stream (TrainingSpec::blocking_p2p): a chunk's
/// forward receives its input (detail::stage_transfer: the activation split over the TP ranks),
/// gathers it over TP and sends its output the same way; its backward does the same with the
/// gradient. The transfers and gathers are spread over the chunk's layers (`chunk_layers`, the
/// busiest stage's), serial with their compute: every stage's busy time grows by them, as the
/// blocking sends make it. The profile's p2p lag is then 0 (assemble_profile): the transfers
/// are in the passes.
///
/// How many a pass takes (blocking_p2p_per_pass): a middle stage receives, gathers and sends in
/// each pass; an end stage only sends (the first stage's forward, the last's backward) or only
/// receives and gathers (the other pass). With two stages both are end stages, and a microbatch
/// costs each two transfers and one gather, half a middle stage's: the passes carry half. With
/// three or more the passes carry a middle stage's (the end stages are charged one transfer too
/// many per pass: they hold the embedding and the output layer, which the passes do not know).
double blocking_p2p_per_pass(int pp) { return pp == 2 ? 0.5 : 1.0; }

void add_blocking_p2p(const Context& c, const Shape& s, double chunk_layers, LayerPasses& l) {
    if (!c.tr.blocking_p2p || (c.p.pp <= 1 && s.chunks <= 1) || chunk_layers <= 0) return;
    const Op transfer = detail::stage_transfer(c);
    // with sequence parallelism the activation is already split: nothing to gather
    const Op gather = c.p.tp > 1 && !c.p.sequence_parallel
                          ? detail::tp_op(c, KernelClass::allgather)
                          : Op{KernelClass::allgather, 0, 1, c.tp_link.level};
    const double share = blocking_p2p_per_pass(c.p.pp) / chunk_layers;
    for (PassBuilder* b : {&l.forward, &l.backward, &l.dense_forward, &l.dense_backward}) {
        if (b->list.empty()) continue;
        b->comm(transfer.cls, 2 * transfer.time_s * share, transfer.link, detail::kPp);
        b->comm(gather.cls, gather.time_s * share, gather.link, detail::kPp);
    }
}

/// The parameters of one layer of each pass kind of build_layer_passes: `forward` / `backward`
/// an MoE layer's wherever the model has MoE layers (its routed experts apart), `dense_forward` /
/// `dense_backward` a dense layer's beside them. Not divided over TP / EP.
struct KindParams {
    double dense = 0;   ///< attention, norms, router, shared experts, a dense MLP: over TP
    double routed = 0;  ///< an MoE layer's routed experts: over EP x ETP
};
KindParams layer_kind_params(const ModelSpec& m) {
    const int moe = m.moe_layers();
    if (moe == 0) return {dense_layer_params(m), 0};
    const double routed = layer_expert_params(m) * m.layers / moe;
    return {moe_layer_params(m) - routed, routed};
}

/// Calls f(pass, params, layer) on each forward (or backward) pass that holds parameters of its
/// own, with them: a layer of each kind (layer_kind_params; `layer` true), the embedding with the
/// word embedding, and the output layer with its own where it is a tensor of its own (untied, or
/// on another stage). What a per-microbatch term over the stage's parameters walks.
template <class F>
void for_each_parameter_pass(const Context& c, LayerPasses& l, EndPasses& ends, bool forward, F f) {
    f(forward ? l.forward : l.backward, layer_kind_params(c.m), true);
    f(forward ? l.dense_forward : l.dense_backward, KindParams{dense_layer_params(c.m), 0}, true);
    const KindParams table{embedding_params(c.m), 0};
    f(forward ? ends.embedding_forward : ends.embedding_backward, table, false);
    if (c.p.pp > 1 || !c.m.tied_embeddings) {
        f(forward ? ends.head_forward : ends.head_backward, table, false);
    }
}

/// DeepSpeed's BF16_Optimizer (TrainingSpec::bf16_optimizer): with bf16 training and fp32
/// gradients, every microbatch's backward ends with its bf16 gradients added into the fp32 ones,
/// 18 bytes per parameter of the stage (a cast and an add: bf16_optimizer.py, update_hp_grads);
/// each backward pass carries the parameters it holds on this GPU (for_each_parameter_pass: a
/// layer's dense part over TP, an MoE layer's routed experts over EP x ETP, the word embedding
/// and a separate output layer over TP), memory-bound. DeepSpeed takes the BF16_Optimizer at ZeRO
/// stage 0 and 1 only (stages 2 and 3 reduce into their fp32 partitions instead: not modelled as
/// DeepSpeed's).
void add_bf16_optimizer_copy(const Context& c, LayerPasses& l, EndPasses& ends) {
    if (!takes_bf16_optimizer(c.tr, c.p.zero_stage)) return;
    constexpr double kBytesPerParam = 18;  // lp.grad.to(fp32): 2 + 4; hp.add_(.): 4 + 4 + 4
    for_each_parameter_pass(c, l, ends, false, [&](PassBuilder& b, const KindParams& k, bool) {
        if (b.list.empty()) return;
        const double params = k.dense / c.t + k.routed / (double(c.ep) * c.etp);
        b.compute(KernelClass::elementwise, c.memory(kBytesPerParam * params), c.sync);
    });
}

/// One collective over the parameters of every forward (AllGather) or backward (ReduceScatter)
/// pass of each microbatch, `bytes_per_param` of them (for_each_parameter_pass): the dense part
/// (over TP) over the d c ranks, an MoE layer's routed experts (over EP x ETP) over the
/// expert-DP group, on its link. Beside the pass's compute with `overlap` (detail::fsdp_wrap: one
/// op at the DP group's link; a chunk's first gather and last scatter exposed, expose_chunk_end
/// over `chunk_layers`), else serial comm ops on the compute stream.
void add_microbatch_collective(const Context& c, const Experiment& e, LayerPasses& l,
                               EndPasses& ends, KernelClass cls, double bytes_per_param,
                               bool overlap, double chunk_layers) {
    const DesignPoint& p = c.p;
    const bool gather = cls == KernelClass::allgather;
    const int edp = p.edp();
    const GroupLink expert_link =
        edp > 1 ? expert_group(c.hw, e.cluster, p, edp, p.ep * p.etp, true).link : c.dp_link;
    for_each_parameter_pass(
        c, l, ends, gather, [&](PassBuilder& b, const KindParams& k, bool layer) {
            if (b.list.empty()) return;
            const double dense_s =
                c.dp_link.size > 1 ? c.coll(cls, bytes_per_param * k.dense / c.t, c.dp_link) : 0.0;
            const double expert_s =
                k.routed > 0 && edp > 1
                    ? c.coll(cls, bytes_per_param * k.routed / (double(p.ep) * p.etp), expert_link)
                    : 0.0;
            const double total_s = dense_s + expert_s;
            if (total_s <= 0) return;
            if (overlap) {
                b = detail::fsdp_wrap(c, b, gather ? total_s : 0, gather ? 0 : total_s, true);
                if (layer) {
                    expose_chunk_end(b, cls, dense_s, c.dp_link.level, chunk_layers);
                    expose_chunk_end(b, cls, expert_s, expert_link.level, chunk_layers);
                }
                return;
            }
            if (dense_s > 0) b.comm(cls, dense_s, c.dp_link.level, kDp);
            if (expert_s > 0) b.comm(cls, expert_s, expert_link.level, kDp);
        });
}

/// DeepSpeed's ZeRO-2 reduces the gradients in every microbatch's backward
/// (TrainingSpec::grad_reduce_every_microbatch), not once per step.
bool reduces_every_microbatch(const Context& c) {
    return c.tr.grad_reduce_every_microbatch && c.zero == 2;
}

/// DeepSpeed's ZeRO-2 (TrainingSpec::grad_reduce_every_microbatch): every microbatch's backward
/// reduce-scatters the gradients it produced (stage_1_and_2.py, reduce_ready_partitions_and_
/// remove_grads, then average_tensor on the current stream, or on the reduction stream with
/// overlap_comm): each backward pass its own parameters' (add_microbatch_collective), serial on
/// the compute stream (DeepSpeed's default below stage 3) or with overlap_grad_reduce beside the
/// pass's compute. build_dp_sync then keeps only the parameter AllGather after the optimizer.
void add_microbatch_grad_reduce(const Context& c, const Experiment& e, LayerPasses& l,
                                EndPasses& ends, double chunk_layers) {
    if (!reduces_every_microbatch(c)) return;
    add_microbatch_collective(c, e, l, ends, KernelClass::reducescatter, grad_bytes_per_param(c.tr),
                              e.training.overlap_grad_reduce, chunk_layers);
}

/// PyTorch FSDP1's SHARD_GRAD_OP (TrainingSpec::param_gather_every_microbatch): the parameters
/// resharded after every backward and gathered again in every microbatch's forward.
bool gathers_every_microbatch(const Context& c) {
    return c.tr.param_gather_every_microbatch && c.zero == 2;
}

/// SHARD_GRAD_OP's gathers (TrainingSpec::param_gather_every_microbatch): each forward pass
/// gathers the 16-bit weights it holds (add_microbatch_collective), beside its compute with
/// overlap_param_gather (FSDP's prefetch), else exposed. build_dp_sync then drops the step's
/// parameter AllGather.
void add_microbatch_param_gather(const Context& c, const Experiment& e, LayerPasses& l,
                                 EndPasses& ends, double chunk_layers) {
    if (!gathers_every_microbatch(c)) return;
    add_microbatch_collective(c, e, l, ends, KernelClass::allgather, kWeightBytesPerParam,
                              e.training.overlap_param_gather, chunk_layers);
}

/// The dense layers among every chunk's (chunk c of stage s at s v + c), the layers in model
/// order over the virtual stages (virtual stage k = chunk k / p of stage k % p); empty for a
/// model of one layer kind.
std::vector<int> dense_chunk_layers(const ModelSpec& m, const std::vector<int>& chunk_layers,
                                    int pp, int chunks) {
    const int moe = m.moe_layers();
    if (moe == 0 || moe == m.layers) return {};
    std::vector<int> dense(chunk_layers.size(), 0);
    int layer = 0;
    for (int k = 0; k < pp * chunks; ++k) {
        const std::size_t at = std::size_t((k % pp) * chunks + k / pp);
        for (int j = 0; j < chunk_layers[at]; ++j, ++layer) {
            if (!m.is_moe_layer(layer)) ++dense[at];
        }
    }
    return dense;
}

/// Parameters (after TP) of the stage holding the most: its layers plus the word embedding
/// (first stage) or the output layer (last stage, pp > 1).
/// The largest over the pipeline stages of of(layers, embedding tables), per TP rank.
template <class Of>
double largest_stage(const ModelSpec& m, const DesignPoint& p, const std::vector<int>& layers,
                     Of of) {
    double most = 0;
    for (int s = 0; s < p.pp; ++s) {
        const double ends =
            (s == 0 ? 1 : 0) + (s == p.pp - 1 && (p.pp > 1 || !m.tied_embeddings) ? 1 : 0);
        most = std::max(most, of(double(layers[s]), ends));
    }
    return most / p.tp;
}

/// Non-expert parameters of the largest stage per TP rank, and its routed experts' parameters
/// per expert rank (over etp ep), which Megatron-Core reduces and shards over the expert-DP
/// group (edp) instead.
double largest_stage_params(const ModelSpec& m, const DesignPoint& p,
                            const std::vector<int>& layers) {
    const double dense = layer_params(m) - layer_expert_params(m);
    return largest_stage(m, p, layers, [&](double l, double ends) {
        return l * dense + ends * embedding_params(m);
    });
}

double largest_stage_expert_params(const ModelSpec& m, const DesignPoint& p,
                                   const std::vector<int>& layers) {
    const double most = *std::max_element(layers.begin(), layers.end());
    return most * layer_expert_params(m) / (double(p.ep) * p.etp);
}

/// The DP synchronization after the pipeline and how much of it the overlaps hide.
struct DpSync {
    PassBuilder list;
    double overlap_s = 0;
};

/// Megatron-Core: gradients reduced over the d c ranks (AllReduce, or ReduceScatter with the
/// distributed optimizer) in buckets of max(40M, 1M x d c) parameters; with
/// --overlap-grad-reduce a bucket's reduction starts when its gradients are final, during the
/// last microbatch's backward of its model chunk. With v chunks per stage the interleaved
/// schedule ends with p backwards of each chunk in turn (v - 1 first), so chunk j's share R / v
/// is released when p j + 1 chunk backwards (b each) remain: the reduction ends
/// max_j ((j + 1) R / v - (p j + 1) b) after the backward, and at least the last bucket's
/// reduction is exposed (v = 1: max(bucket, R - b)). The distributed optimizer's parameter
/// AllGather follows the optimizer step; with --overlap-param-gather it runs bucket by bucket
/// under the next step's forward, chunk j needed after p j + 1 chunk forwards: the same form with
/// the forward time, the first bucket exposed. A tied embedding's AllReduce between the first and
/// the last stage runs after the DP reduction (finalize_model_grads), exposed. The hidden part
/// still costs the compute beside it HardwareSpec::overlap_compute_cost of its time.
DpSync build_dp_sync(const Context& c, const Experiment& e, const Shape& s, double chunk_fwd_s,
                     double chunk_bwd_s) {
    const DesignPoint& p = c.p;
    const double params = largest_stage_params(c.m, p, s.stage_layers);
    const int ranks = c.dp_link.size;
    const double bucket = std::max(40e6, 1e6 * ranks);
    const double bucket_share = std::min(1.0, bucket / params);
    DpSync out;
    double grad_s = 0, gather_s = 0;
    // DeepSpeed's ZeRO-2 reduced every microbatch's gradients in its backward already, FSDP1's
    // SHARD_GRAD_OP gathered the parameters in every microbatch's forward
    const bool reduced = reduces_every_microbatch(c);
    const bool gathered = gathers_every_microbatch(c);
    if (ranks > 1 && c.zero == 0) {
        grad_s = c.coll(KernelClass::allreduce, grad_bytes_per_param(c.tr) * params, c.dp_link);
        out.list.comm(KernelClass::allreduce, grad_s, c.dp_link.level, kDp);
    } else if (ranks > 1 && c.zero <= 2) {
        if (!reduced) {
            grad_s =
                c.coll(KernelClass::reducescatter, grad_bytes_per_param(c.tr) * params, c.dp_link);
        }
        if (!gathered) {
            const double gathered_bytes =
                largest_stage(c.m, p, s.stage_layers, [&](double l, double ends) {
                    return weight_bytes(c.m, c.tr, l, ends) - expert_weight_bytes(c.m, c.tr, l);
                });
            gather_s = c.coll(KernelClass::allgather, gathered_bytes, c.dp_link);
        }
        if (grad_s > 0) out.list.comm(KernelClass::reducescatter, grad_s, c.dp_link.level, kDp);
        if (gather_s > 0) out.list.comm(KernelClass::allgather, gather_s, c.dp_link.level, kDp);
    }
    // MoE: the routed experts' gradients over the expert-DP group (edp ranks etp ep apart)
    const double expert_params = largest_stage_expert_params(c.m, p, s.stage_layers);
    const int edp = p.edp();
    if (expert_params > 0 && edp > 1) {
        const GroupLink link = expert_group(c.hw, e.cluster, p, edp, p.ep * p.etp, true).link;
        if (c.zero == 0) {
            const double t =
                c.coll(KernelClass::allreduce, grad_bytes_per_param(c.tr) * expert_params, link);
            out.list.comm(KernelClass::allreduce, t, link.level, kDp);
            grad_s += t;
        } else {
            const double rs = reduced ? 0.0
                                      : c.coll(KernelClass::reducescatter,
                                               grad_bytes_per_param(c.tr) * expert_params, link);
            const double most = *std::max_element(s.stage_layers.begin(), s.stage_layers.end());
            const double ag =
                gathered ? 0.0
                         : c.coll(KernelClass::allgather,
                                  expert_weight_bytes(c.m, c.tr, most) / (p.ep * p.etp), link);
            if (rs > 0) out.list.comm(KernelClass::reducescatter, rs, link.level, kDp);
            if (ag > 0) out.list.comm(KernelClass::allgather, ag, link.level, kDp);
            grad_s += rs;
            gather_s += ag;
        }
    }
    if (p.pp > 1 && c.m.tied_embeddings) {
        const GroupLink ends =
            group_link(c.hw, e.cluster, 2, dim_stride(p, ParallelDim::pp) * (p.pp - 1));
        out.list.comm(KernelClass::allreduce,
                      c.coll(KernelClass::allreduce,
                             grad_bytes_per_param(c.tr) * embedding_params(c.m) / c.t, ends),
                      ends.level, kDp);
    }
    const int v = s.chunks;
    auto hidden = [&](double total_s, double chunk_s, bool overlap) {
        if (!overlap || total_s <= 0) return 0.0;
        double exposed = bucket_share * total_s;
        for (int j = 0; j < v; ++j) {
            exposed = std::max(exposed, (j + 1) * total_s / v - (p.pp * j + 1) * chunk_s);
        }
        // the compute beside the hidden part loses overlap_compute_cost of its time
        return (1.0 - c.hw.overlap_compute_cost) * (total_s - std::min(exposed, total_s));
    };
    // FSDP2 under PP (traffic of a lower stage than its own) reduce-scatters in its
    // post-backward, after the stage's last backward
    const bool grad_overlap = e.training.overlap_grad_reduce && c.zero == p.zero_stage;
    out.overlap_s = hidden(grad_s, chunk_bwd_s, grad_overlap) +
                    hidden(gather_s, chunk_fwd_s, e.training.overlap_param_gather);
    return out;
}

/// Adam: read grad, master, m, v (fp32), write master, m, v and the bf16 weights; the
/// distributed optimizer updates the stage's parameters / (d c).
SegmentList build_optimizer(const Context& c, const Shape& s) {
    const int edp = std::max(1, c.p.edp());
    const double params =
        largest_stage_params(c.m, c.p, s.stage_layers) /
            (c.zero >= 1 ? double(c.dp_link.size) : 1.0) +
        largest_stage_expert_params(c.m, c.p, s.stage_layers) / (c.zero >= 1 ? double(edp) : 1.0);
    // Adam's HBM traffic per parameter: fp32 master, gradient and two moments read and written
    // back (with the bf16 copy) 30 bytes; pure bf16 reads and writes the bf16 weight, gradient
    // and moments, 14
    const double bytes_per_param = c.tr.pure_bf16 ? 14.0 : 30.0;
    return {Segment{{Op{KernelClass::optimizer, c.memory(bytes_per_param * params), c.sync,
                        LinkLevel::local}}}};
}

StepProfile assemble_profile(const Context& c, const Shape& s, LayerPasses& layers,
                             EndPasses& ends) {
    const DesignPoint& p = c.p;
    StepProfile prof;
    prof.stages = p.pp;
    prof.chunks = s.chunks;
    prof.microbatches = s.microbatches;
    prof.layers_per_chunk = s.chunk_layers[s.chunk_layers.size() / 2];
    if (!is_even_split(s.chunk_layers)) prof.uneven_chunk_layers = s.chunk_layers;
    prof.dp = p.dp;
    prof.tp = p.tp;
    prof.cp = p.cp;
    prof.dp_lockstep = c.zero >= 3 && c.dp_link.size > 1;
    prof.layer_forward = std::move(layers.forward.list);
    prof.layer_backward = std::move(layers.backward.list);
    prof.dense_chunk_layers = dense_chunk_layers(c.m, s.chunk_layers, p.pp, s.chunks);
    if (!prof.dense_chunk_layers.empty()) {
        prof.dense_layer_forward = std::move(layers.dense_forward.list);
        prof.dense_layer_backward = std::move(layers.dense_backward.list);
    }
    prof.embedding_forward = std::move(ends.embedding_forward.list);
    prof.embedding_backward = std::move(ends.embedding_backward.list);
    prof.head_forward = std::move(ends.head_forward.list);
    prof.head_backward = std::move(ends.head_backward.list);
    // Megatron's transfers on their own stream: a lag between stages (DeepSpeed's blocking ones
    // are in the passes, add_blocking_p2p)
    if ((p.pp > 1 || s.chunks > 1) && !c.tr.blocking_p2p) prof.p2p = detail::stage_transfer(c);
    return prof;
}

/// The time lines of the busiest stage; the bubble is that stage's idle time in the pipeline.
void fill_time_lines(const DeterministicResult& r, const LayerPasses& l, const EndPasses& ends,
                     double sync_exposed_s, Breakdown& bd) {
    const StepProfile& prof = r.profile;
    const int v = prof.chunks;
    // a stage's busy time: its chunks' forward and backward as chunk_forward_s / _backward_s
    // give them, with each segment list's time taken once; an MoE model's dense layers where
    // they are (dense_chunk_layers)
    const double layer_s =
        deterministic_time(prof.layer_forward) + deterministic_time(prof.layer_backward);
    const double dense_s = deterministic_time(prof.dense_layer_forward) +
                           deterministic_time(prof.dense_layer_backward);
    const double embedding_s =
        deterministic_time(prof.embedding_forward) + deterministic_time(prof.embedding_backward);
    const double head_s =
        deterministic_time(prof.head_forward) + deterministic_time(prof.head_backward);
    // the layers of the main kind and the dense layers of stage `st`
    auto stage_layers = [&](int st, double* dense) {
        double layers = 0;
        *dense = 0;
        for (int k = 0; k < v; ++k) {
            layers += prof.chunk_layers(st, k) - prof.chunk_dense_layers(st, k);
            *dense += prof.chunk_dense_layers(st, k);
        }
        return layers;
    };
    int s = 0;
    double busiest = -1;
    for (int st = 0; st < prof.stages; ++st) {
        double dense = 0;
        const double layers = stage_layers(st, &dense);
        const double busy =
            prof.microbatches * (layers * layer_s + dense * dense_s + (st == 0 ? embedding_s : 0) +
                                 (st == prof.stages - 1 ? head_s : 0));
        if (busy > busiest) busiest = busy, s = st;
    }
    double dense = 0;
    const double passes = stage_layers(s, &dense) * prof.microbatches;
    const double dense_passes = dense * prof.microbatches;
    const PassBuilder& f = l.forward;
    const PassBuilder& b = l.backward;
    const PassBuilder& df = l.dense_forward;
    const PassBuilder& db = l.dense_backward;
    // a line of both kinds: `of` of a pass, forward and backward, times the stage's passes
    auto line = [&](auto of) {
        return passes * (of(f) + of(b)) + (dense_passes > 0 ? dense_passes * (of(df) + of(db)) : 0);
    };
    bd.stage = s;
    bd.compute_s = line([](const PassBuilder& x) { return x.compute_s; });
    bd.tp_comm_exposed_s = line([](const PassBuilder& x) { return x.exposed[kTp]; });
    bd.cp_comm_exposed_s = line([](const PassBuilder& x) { return x.exposed[kCp]; });
    bd.fsdp_comm_exposed_s = line([](const PassBuilder& x) { return x.exposed[kDp]; });
    bd.ep_comm_exposed_s = line([](const PassBuilder& x) { return x.exposed[detail::kEp]; });
    bd.pp_comm_exposed_s = line([](const PassBuilder& x) { return x.exposed[detail::kPp]; });
    bd.moe_router_s = line([](const PassBuilder& x) { return x.moe.router_s; });
    bd.moe_expert_compute_s = line([](const PassBuilder& x) { return x.moe.expert_compute_s; });
    bd.moe_dispatch_s = line([](const PassBuilder& x) { return x.moe.dispatch_s; });
    bd.moe_combine_s = line([](const PassBuilder& x) { return x.moe.combine_s; });
    bd.host_bound_s = line([](const PassBuilder& x) { return x.stretch_s; });
    // the end passes' FSDP collectives (add_fsdp_end_tables, the per-microbatch ZeRO-2 ones) on
    // the FSDP line, not the embedding's / the head's
    const double embedding_dp =
        ends.embedding_forward.exposed[kDp] + ends.embedding_backward.exposed[kDp];
    const double head_dp = ends.head_forward.exposed[kDp] + ends.head_backward.exposed[kDp];
    if (s == 0) {
        bd.embedding_s = prof.microbatches * (embedding_s - embedding_dp);
        bd.fsdp_comm_exposed_s += prof.microbatches * embedding_dp;
    }
    if (s == prof.stages - 1) {
        bd.head_s = prof.microbatches * (head_s - head_dp);
        bd.fsdp_comm_exposed_s += prof.microbatches * head_dp;
    }
    bd.dp_sync_exposed_s = sync_exposed_s;
    bd.optimizer_s = deterministic_time(prof.optimizer);
    const double pipeline_s = r.step_time_s - sync_exposed_s - bd.optimizer_s;
    bd.bubble_s = std::max(0.0, pipeline_s - busiest);
    bd.pp_comm_s = prof.stages > 1 ? 2.0 * prof.microbatches * v * prof.p2p.time_s : 0;
    bd.dp_comm_exposed_s = bd.fsdp_comm_exposed_s + bd.dp_sync_exposed_s;
}

/// Memory of every stage; the most loaded one decides feasibility.
void check_memory(const Experiment& e, const DesignPoint& p, const Shape& s,
                  DeterministicResult& r) {
    Breakdown& bd = r.breakdown;
    bd.stage_memory = memory_of_stages(e.model, e.training, p, s.microbatches, s.stage_layers);
    for (MemoryBreakdown& stage : bd.stage_memory) {
        stage.reserved_bytes = reserved_bytes(e.memory_reserve, p);
    }
    for (int st = 1; st < p.pp; ++st) {
        if (bd.stage_memory[st].total_bytes() > bd.stage_memory[bd.memory_stage].total_bytes()) {
            bd.memory_stage = st;
        }
    }
    bd.memory = bd.stage_memory[bd.memory_stage];
    r.memory = bd.memory;
    const GpuSpec& gpu = e.hardware[p.hardware].gpu;
    const double capacity = gpu.hbm_bytes * e.constraints.max_memory_fraction;
    if (gpu.hbm_bytes > 0 && r.memory.total_bytes() > capacity) {
        constexpr double kGiB = 1024.0 * 1024 * 1024;
        r.feasible = false;
        r.reason = fmt::format("memory {:.1f} GiB > {:.1f} GiB capacity",
                               r.memory.total_bytes() / kGiB, capacity / kGiB);
        if (p.pp > 1) r.reason += fmt::format(" (pipeline stage {})", bd.memory_stage);
    }
}

}  // namespace

double Breakdown::lines_sum_s() const {
    return compute_s + tp_comm_exposed_s + cp_comm_exposed_s + fsdp_comm_exposed_s +
           ep_comm_exposed_s + pp_comm_exposed_s + host_bound_s + embedding_s + head_s + bubble_s +
           dp_sync_exposed_s + optimizer_s;
}

DeterministicResult evaluate_deterministic(const Experiment& e, const DesignPoint& p) {
    const Shape shape = check_point(e, p);
    const Context c = make_context(e, p);

    // the overlap windows: chunk passes of the stage with the most layers
    double window_layers = 0;
    for (int st = 0; st < p.pp; ++st)
        window_layers = std::max(window_layers, 1.0 * shape.stage_layers[st]);
    const double chunk_layers = window_layers / shape.chunks;

    LayerPasses layers = build_layer_passes(c, chunk_layers);
    add_blocking_p2p(c, shape, chunk_layers, layers);
    EndPasses ends = detail::end_passes(c);
    add_fsdp_end_tables(c, shape, ends);
    add_bf16_optimizer_copy(c, layers, ends);
    add_microbatch_grad_reduce(c, e, layers, ends, chunk_layers);
    add_microbatch_param_gather(c, e, layers, ends, chunk_layers);
    // the mean layer (an MoE model's dense and MoE layers by their shares)
    const double layer_forward_s = layers.mean_forward_s();
    const double layer_backward_s = layers.mean_backward_s();

    DeterministicResult r;
    r.profile = assemble_profile(c, shape, layers, ends);
    r.profile.routing = routing_load(e, p);
    r.profile.routing_mean_factor = c.busiest_rank;
    if (c.documents) {
        r.profile.documents = document_packing(e);
        r.profile.documents_sequences = p.microbatch;
    }
    StepProfile& prof = r.profile;
    const DpSync sync =
        build_dp_sync(c, e, shape, chunk_layers * layer_forward_s, chunk_layers * layer_backward_s);
    prof.dp_sync = sync.list.list;
    prof.dp_overlap_s = sync.overlap_s;
    prof.optimizer = build_optimizer(c, shape);

    r.step_time_s = deterministic_step_time(prof);
    r.megatron_flops_per_step = megatron_flops_per_step(e.model, shape.batch);
    r.model_flops_per_step = model_flops_per_step(e.model, shape.batch);
    r.hardware_flops_per_step = hardware_flops_per_step(e.model, e.training, p.recompute,
                                                        shape.batch, op_sac_saves_wo_output(p));
    r.tokens_per_step = double(shape.batch) * e.model.seq;
    r.moe = e.model.is_moe();

    Breakdown& bd = r.breakdown;
    bd.layer_forward_s = layer_forward_s;
    bd.layer_backward_s = layer_backward_s;
    fill_time_lines(r, layers, ends, sync.list.time_s() - sync.overlap_s, bd);
    check_memory(e, p, shape, r);
    return r;
}

std::string format_breakdown(const DeterministicResult& r) {
    const Breakdown& b = r.breakdown;
    std::string out;
    auto row = [&](const std::string& name, double value, const char* unit) {
        out += fmt::format("  {:<28}{:>12.3f} {}\n", name, value, unit);
    };
    constexpr double ms = 1e3;
    constexpr double gib = 1024.0 * 1024 * 1024;
    const int stages = r.profile.stages;
    row("step time", r.step_time_s * ms, "ms");
    out += fmt::format("  {:<28}{:>12d} {}\n", "  lines below: stage", b.stage,
                       fmt::format("of {} (the busiest)", stages));
    row("  layers: compute", b.compute_s * ms, "ms");
    row("  layers: TP comm exposed", b.tp_comm_exposed_s * ms, "ms");
    row("  layers: CP comm exposed", b.cp_comm_exposed_s * ms, "ms");
    row("  FSDP comm exposed", b.fsdp_comm_exposed_s * ms, "ms");
    if (r.moe) row("  layers: MoE a2a exposed", b.ep_comm_exposed_s * ms, "ms");
    if (b.pp_comm_exposed_s > 0) row("  layers: PP p2p (blocking)", b.pp_comm_exposed_s * ms, "ms");
    row("  layers: host-bound stretch", b.host_bound_s * ms, "ms");
    row("  embedding", b.embedding_s * ms, "ms");
    row("  LM head and loss", b.head_s * ms, "ms");
    row("  pipeline bubble and waits", b.bubble_s * ms, "ms");
    row("  DP sync exposed", b.dp_sync_exposed_s * ms, "ms");
    row("  optimizer", b.optimizer_s * ms, "ms");
    row("layer forward (1 microbatch)", b.layer_forward_s * ms, "ms");
    row("layer backward", b.layer_backward_s * ms, "ms");
    row("PP p2p transfers (hidden)", b.pp_comm_s * ms, "ms");
    if (r.moe) {
        row("MoE: router and permute", b.moe_router_s * ms, "ms");
        row("MoE: expert compute", b.moe_expert_compute_s * ms, "ms");
        row("MoE: dispatch", b.moe_dispatch_s * ms, "ms");
        row("MoE: combine", b.moe_combine_s * ms, "ms");
    }
    out += fmt::format("  {:<28}{:>12d} {}\n", "memory: stage", b.memory_stage,
                       stages > 1 ? "(the most loaded)" : "");
    row("memory: weights", b.memory.weights_bytes / gib, "GiB");
    row("memory: gradients", b.memory.grads_bytes / gib, "GiB");
    row("memory: optimizer", b.memory.optimizer_bytes / gib, "GiB");
    row("memory: activations", b.memory.activations_bytes / gib, "GiB");
    row("memory: temporary", b.memory.temporary_bytes / gib, "GiB");
    row("memory: reserved", b.memory.reserved_bytes / gib, "GiB");
    row("memory: total", b.memory.total_bytes() / gib, "GiB");
    for (std::size_t st = 0; stages > 1 && st < b.stage_memory.size(); ++st) {
        int layers = 0;
        for (int k = 0; k < r.profile.chunks; ++k) layers += r.profile.chunk_layers(int(st), k);
        row(fmt::format("  stage {} total, {} layers", st, layers),
            b.stage_memory[st].total_bytes() / gib, "GiB");
    }
    if (!r.feasible) out += "  infeasible: " + r.reason + "\n";
    return out;
}

}  // namespace prism
