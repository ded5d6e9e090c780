#include "src/model/collectives.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace {

TEST(Collectives, RingAllReduceMatchesHandCalculation) {
    // 8 ranks, 1 GB, 100 GB/s, 5 us per step: 2 * 7/8 * 10 ms + 14 * 5 us = 17.57 ms
    EXPECT_NEAR(prism::allreduce_time_s(1e9, 8, 100e9, 5e-6), 0.01757, 1e-12);
}

TEST(Collectives, AllGatherAndReduceScatterMoveHalfOfAllReduce) {
    // 4 ranks, 400 MB, 50 GB/s, 10 us: 3/4 * 8 ms + 3 * 10 us = 6.03 ms
    EXPECT_NEAR(prism::allgather_time_s(4e8, 4, 50e9, 10e-6), 0.00603, 1e-12);
    EXPECT_NEAR(prism::reducescatter_time_s(4e8, 4, 50e9, 10e-6), 0.00603, 1e-12);
}

TEST(Collectives, SingleRankCostsNothing) {
    EXPECT_EQ(prism::allreduce_time_s(1e9, 1, 1e9, 1e-3), 0.0);
    EXPECT_EQ(prism::allgather_time_s(1e9, 1, 1e9, 1e-3), 0.0);
}

TEST(Collectives, EfficiencyScalesTheLinkBandwidth) {
    prism::GroupLink link;
    link.size = 2;
    link.bytes_per_s = 100e9;
    link.latency_s = 0;

    // 2 * 1/2 * 1 GB / (0.5 * 100 GB/s) = 20 ms
    EXPECT_NEAR(prism::collective_time_s(prism::KernelClass::allreduce, 1e9, link, 0.5), 0.02,
                1e-15);
    EXPECT_NEAR(prism::collective_time_s(prism::KernelClass::p2p, 1e9, link, 0.5), 0.02, 1e-15);
}

TEST(Collectives, ARingAcrossNodesPaysTheNicLatencyOnlyWhereItLeavesANode) {
    // NCCL's ring latency (tuning.cc): (nsteps - nInterSteps) intraLat + nInterSteps interLat.
    // 32 ranks on 4 nodes of 8, 1 GB at 100 GB/s per rank, NVLink 3 us, NIC 10 us per step.
    prism::GroupLink link;
    link.level = prism::LinkLevel::nic;
    link.size = 32;
    link.domains = 4;
    link.bytes_per_s = 100e9;
    link.latency_s = 10e-6;
    link.intra_latency_s = 3e-6;

    // AllGather: 31/32 * 10 ms + (31 - 3) * 3 us + 3 * 10 us = 9.6875 ms + 84 us + 30 us
    EXPECT_NEAR(prism::collective_time_s(prism::KernelClass::allgather, 1e9, link, 1.0),
                9.6875e-3 + 84e-6 + 30e-6, 1e-15);
    EXPECT_NEAR(prism::collective_time_s(prism::KernelClass::reducescatter, 1e9, link, 1.0),
                9.6875e-3 + 84e-6 + 30e-6, 1e-15);
    // AllReduce: twice the bytes' term, 62 steps of which 6 leave a node: 56 * 3 + 6 * 10 us
    EXPECT_NEAR(prism::collective_time_s(prism::KernelClass::allreduce, 1e9, link, 1.0),
                19.375e-3 + 168e-6 + 60e-6, 1e-15);
    // one member per node (a DP group strided past full TP groups): every step leaves a node
    link.domains = 32;
    EXPECT_NEAR(prism::collective_time_s(prism::KernelClass::allgather, 1e9, link, 1.0),
                9.6875e-3 + 31 * 10e-6, 1e-15);
    // a p2p transfer is one step over the link
    EXPECT_NEAR(prism::collective_time_s(prism::KernelClass::p2p, 1e9, link, 1.0), 10e-3 + 10e-6,
                1e-15);
}

TEST(Collectives, AnAllReduceOverManyNodesTakesNcclsTreeWhereItIsCheaper) {
    // NCCL's tuning model prices the double binary tree at 0.92 of the ring's bus bandwidth and
    // half of it as algorithm bandwidth (2 bytes / (0.92 bw)), with latency 2 ((ppn - 1) intraLat
    // + floor(log2 nodes) interLat); it runs whichever of ring and tree is cheaper.
    prism::GroupLink link;
    link.level = prism::LinkLevel::nic;
    link.bytes_per_s = 100e9;
    link.latency_s = 10e-6;
    link.intra_latency_s = 3e-6;

    // 1 GB over 4 nodes of 8: ring 19.375 ms + (56 * 3 + 6 * 10) us = 19.603 ms; tree
    // 21.739 ms + 2 (7 * 3 + 2 * 10) us = 21.821 ms: the ring
    link.size = 32;
    link.domains = 4;
    EXPECT_NEAR(prism::tree_allreduce_time_s(1e9, link, 100e9), 2e9 / 92e9 + 82e-6, 1e-15);
    EXPECT_NEAR(prism::collective_time_s(prism::KernelClass::allreduce, 1e9, link, 1.0),
                19.375e-3 + 228e-6, 1e-15);

    // 10 MB over 1,024 nodes of 8: ring 2 * 8191 / 8192 * 0.1 ms + (14336 * 3 + 2046 * 10) us
    // = 63.67 ms; tree 2e7 / 0.92e11 s + 2 (7 * 3 + 10 * 10) us = 0.459 ms: the tree
    link.size = 8192;
    link.domains = 1024;
    EXPECT_NEAR(prism::collective_time_s(prism::KernelClass::allreduce, 1e7, link, 1.0),
                2e7 / 92e9 + 242e-6, 1e-15);
    // the same bytes over 8 GPUs of one NVLink domain: a ring, no tree
    link.level = prism::LinkLevel::nvlink;
    link.size = 8;
    link.domains = 1;
    link.latency_s = 3e-6;
    EXPECT_NEAR(prism::collective_time_s(prism::KernelClass::allreduce, 1e7, link, 1.0),
                2.0 * 7 / 8 * 1e7 / 100e9 + 14 * 3e-6, 1e-15);
}

TEST(Collectives, ComputeClassIsRejectedWithItsName) {
    prism::GroupLink link;
    link.size = 2;
    link.bytes_per_s = 1e9;

    try {
        prism::collective_time_s(prism::KernelClass::gemm, 1.0, link, 1.0);
        FAIL() << "no exception";
    } catch (const prism::ModelError& e) {
        EXPECT_STREQ(e.what(), "collective_time_s: gemm is not a collective");
    }
}

}  // namespace
