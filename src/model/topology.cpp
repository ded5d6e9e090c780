#include "src/model/topology.hpp"

#include <algorithm>
#include <vector>

namespace prism {

int dim_size(const DesignPoint& point, ParallelDim dim) {
    switch (dim) {
        case ParallelDim::tp:
            return point.tp;
        case ParallelDim::cp:
            return point.cp;
        case ParallelDim::pp:
            return point.pp;
        case ParallelDim::dp:
            return point.dp;
    }
    return 1;
}

int dim_stride(const DesignPoint& point, ParallelDim dim) {
    const Placement defaults;
    const auto& order =
        point.placement.kind == PlacementKind::ordered ? point.placement.order : defaults.order;
    int stride = 1;
    for (ParallelDim d : order) {
        if (d == dim) return stride;
        stride *= dim_size(point, d);
    }
    return stride;
}

namespace {

/// Members of a dim group (`size` ranks `stride` GPUs apart) that share one node.
int members_per_node(int size, int stride, int gpn) {
    return stride < gpn ? std::min(size, gpn / stride) : 1;
}

/// A ring of `size` ranks spanning `span` consecutive GPUs with `per_node` of them in a node.
GroupLink ring_link(const HardwareSpec& hw, const ClusterSpec& cluster, int size, std::int64_t span,
                    int per_node) {
    GroupLink link;
    link.size = size;
    if (size <= 1) {
        link.level = LinkLevel::local;
        link.bytes_per_s = hw.nvlink_bytes_per_s;
        return link;
    }
    const int gpn = std::max(1, hw.gpus_per_node);
    if (span <= gpn) {
        link.level = LinkLevel::nvlink;
        link.bytes_per_s = hw.nvlink_bytes_per_s;
        link.latency_s = hw.nvlink_latency_s;
        return link;
    }
    const std::int64_t nodes = (span + gpn - 1) / gpn;
    link.level = LinkLevel::nic;
    link.bytes_per_s = std::min(hw.nvlink_bytes_per_s, per_node * hw.nic_bytes_per_s);
    link.latency_s = hw.nic_latency_s;
    if (nodes > cluster.nodes_per_rack) {
        link.level = LinkLevel::rack;
        link.bytes_per_s /= std::max(1.0, cluster.rack_oversubscription);
    }
    if (nodes > std::int64_t{cluster.nodes_per_rack} * cluster.racks_per_pod) {
        link.level = LinkLevel::pod;
        link.bytes_per_s /= std::max(1.0, cluster.pod_oversubscription);
    }
    return link;
}

}  // namespace

GroupLink group_link(const HardwareSpec& hw, const ClusterSpec& cluster, int size, int stride) {
    const int gpn = std::max(1, hw.gpus_per_node);
    return ring_link(hw, cluster, size, std::int64_t{size} * stride,
                     members_per_node(size, stride, gpn));
}

GroupLink group_link(const HardwareSpec& hw, const ClusterSpec& cluster, const DesignPoint& point,
                     ParallelDim dim) {
    return group_link(hw, cluster, dim_size(point, dim), dim_stride(point, dim));
}

GroupLink group_link(const HardwareSpec& hw, const ClusterSpec& cluster, const DesignPoint& point,
                     ParallelDim a, ParallelDim b) {
    const int na = dim_size(point, a), nb = dim_size(point, b);
    if (na <= 1) return group_link(hw, cluster, point, b);
    if (nb <= 1) return group_link(hw, cluster, point, a);
    const int sa = dim_stride(point, a), sb = dim_stride(point, b);
    const int gpn = std::max(1, hw.gpus_per_node);
    // the placement order nests the dims: the outer one's stride is at least the inner's extent
    const std::int64_t span = std::max(std::int64_t{na} * sa, std::int64_t{nb} * sb);
    const int per_node = members_per_node(na, sa, gpn) * members_per_node(nb, sb, gpn);
    return ring_link(hw, cluster, na * nb, span, std::min(per_node, gpn));
}

int nvlink_domain_gpus(const HardwareSpec& hw) { return std::max(1, hw.gpus_per_node); }

ExpertGroup expert_group(const HardwareSpec& hw, const ClusterSpec& cluster,
                         const DesignPoint& point, int size, int stride, bool ring) {
    ExpertGroup g;
    g.size = size;
    const int st = dim_stride(point, ParallelDim::tp), sc = dim_stride(point, ParallelDim::cp),
              sd = dim_stride(point, ParallelDim::dp);
    const std::int64_t domain = nvlink_domain_gpus(hw);
    std::int64_t lo = 0, hi = 0, first_domain = 0;
    std::vector<std::int64_t> seen;
    g.per_domain = 0;
    for (int j = 0; j < size; ++j) {
        std::int64_t r = std::int64_t{j} * stride;
        const std::int64_t ti = r % point.tp;
        r /= point.tp;
        const std::int64_t ci = r % point.cp;
        const std::int64_t di = r / point.cp;
        const std::int64_t gpu = ti * st + ci * sc + di * sd;
        const std::int64_t d = gpu / domain;
        if (j == 0) lo = hi = gpu, first_domain = d;
        lo = std::min(lo, gpu);
        hi = std::max(hi, gpu);
        if (d == first_domain) ++g.per_domain;
        if (std::find(seen.begin(), seen.end(), d) == seen.end()) seen.push_back(d);
    }
    g.domains = int(seen.size());
    const std::int64_t span = hi - lo + 1;
    // the level from the domains spanned; a ring drives per_domain NICs at once (group_link),
    // the all-to-all each GPU's own NIC share
    const std::int64_t level_span =
        g.domains > 1 ? std::max<std::int64_t>(span, domain + 1) : std::min(span, domain);
    g.link = ring_link(hw, cluster, size, level_span, ring ? g.per_domain : 1);
    return g;
}

const char* link_level_name(LinkLevel level) {
    switch (level) {
        case LinkLevel::local:
            return "local";
        case LinkLevel::nvlink:
            return "nvlink";
        case LinkLevel::nic:
            return "nic";
        case LinkLevel::rack:
            return "rack";
        case LinkLevel::pod:
            return "pod";
    }
    return "?";
}

}  // namespace prism
