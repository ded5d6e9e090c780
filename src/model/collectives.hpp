#pragma once

// Alpha-beta cost of NCCL-style ring collectives (Thakur et al. 2005; NCCL's bus-bandwidth
// convention). `bytes` is always the full buffer of one rank (the reduced tensor for AllReduce,
// the gathered tensor for AllGather, the input for ReduceScatter); `bytes_per_s` is the
// achieved per-rank link bandwidth (link bandwidth x collective efficiency).

#include "src/model/spec.hpp"
#include "src/model/topology.hpp"

namespace prism {

/// Ring AllReduce: 2 (n-1)/n * bytes / bw + 2 (n-1) alpha. 0 for n <= 1.
double allreduce_time_s(double bytes, int n, double bytes_per_s, double latency_s);
/// Ring AllGather / ReduceScatter: (n-1)/n * bytes / bw + (n-1) alpha. 0 for n <= 1.
double allgather_time_s(double bytes, int n, double bytes_per_s, double latency_s);
double reducescatter_time_s(double bytes, int n, double bytes_per_s, double latency_s);
/// One point-to-point transfer: bytes / bw + alpha.
double p2p_time_s(double bytes, double bytes_per_s, double latency_s);

/// Latency of a ring of `steps` steps of which `inter_steps` cross a NIC: NCCL's ring model
/// (src/graph/tuning.cc, ncclTopoTuneModel: (nsteps - nInterSteps) intraLat + nInterSteps
/// interLat, nInterSteps = nNodes - 1 for AllGather / ReduceScatter, 2 (nNodes - 1) for
/// AllReduce). A chunk's path round the ring crosses each node's edge once; its other hops are
/// NVLink's.
double ring_latency_s(int steps, int inter_steps, double intra_latency_s, double inter_latency_s);

/// NCCL's double binary tree AllReduce over `link` (several NVLink domains), as NCCL's tuning
/// model prices it (src/graph/tuning.cc): the bus bandwidth at kTreeBandwidthFraction of the
/// ring's and an algorithm bandwidth of half of it (2 bytes / (0.92 bw)), the latency
/// 2 ((n / n_nodes - 1) intraLat + floor(log2 n_nodes) interLat). collective_time_s takes the
/// cheaper of it and the ring, as NCCL's tuner chooses between them: the ring's latency grows
/// with the nodes, the tree's with their logarithm.
inline constexpr double kTreeBandwidthFraction = 0.92;
double tree_allreduce_time_s(double bytes, const GroupLink& link, double bytes_per_s);

/// Time of collective `cls` (allreduce, allgather, reducescatter, p2p) over `link`, with the
/// hardware's collective efficiency applied to the bandwidth; a ring over several NVLink domains
/// (link.domains > 1) pays the NIC's latency only on the steps that cross a domain's edge
/// (ring_latency_s), an AllReduce over several domains the cheaper of the ring and the tree
/// (tree_allreduce_time_s), a p2p transfer one step of link.latency_s. Throws ModelError for a
/// non-communication class.
double collective_time_s(KernelClass cls, double bytes, const GroupLink& link, double efficiency);

}  // namespace prism
