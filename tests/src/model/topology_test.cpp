#include "src/model/topology.hpp"

#include <gtest/gtest.h>

#include "model_test_helpers.hpp"

namespace {

using prism::DesignPoint;
using prism::LinkLevel;
using prism::ParallelDim;

TEST(Topology, TensorParallelInsideANodeUsesNvlink) {
    const auto e = prism::test::small_experiment();
    DesignPoint p;
    p.tp = 8;
    p.dp = 4;

    const auto link = prism::group_link(e.hardware[0], e.cluster, p, ParallelDim::tp);

    EXPECT_EQ(link.level, LinkLevel::nvlink);
    EXPECT_EQ(link.bytes_per_s, 300e9);
    EXPECT_EQ(link.latency_s, 3e-6);
    EXPECT_EQ(link.size, 8);
}

TEST(Topology, DataParallelOutsideFullTensorGroupsUsesOneNicPerRank) {
    const auto e = prism::test::small_experiment();
    DesignPoint p;
    p.tp = 8;
    p.dp = 4;  // stride 8: one member per node, 4 nodes

    const auto link = prism::group_link(e.hardware[0], e.cluster, p, ParallelDim::dp);

    EXPECT_EQ(link.level, LinkLevel::nic);
    EXPECT_EQ(link.bytes_per_s, 25e9);
    EXPECT_EQ(link.latency_s, 10e-6);
}

TEST(Topology, MembersSharingANodeDriveTheirNicsInParallel) {
    const auto e = prism::test::small_experiment();
    DesignPoint p;
    p.tp = 2;
    p.dp = 16;  // stride 2: 4 members per node, 4 nodes

    const auto link = prism::group_link(e.hardware[0], e.cluster, p, ParallelDim::dp);

    EXPECT_EQ(link.level, LinkLevel::nic);
    EXPECT_EQ(link.bytes_per_s, 4 * 25e9);
}

TEST(Topology, GroupsBeyondARackAndAPodPayOversubscription) {
    const auto e = prism::test::small_experiment();  // 4 nodes per rack, 2 racks per pod

    const auto rack = prism::group_link(e.hardware[0], e.cluster, 8, 8);  // 8 nodes
    const auto pod = prism::group_link(e.hardware[0], e.cluster, 16, 8);  // 16 nodes

    EXPECT_EQ(rack.level, LinkLevel::rack);
    EXPECT_EQ(rack.bytes_per_s, 25e9 / 2);
    EXPECT_EQ(pod.level, LinkLevel::pod);
    EXPECT_EQ(pod.bytes_per_s, 25e9 / 2 / 3);
}

TEST(Topology, PlacementOrderSetsTheStride) {
    DesignPoint p;
    p.tp = 4;
    p.cp = 2;
    p.pp = 3;
    p.dp = 5;
    p.placement.order = {ParallelDim::dp, ParallelDim::tp, ParallelDim::pp, ParallelDim::cp};

    EXPECT_EQ(prism::dim_stride(p, ParallelDim::dp), 1);
    EXPECT_EQ(prism::dim_stride(p, ParallelDim::tp), 5);
    EXPECT_EQ(prism::dim_stride(p, ParallelDim::pp), 20);
    EXPECT_EQ(prism::dim_stride(p, ParallelDim::cp), 60);
}

TEST(Topology, RandomPlacementUsesTheDefaultOrder) {
    DesignPoint p;
    p.tp = 4;
    p.cp = 2;
    p.pp = 3;
    p.dp = 5;
    p.placement.kind = prism::PlacementKind::random;
    p.placement.order = {ParallelDim::dp, ParallelDim::tp, ParallelDim::pp, ParallelDim::cp};

    EXPECT_EQ(prism::dim_stride(p, ParallelDim::tp), 1);
    EXPECT_EQ(prism::dim_stride(p, ParallelDim::cp), 4);
    EXPECT_EQ(prism::dim_stride(p, ParallelDim::pp), 8);
    EXPECT_EQ(prism::dim_stride(p, ParallelDim::dp), 24);
}

TEST(Topology, SingleRankGroupIsLocal) {
    const auto e = prism::test::small_experiment();

    EXPECT_EQ(prism::group_link(e.hardware[0], e.cluster, 1, 8).level, LinkLevel::local);
}

}  // namespace
