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
