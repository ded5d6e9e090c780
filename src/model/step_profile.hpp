#pragma once

// The seam between the deterministic model and the stochastic evaluators: the structure of one
// training step with deterministic base durations. The deterministic model builds it; the
// deterministic step time, Monte Carlo and the analytic evaluator all compose the same profile.
//
// Structure (DESIGN.md section 3), for ONE data-parallel replica, with the TP x CP group of each
// pipeline stage acting as one rank:
//   - the pipeline: `stages` (p) ranks, each holding `chunks` (v) model chunks of
//     `layers_per_chunk` layers; `microbatches` (m) per replica; Megatron's 1F1B schedule
//     (interleaved when v > 1; see timing/pipeline.hpp);
//   - a chunk's forward = its layers' `layer_forward` in series (plus `embedding_forward` before
//     the first chunk of stage 0 and `head_forward` after the last chunk of the last stage);
//     backward likewise with `layer_backward`, `head_backward` first and `embedding_backward` last;
//   - between consecutive virtual stages, one `p2p` transfer per microbatch and direction;
//   - after its last backward, each stage synchronizes gradients over DP (`dp_sync`), of which
//     a window of `dp_overlap_s` overlaps the preceding backward work, then runs `optimizer`.
//     Step time = max over stages of that finish.
//   - with ZeRO-3/FSDP the layer segments include the per-layer AllGather/ReduceScatter over
//     the DP group, and `dp_lockstep` says every layer synchronizes all replicas.

#include <array>
#include <cstdint>
#include <vector>

#include "src/model/spec.hpp"
#include "src/stochastic/documents.hpp"
#include "src/stochastic/routing.hpp"

namespace prism {

/// Which level of the network a collective's slowest link is on.
enum class LinkLevel : std::uint8_t { local, nvlink, nic, rack, pod };

/// One kernel (or collective) with its deterministic duration.
struct Op {
    KernelClass cls = KernelClass::gemm;
    double time_s = 0;
    /// Number of GPUs that each run this op and must all finish before the segment ends
    /// (the TP x CP group for compute; 1 for a collective, whose one duration is shared).
    int sync_size = 1;
    LinkLevel link = LinkLevel::local;  ///< for collectives
    /// MoE routed work (grouped expert GEMMs, dispatch and combine): time_s is at the busiest
    /// EP rank's expected load; the evaluators scale it by the load factor's law
    /// (StepProfile::routing) when the router is not forced to balance.
    bool routed = false;
    /// Fused attention masked per packed document ([variability.documents]): time_s is at the
    /// mean sum of squared document lengths E[S]; the evaluators scale it by the microbatch's
    /// S / E[S] (StepProfile::documents, docs/document_lengths.md).
    bool documents = false;

    bool operator==(const Op&) const = default;
};

/// Ops that run concurrently (e.g. a GEMM and a prefetched AllGather on another stream); the
/// segment ends when the last of them ends. Segments of a list run in series.
struct Segment {
    std::vector<Op> ops;

    bool operator==(const Segment&) const = default;
};

using SegmentList = std::vector<Segment>;

/// Duration of a segment list with every op at its base time.
double deterministic_time(const SegmentList& segments);

struct StepProfile {
    int stages = 1;            ///< p
    int chunks = 1;            ///< v (virtual stages per rank)
    int microbatches = 1;      ///< m per replica per step
    int layers_per_chunk = 1;  ///< L / (p v) of an even split
    /// Layers of every model chunk (p v entries, chunk c of stage s at s v + c) when the split
    /// is uneven (pipeline_split.hpp); empty = layers_per_chunk everywhere.
    std::vector<int> uneven_chunk_layers;
    /// An MoE model with dense layers (DeepSeek-V3's first 3): the dense layers among every
    /// chunk's (p v entries, as uneven_chunk_layers), placed as Megatron places the layers, in
    /// model order over the virtual stages; layer_forward / layer_backward are then the MoE
    /// layers' passes and dense_layer_forward / dense_layer_backward the dense layers'. Empty:
    /// every layer is of the one kind of layer_forward.
    std::vector<int> dense_chunk_layers;
    int dp = 1;  ///< replicas
    int tp = 1;
    int cp = 1;
    bool dp_lockstep = false;  ///< FSDP / ZeRO-3: the DP group syncs every layer

    SegmentList layer_forward;
    SegmentList layer_backward;        ///< includes recomputed forward work
    SegmentList dense_layer_forward;   ///< see dense_chunk_layers
    SegmentList dense_layer_backward;  ///< includes recomputed forward work
    SegmentList embedding_forward;
    SegmentList embedding_backward;
    SegmentList head_forward;  ///< final norm, logits, loss
    SegmentList head_backward;
    Op p2p;                   ///< one activation (or gradient) transfer between stages
    SegmentList dp_sync;      ///< gradient AllReduce / ReduceScatter (+ AllGather of params)
    double dp_overlap_s = 0;  ///< part of dp_sync hidden behind backward compute
    SegmentList optimizer;
    SegmentList dataloader;  ///< before the first forward (usually tiny)
    /// The routing of one MoE layer for one microbatch (inactive: forced balance, dense, ep 1)
    /// and the load factor E[Z] its routed ops' time_s were computed at (docs/moe.md).
    stochastic::RoutingLoad routing;
    double routing_mean_factor = 1;
    /// Variable-length packing (inactive: full causal attention over the sequence): the
    /// document law and sequence length, and the sequences of one microbatch (its S is their
    /// sum), for the ops marked Op::documents.
    stochastic::DocumentPacking documents;
    int documents_sequences = 1;

    /// Layers of model chunk `chunk` on `stage`.
    int chunk_layers(int stage, int chunk) const {
        return uneven_chunk_layers.empty()
                   ? layers_per_chunk
                   : uneven_chunk_layers[static_cast<std::size_t>(stage * chunks + chunk)];
    }

    /// Dense layers of model chunk `chunk` on `stage` (0 unless dense_chunk_layers is set).
    int chunk_dense_layers(int stage, int chunk) const {
        return dense_chunk_layers.empty()
                   ? 0
                   : dense_chunk_layers[static_cast<std::size_t>(stage * chunks + chunk)];
    }

    /// Deterministic durations of one chunk's forward / backward on `stage`, chunk `chunk`.
    double chunk_forward_s(int stage, int chunk) const;
    double chunk_backward_s(int stage, int chunk) const;

    /// Every field equal (front verification: two points with equal profiles and equal points
    /// but for the ZeRO stage have one step-time law).
    bool operator==(const StepProfile&) const = default;
};

/// Deterministic step time: the pipeline schedule of `profile` evaluated with base durations.
double deterministic_step_time(const StepProfile& profile);

/// The collective time of one replica's step on each link level (indexed by LinkLevel), at base
/// durations: every stage's chunks' collectives times the microbatches (forward and backward),
/// 2 m (p v - 1) point-to-point transfers, each stage's DP sync, the optimizer and the
/// dataloader once per stage. Concurrent ops count each (traffic, not the critical path).
std::array<double, 5> collective_seconds_by_level(const StepProfile& profile);

}  // namespace prism
