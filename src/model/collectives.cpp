#include "src/model/collectives.hpp"

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

double collective_time_s(KernelClass cls, double bytes, const GroupLink& link, double efficiency) {
    const double bw = link.bytes_per_s * efficiency;
    switch (cls) {
        case KernelClass::allreduce:
            return allreduce_time_s(bytes, link.size, bw, link.latency_s);
        case KernelClass::allgather:
            return allgather_time_s(bytes, link.size, bw, link.latency_s);
        case KernelClass::reducescatter:
            return reducescatter_time_s(bytes, link.size, bw, link.latency_s);
        case KernelClass::p2p:
            return p2p_time_s(bytes, bw, link.latency_s);
        default:
            break;
    }
    throw ModelError(std::string("collective_time_s: ") + kKernelClassNames[int(cls)] +
                     " is not a collective");
}

}  // namespace prism
