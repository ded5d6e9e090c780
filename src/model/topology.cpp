#include "src/model/topology.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
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

/// GPUs of one NVLink domain: at least a node.
std::int64_t domain_gpus(const HardwareSpec& hw) {
    return std::max(std::max(1, hw.gpus_per_node), hw.nvlink_domain_gpus());
}

/// Members of a dim group (`size` ranks `stride` GPUs apart) that share one NVLink domain of
/// `domain` GPUs (a node when the hardware gives no larger domain).
int members_per_domain(int size, int stride, std::int64_t domain) {
    return stride < domain ? int(std::min<std::int64_t>(size, domain / stride)) : 1;
}

/// Ordered placement lays each group in an aligned block of `span` consecutive GPUs. Inside one
/// NVLink domain when the block fits a node, or when it fits the domain and no block crosses a
/// domain's edge: the span divides the domain, or the whole job (`job_gpus`; 0 = unknown) is
/// one domain. A GB200 NVL72 domain holds TP 8 groups whole (72 / 8), not TP 16 ones (the
/// fifth of 64-79 crosses into the next domain and its collectives wait on the NIC).
bool inside_domain(const HardwareSpec& hw, std::int64_t span, std::int64_t job_gpus) {
    const std::int64_t gpn = std::max(1, hw.gpus_per_node);
    const std::int64_t domain = domain_gpus(hw);
    if (span <= gpn) return true;
    if (span > domain) return false;
    return domain % span == 0 || (job_gpus > 0 && job_gpus <= domain);
}

/// A block of `span` GPUs that crosses a domain's edge without filling whole domains (span
/// neither divides nor is a multiple of the domain) has gcd(domain, span) GPUs on the smaller
/// side of the worst edge: fewer members drive NICs there than a whole domain's.
int straddling_cap(const HardwareSpec& hw, std::int64_t span, int stride) {
    const std::int64_t domain = domain_gpus(hw);
    if (domain == std::max(1, hw.gpus_per_node) || span % domain == 0 || domain % span == 0) {
        return INT_MAX;  // whole domains (and one-node domains as before)
    }
    return int(std::max<std::int64_t>(1, std::gcd(domain, span) / stride));
}

/// A per-rank bandwidth on traffic that crosses `level`: divided by the rack's oversubscription
/// across racks, by the pod's as well across pods.
double oversubscribed(double bytes_per_s, const ClusterSpec& cluster, LinkLevel level) {
    if (level == LinkLevel::rack || level == LinkLevel::pod) {
        bytes_per_s /= std::max(1.0, cluster.rack_oversubscription);
    }
    if (level == LinkLevel::pod) bytes_per_s /= std::max(1.0, cluster.pod_oversubscription);
    return bytes_per_s;
}

/// A ring of `size` ranks spanning `span` consecutive GPUs with `per_domain` of them in one
/// NVLink domain; `job_gpus` as inside_domain.
GroupLink ring_link(const HardwareSpec& hw, const ClusterSpec& cluster, int size, std::int64_t span,
                    int per_domain, std::int64_t job_gpus) {
    GroupLink link;
    link.size = size;
    if (size <= 1) {
        link.level = LinkLevel::local;
        link.bytes_per_s = hw.nvlink_bytes_per_s;
        return link;
    }
    if (inside_domain(hw, span, job_gpus)) {
        link.level = LinkLevel::nvlink;
        link.bytes_per_s = hw.nvlink_bytes_per_s;
        link.latency_s = hw.nvlink_latency_s;
        link.intra_latency_s = hw.nvlink_latency_s;
        return link;
    }
    // hierarchical: NVLink inside each domain, the domains joined by the members' NICs
    const int gpn = std::max(1, hw.gpus_per_node);
    const std::int64_t nodes = (span + gpn - 1) / gpn;
    link.level = LinkLevel::nic;
    if (nodes > cluster.nodes_per_rack) link.level = LinkLevel::rack;
    if (nodes > std::int64_t{cluster.nodes_per_rack} * cluster.racks_per_pod) {
        link.level = LinkLevel::pod;
    }
    link.bytes_per_s = oversubscribed(
        std::min(hw.nvlink_bytes_per_s, per_domain * hw.nic_bytes_per_s), cluster, link.level);
    link.latency_s = hw.nic_latency_s;
    link.intra_latency_s = hw.nvlink_latency_s;
    link.domains = (size + std::max(1, per_domain) - 1) / std::max(1, per_domain);
    return link;
}

/// P(k nodes drawn at random from the machine's `machine` nodes, laid in consecutive units of
/// `unit` nodes (the last one partial), all lie in one unit): sum over the units of C(n_u, k) /
/// C(machine, k), each term the product over j < k of (n_u - j) / (machine - j).
double all_in_one_unit(std::int64_t machine, std::int64_t unit, std::int64_t k) {
    if (k <= 1) return 1.0;
    if (unit <= 1 || machine <= 1) return 0.0;
    unit = std::min(unit, machine);
    const auto share = [&](std::int64_t n) {
        double p = 1.0;
        for (std::int64_t j = 0; j < k && p > 0; ++j) {
            p *= double(std::max<std::int64_t>(0, n - j)) / double(machine - j);
        }
        return p;
    };
    const std::int64_t full = machine / unit, rest = machine % unit;
    return std::min(1.0, double(full) * share(unit) + (rest > 0 ? share(rest) : 0.0));
}

/// Random placement (PlacementKind::random: the job's nodes drawn at random from the machine,
/// ranks in order inside each node): a group whose members sit on `k` nodes (k >= 2) has them on
/// a random k-subset of the machine's nodes (ClusterSpec::total_gpus, or the job's own when 0),
/// laid in consecutive NVLink domains, racks and pods. Its ring crosses the widest unit its k
/// nodes do not all share: NVLink inside one multi-node domain, else its members' NICs
/// (`per_node` members of a node driving as many at once, as ring_link), divided by the rack's
/// oversubscription across racks and the pod's too across pods. The collective time over the
/// levels' probabilities is exact for its bandwidth term: the link's bytes_per_s is 1 / sum(p_l /
/// bw_l); its level is the one of the largest share of that time (what the regime of that
/// level and the variability classes see), its per-step latency the probabilities' mean.
///
/// The job waits for its slowest group of the kind: its replicas and stages meet at the
/// gradient synchronisation and the pipeline, and its data-parallel groups' reductions end the
/// step together. Its nodes hold n = job nodes / k groups on distinct node sets, each drawn as
/// above, so the probabilities are those of the slowest of n: P(all within a unit) ^ n for each
/// level (the draws taken as independent: they share the job's nodes without replacement, within
/// 0.1% of a scheduler's draws where the machine is much larger than the job; the tests).
GroupLink random_link(const HardwareSpec& hw, const ClusterSpec& cluster, int size, std::int64_t k,
                      int per_node, std::int64_t job_gpus) {
    const std::int64_t gpn = std::max(1, hw.gpus_per_node);
    const std::int64_t machine_gpus = cluster.total_gpus > 0 ? cluster.total_gpus : job_gpus;
    const std::int64_t machine = std::max(k, (machine_gpus + gpn - 1) / gpn);
    const std::int64_t domain = domain_gpus(hw) / gpn;  // nodes per NVLink domain
    const std::int64_t rack = std::max(1, cluster.nodes_per_rack);
    const std::int64_t pod = rack * std::max(1, cluster.racks_per_pod);
    const std::int64_t job_nodes = std::min(machine, std::max(k, (job_gpus + gpn - 1) / gpn));
    const double groups = double(std::max<std::int64_t>(1, job_nodes / k));
    const auto slowest = [&](double p) { return std::pow(p, groups); };
    const double in_domain = domain > 1 ? slowest(all_in_one_unit(machine, domain, k)) : 0.0;
    const double in_rack = std::max(in_domain, slowest(all_in_one_unit(machine, rack, k)));
    const double in_pod = std::max(in_rack, slowest(all_in_one_unit(machine, pod, k)));
    const double nic = std::min(hw.nvlink_bytes_per_s, per_node * hw.nic_bytes_per_s);
    struct Level {
        LinkLevel level;
        double p, bytes_per_s, latency_s;
    };
    const Level levels[] = {
        {LinkLevel::nvlink, in_domain, hw.nvlink_bytes_per_s, hw.nvlink_latency_s},
        {LinkLevel::nic, in_rack - in_domain, nic, hw.nic_latency_s},
        {LinkLevel::rack, in_pod - in_rack, oversubscribed(nic, cluster, LinkLevel::rack),
         hw.nic_latency_s},
        {LinkLevel::pod, 1.0 - in_pod, oversubscribed(nic, cluster, LinkLevel::pod),
         hw.nic_latency_s}};
    GroupLink link;
    link.size = size;
    double seconds_per_byte = 0, latency = 0, largest = -1;
    for (const Level& l : levels) {
        if (!(l.p > 0)) continue;
        // a level without bandwidth (no NIC) takes forever, as ring_link's 0 does
        const double share =
            l.bytes_per_s > 0 ? l.p / l.bytes_per_s : std::numeric_limits<double>::infinity();
        seconds_per_byte += share;
        latency += l.p * l.latency_s;
        if (share > largest) largest = share, link.level = l.level;
    }
    link.bytes_per_s = std::isinf(seconds_per_byte) ? 0.0 : 1.0 / seconds_per_byte;
    link.latency_s = latency;
    link.intra_latency_s = hw.nvlink_latency_s;
    link.domains = link.level == LinkLevel::nvlink
                       ? 1
                       : int((size + std::max(1, per_node) - 1) / std::max(1, per_node));
    return link;
}

/// Nodes that hold the members of a group of `size` ranks `stride` GPUs apart (ranks in order
/// inside each node).
std::int64_t member_nodes(const HardwareSpec& hw, int size, std::int64_t stride) {
    const std::int64_t gpn = std::max(1, hw.gpus_per_node);
    if (stride >= gpn) return size;
    return (std::int64_t{size} * stride + gpn - 1) / gpn;
}

GroupLink group_link(const HardwareSpec& hw, const ClusterSpec& cluster, int size, int stride,
                     std::int64_t job_gpus) {
    const std::int64_t span = std::int64_t{size} * stride;
    const int per_domain = std::min(members_per_domain(size, stride, domain_gpus(hw)),
                                    straddling_cap(hw, span, stride));
    return ring_link(hw, cluster, size, span, per_domain, job_gpus);
}

}  // namespace

GroupLink group_link(const HardwareSpec& hw, const ClusterSpec& cluster, int size, int stride) {
    return group_link(hw, cluster, size, stride, 0);
}

GroupLink group_link(const HardwareSpec& hw, const ClusterSpec& cluster, const DesignPoint& point,
                     ParallelDim dim) {
    const int size = dim_size(point, dim), stride = dim_stride(point, dim);
    const std::int64_t nodes = member_nodes(hw, size, stride);
    if (point.placement.kind == PlacementKind::random && size > 1 && nodes > 1) {
        return random_link(hw, cluster, size, nodes,
                           members_per_domain(size, stride, std::max(1, hw.gpus_per_node)),
                           point.gpus());
    }
    return group_link(hw, cluster, size, stride, point.gpus());
}

GroupLink group_link(const HardwareSpec& hw, const ClusterSpec& cluster, const DesignPoint& point,
                     ParallelDim a, ParallelDim b) {
    const int na = dim_size(point, a), nb = dim_size(point, b);
    if (na <= 1) return group_link(hw, cluster, point, b);
    if (nb <= 1) return group_link(hw, cluster, point, a);
    const int sa = dim_stride(point, a), sb = dim_stride(point, b);
    if (point.placement.kind == PlacementKind::random) {
        // the members' nodes: the inner dim's members per node times the outer dim's nodes
        const int inner = sa < sb ? na : nb, inner_stride = std::min(sa, sb);
        const int outer = sa < sb ? nb : na, outer_stride = std::max(sa, sb);
        const std::int64_t gpn = std::max(1, hw.gpus_per_node);
        const int per_node =
            int(std::min<std::int64_t>(std::int64_t{members_per_domain(inner, inner_stride, gpn)} *
                                           members_per_domain(outer, outer_stride, gpn),
                                       gpn));
        const std::int64_t nodes = std::int64_t{outer_stride} >= gpn
                                       ? std::int64_t{outer} * member_nodes(hw, inner, inner_stride)
                                       : member_nodes(hw, outer, outer_stride);
        if (nodes > 1) return random_link(hw, cluster, na * nb, nodes, per_node, point.gpus());
    }
    const std::int64_t domain = domain_gpus(hw);
    // the placement order nests the dims: the outer one's stride is at least the inner's extent
    const std::int64_t span = std::max(std::int64_t{na} * sa, std::int64_t{nb} * sb);
    const int per_domain = std::min(
        {std::int64_t{members_per_domain(na, sa, domain)} * members_per_domain(nb, sb, domain),
         domain, std::int64_t{straddling_cap(hw, span, std::min(sa, sb))}});
    return ring_link(hw, cluster, na * nb, span, int(per_domain), point.gpus());
}

int nvlink_domain_gpus(const HardwareSpec& hw) { return std::max(1, hw.nvlink_domain_gpus()); }

ExpertGroup expert_group(const HardwareSpec& hw, const ClusterSpec& cluster,
                         const DesignPoint& point, int size, int stride, bool ring) {
    ExpertGroup g;
    g.size = size;
    const int st = dim_stride(point, ParallelDim::tp), sc = dim_stride(point, ParallelDim::cp),
              sd = dim_stride(point, ParallelDim::dp);
    const std::int64_t domain = nvlink_domain_gpus(hw);
    std::int64_t lo = 0, hi = 0, first_domain = 0;
    std::vector<std::int64_t> seen, nodes;
    const std::int64_t gpn = std::max(1, hw.gpus_per_node);
    std::int64_t first_node = 0;
    int per_node = 0;  // members on member 0's node
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
        if (j == 0) first_node = gpu / gpn;
        if (gpu / gpn == first_node) ++per_node;
        if (std::find(nodes.begin(), nodes.end(), gpu / gpn) == nodes.end()) {
            nodes.push_back(gpu / gpn);
        }
    }
    g.domains = int(seen.size());
    const std::int64_t span = hi - lo + 1;
    // the level from the domains spanned; a ring drives per_domain NICs at once (group_link),
    // the all-to-all each GPU's own NIC share
    const std::int64_t level_span =
        g.domains > 1 ? std::max<std::int64_t>(span, domain + 1) : std::min(span, domain);
    g.link = ring_link(hw, cluster, size, level_span, ring ? g.per_domain : 1, point.gpus());
    if (point.placement.kind == PlacementKind::random && nodes.size() > 1) {
        // random_link: its nodes a random subset of the machine's; the domains it meets with them
        g.link = random_link(hw, cluster, size, std::int64_t(nodes.size()), ring ? per_node : 1,
                             point.gpus());
        if (g.link.level != LinkLevel::nvlink && domain > gpn) {
            g.per_domain = per_node;
            g.domains = int(nodes.size());
        }
    }
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
