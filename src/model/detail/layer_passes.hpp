#pragma once

// The kernels of one transformer layer's forward and backward pass, of the embedding and of the
// LM head with its loss, as segment lists (step_profile.hpp) with their time accounted per
// category: compute, exposed TP / CP / DP communication and the host-bound stretch. Used by
// evaluate_deterministic (deterministic.cpp); the formulas are DESIGN.md section 1.

#include <array>

#include "src/model/spec.hpp"
#include "src/model/step_profile.hpp"
#include "src/model/topology.hpp"

namespace prism::detail {

enum Category { kTp = 0, kCp, kDp, kCategories };

/// Gradients are reduced over DP in the training precision (16-bit; Megatron-Core's default
/// grad_reduce_in_fp32 = false, and fp16 in the SC'21 runs), although accumulated in fp32.
inline constexpr double kGradReduceBytesPerParam = 2;

/// TransformerEngine's default split of a pipelined (chunked) ReduceScatter overlap
/// (userbuffers "pipeline" method: num_splits 4 for proj_fprop and fc2_fprop).
inline constexpr int kPipelinedScatterSplits = 4;

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
    void overlapped(const Op& compute_op, const Op& comm_op, Category cat);
    /// An AllGather as TransformerEngine's ring exchange beside the GEMM that consumes it: the
    /// GEMM in n chunks, each computed while the next chunk arrives (n - 1 transfers of c / (n -
    /// 1)): (n - 1) max(g / n, c / (n - 1)) + g / n = max(g (n - 1) / n, c) + g / n.
    void ring_exchange(const Op& gemm, const Op& gather, int n, Category cat);
    /// A ReduceScatter pipelined behind the GEMM that produces it in k splits (each split's
    /// scatter beside the next split's GEMM): g / k + max(g, c) (k - 1) / k + c / k.
    void pipelined_scatter(const Op& gemm, const Op& scatter, int k, Category cat);
    void append(const PassBuilder& other);
    double time_s() const { return deterministic_time(list); }
    /// Host-bound floor: the pass cannot be shorter than issuing its kernels; stretches every
    /// op by the same factor and records the difference in stretch_s.
    void apply_launch_floor(double kernel_launch_s);
};

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
    int sync = 1;             ///< tp * cp
    bool tp_overlap = false;  ///< --tp-comm-overlap in effect (tp > 1 with SP)
    GroupLink tp_link, cp_link, pp_link;
    GroupLink dp_link;  ///< the data-parallel group with CP: d c ranks

    Context(const ModelSpec& model, const TrainingSpec& training, const HardwareSpec& hardware,
            const DesignPoint& point);

    /// A GEMM in the training precision, and one in bf16.
    double gemm(double flops, double m_rows, double k, double n) const;
    double gemm_bf16(double flops, double m_rows, double k, double n) const;
    double memory(double bytes) const;
    double coll(KernelClass cls, double bytes, const GroupLink& link) const;
    /// Activation bytes of elementwise kernels: replicated over TP unless sequence parallel.
    double act(double bytes) const { return p.sequence_parallel ? bytes / t : bytes; }
};

/// Attention core (scores, softmax, dropout, scores x V) of one pass; `scale` = 1 forward,
/// 2 backward. CP: the K/V ring exchange runs concurrently with the attention kernel.
void attention_core(const Context& c, PassBuilder& b, double scale);
/// One layer's forward.
void layer_forward(const Context& c, PassBuilder& b);
/// One layer's backward (without recompute).
void layer_backward(const Context& c, PassBuilder& b);

/// ZeRO-3 / FSDP: the pass's compute beside the per-layer AllGather of the weights (and, in the
/// backward, the ReduceScatter of the gradients); see deterministic.hpp.
PassBuilder fsdp_wrap(const Context& c, const PassBuilder& pass, double gather_s, double scatter_s,
                      bool prefetch);

/// The word embedding and the LM head with its loss, forward and backward.
struct EndPasses {
    PassBuilder embedding_forward, embedding_backward, head_forward, head_backward;
};
EndPasses end_passes(const Context& c);

}  // namespace prism::detail
