#include "src/model/collectives.hpp"

#include <algorithm>
#include <cmath>

#include "src/common/error.hpp"

namespace prism {

double allreduce_time_s(double bytes, int n, double bytes_per_s, double latency_s) {
    if (n <= 1) return 0;
    return 2.0 * (n - 1) / n * bytes / bytes_per_s + 2.0 * (n - 1) * latency_s;
}

double allgather_time_s(double bytes, int n, double bytes_per_s, double latency_s) {
    if (n <= 1) return 0;
    return double(n - 1) / n * bytes / bytes_per_s + (n - 1) * latency_s;
}

double reducescatter_time_s(double bytes, int n, double bytes_per_s, double latency_s) {
    return allgather_time_s(bytes, n, bytes_per_s, latency_s);
}

double p2p_time_s(double bytes, double bytes_per_s, double latency_s) {
    return bytes / bytes_per_s + latency_s;
}

double ring_latency_s(int steps, int inter_steps, double intra_latency_s, double inter_latency_s) {
    inter_steps = std::clamp(inter_steps, 0, std::max(0, steps));
    return double(steps - inter_steps) * intra_latency_s + double(inter_steps) * inter_latency_s;
}

namespace {

/// Ring latency of a collective of `rounds` passes (2 for AllReduce) over `link`.
double link_ring_latency_s(const GroupLink& link, int rounds) {
    const int n = link.size;
    if (link.domains <= 1) return rounds * double(n - 1) * link.latency_s;
    return ring_latency_s(rounds * (n - 1), rounds * (std::min(link.domains, n) - 1),
                          link.intra_latency_s, link.latency_s);
}

}  // namespace

double tree_allreduce_time_s(double bytes, const GroupLink& link, double bytes_per_s) {
    const int nodes = std::min(link.domains, link.size);
    if (link.size <= 1 || nodes <= 1) return 0;
    const int per_node = link.size / nodes;
    const double latency = 2.0 * ((per_node - 1) * link.intra_latency_s +
                                  std::floor(std::log2(double(nodes))) * link.latency_s);
    return 2.0 * bytes / (kTreeBandwidthFraction * bytes_per_s) + latency;
}

double collective_time_s(KernelClass cls, double bytes, const GroupLink& link, double efficiency) {
    const double bw = link.bytes_per_s * efficiency;
    switch (cls) {
        case KernelClass::allreduce: {
            if (link.size <= 1) return 0;
            const double ring =
                allreduce_time_s(bytes, link.size, bw, 0) + link_ring_latency_s(link, 2);
            if (link.domains <= 1) return ring;
            return std::min(ring, tree_allreduce_time_s(bytes, link, bw));
        }
        case KernelClass::allgather:
        case KernelClass::reducescatter:
            if (link.size <= 1) return 0;
            return allgather_time_s(bytes, link.size, bw, 0) + link_ring_latency_s(link, 1);
        case KernelClass::p2p:
            return p2p_time_s(bytes, bw, link.latency_s);
        default:
            break;
    }
    throw ModelError(std::string("collective_time_s: ") + kKernelClassNames[int(cls)] +
                     " is not a collective");
}

}  // namespace prism
