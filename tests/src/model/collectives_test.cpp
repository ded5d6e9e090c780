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
