#pragma once

// Which network level a parallel group's collectives cross, from the placement of ranks onto
// GPUs (DESIGN.md "hierarchical bandwidth"). Ranks are laid out mixed-radix in
// `Placement::order`, innermost first: a group of size n whose members are `stride` GPUs apart
// (stride = product of the sizes of the dims inside it) spans n * stride consecutive GPUs.

#include "src/model/spec.hpp"
#include "src/model/step_profile.hpp"

namespace prism {

/// The slowest link a group crosses and the bandwidth a ring over it achieves per rank.
struct GroupLink {
    LinkLevel level = LinkLevel::local;
    double bytes_per_s = 0;  ///< per rank, one direction, before collective efficiency
    double latency_s = 0;    ///< per ring step that crosses the slowest link (a NIC across domains)
    /// Per ring step between two members of one NVLink domain: NVLink's latency (= latency_s
    /// for a group inside one domain).
    double intra_latency_s = 0;
    int size = 1;     ///< ranks in the group
    int domains = 1;  ///< NVLink domains the ring visits (NCCL's nNodes for the group)
};

/// Size of `dim` in `point` (tp, cp, pp or dp).
int dim_size(const DesignPoint& point, ParallelDim dim);

/// Distance in GPUs between consecutive members of a `dim` group: the product of the sizes of
/// the dims inside it in the placement order. Random and variability-aware placements use the
/// default order (tp, cp, pp, dp) here: the deterministic model has no slow GPUs to avoid.
int dim_stride(const DesignPoint& point, ParallelDim dim);

/// Link of a group of `size` ranks, `stride` GPUs apart. Inside a node (size * stride <=
/// gpus_per_node) it is NVLink, and inside an NVLink domain of several nodes (hardware
/// nvlink_domain, e.g. 72 on GB200 NVL72) too when no group's block of size * stride GPUs
/// crosses a domain's edge (the span divides the domain, or the job is one domain). Across
/// domains the k = domain / stride members sharing a domain drive k NICs in parallel (NCCL runs
/// one ring per NIC), so the per-rank bandwidth is min(nvlink, k * nic), k limited to
/// gcd(domain, span) / stride where blocks straddle domains; spanning more than nodes_per_rack
/// nodes divides it by rack_oversubscription, more than a pod by pod_oversubscription as well.
GroupLink group_link(const HardwareSpec& hw, const ClusterSpec& cluster, int size, int stride);

/// Link of the `dim` group of `point` (a job of point.gpus() GPUs).
GroupLink group_link(const HardwareSpec& hw, const ClusterSpec& cluster, const DesignPoint& point,
                     ParallelDim dim);

/// Link of the group spanned by two dims of `point` together (e.g. Megatron-Core's data-parallel
/// group with context parallelism, d c ranks): members per node and nodes spanned as above,
/// from both dims' sizes and strides.
GroupLink group_link(const HardwareSpec& hw, const ClusterSpec& cluster, const DesignPoint& point,
                     ParallelDim a, ParallelDim b);

/// GPUs that share one NVLink domain (all-to-all over NVLink inside it): the hardware's
/// nvlink_domain (72 on GB200 NVL72), the node by default.
int nvlink_domain_gpus(const HardwareSpec& hw);

/// An expert-parallel group (or the expert-TP group) of Megatron-Core's folding: expert rank r
/// of a stage (etp innermost, then ep, then edp) is the attention's rank r of the same stage
/// (tp innermost, then cp, then dp, Megatron's default order), laid onto GPUs by the point's
/// placement. Group 0's members are expert ranks 0, stride, 2 stride, ...
struct ExpertGroup {
    int size = 1;
    int per_domain = 1;  ///< members sharing member 0's NVLink domain (itself included)
    int domains = 1;     ///< NVLink domains the group spans
    /// The link of traffic that leaves the domain (level nic / rack / pod; bytes_per_s the
    /// GPU's own NIC share divided by the oversubscription of the span), or of a ring over the
    /// group (ring = true: as group_link, per_domain NICs in parallel).
    GroupLink link;
};

/// The group of `size` expert ranks `stride` apart: ep (stride etp) or etp (stride 1).
ExpertGroup expert_group(const HardwareSpec& hw, const ClusterSpec& cluster,
                         const DesignPoint& point, int size, int stride, bool ring);

const char* link_level_name(LinkLevel level);

}  // namespace prism
