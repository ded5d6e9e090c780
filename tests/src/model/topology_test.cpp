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
    // its ring visits 4 nodes: 4 members each, joined by NVLink steps (3 us) inside a node
    EXPECT_EQ(link.domains, 4);
    EXPECT_EQ(link.intra_latency_s, 3e-6);
    EXPECT_EQ(link.latency_s, 10e-6);
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

// NVLink domains of several nodes (GB200 NVL72: 4 GPUs per tray, 72 per domain), on the helper's
// links: NVLink 300 GB/s and 3 us, NIC 25 GB/s per GPU and 10 us.
prism::HardwareSpec rack_scale(int domain) {
    prism::HardwareSpec hw = prism::test::small_experiment().hardware[0];
    hw.gpus_per_node = 4;
    hw.nvlink_domain = domain;
    return hw;
}

/// Racks large enough that no group here leaves one (no oversubscription).
prism::ClusterSpec big_racks() {
    prism::ClusterSpec c;
    c.nodes_per_rack = 64;
    c.racks_per_pod = 16;
    return c;
}

TEST(NvlinkDomain, GroupsSpanningSeveralNodesOfOneDomainUseNvlink) {
    const prism::ClusterSpec cluster = big_racks();
    DesignPoint p;
    p.tp = 8;  // two trays, 9 groups per 72-GPU domain
    p.dp = 64;

    const auto link = prism::group_link(rack_scale(72), cluster, p, ParallelDim::tp);
    const auto one_tray = prism::group_link(rack_scale(0), cluster, p, ParallelDim::tp);

    EXPECT_EQ(link.level, LinkLevel::nvlink);
    EXPECT_EQ(link.bytes_per_s, 300e9);
    EXPECT_EQ(link.latency_s, 3e-6);
    // without the domain (one 4-GPU tray): 4 members per tray drive 4 NICs, 4 x 25 GB/s
    EXPECT_EQ(one_tray.level, LinkLevel::nic);
    EXPECT_EQ(one_tray.bytes_per_s, 4 * 25e9);
    EXPECT_EQ(one_tray.latency_s, 10e-6);
}

TEST(NvlinkDomain, GroupsCrossingADomainsEdgeWaitOnTheNic) {
    const prism::ClusterSpec cluster = big_racks();
    DesignPoint p;
    p.tp = 16;  // blocks of 16 in 72: the fifth, GPUs 64-79, has 8 on each side of the edge
    p.dp = 32;
    DesignPoint one_domain = p;
    one_domain.dp = 4;  // a 64-GPU job inside one domain: no edge

    const auto crossing = prism::group_link(rack_scale(72), cluster, p, ParallelDim::tp);
    const auto inside = prism::group_link(rack_scale(72), cluster, one_domain, ParallelDim::tp);
    const auto aligned = prism::group_link(rack_scale(64), cluster, p, ParallelDim::tp);

    EXPECT_EQ(crossing.level, LinkLevel::nic);
    EXPECT_EQ(crossing.bytes_per_s, 8 * 25e9);  // gcd(72, 16) = 8 members drive the edge's NICs
    EXPECT_EQ(inside.level, LinkLevel::nvlink);
    EXPECT_EQ(aligned.level, LinkLevel::nvlink);  // 16 divides a 64-GPU domain
}

TEST(NvlinkDomain, RingsAcrossDomainsUseEveryMembersNicInADomain) {
    const prism::ClusterSpec cluster = big_racks();
    DesignPoint p;
    p.tp = 4;
    p.dp = 32;  // stride 4: 16 members in each of two 64-GPU domains
    DesignPoint uneven = p;
    uneven.dp = 36;  // 144 GPUs: the third domain holds 16 GPUs, 4 members

    const auto link = prism::group_link(rack_scale(64), cluster, p, ParallelDim::dp);
    const auto partial = prism::group_link(rack_scale(64), cluster, uneven, ParallelDim::dp);

    // hierarchical: min(NVLink, 16 NICs) = min(300, 400) GB/s, the NIC's latency
    EXPECT_EQ(link.level, LinkLevel::nic);
    EXPECT_EQ(link.bytes_per_s, 300e9);
    EXPECT_EQ(link.latency_s, 10e-6);
    // gcd(64, 144) = 16 GPUs on the edge's smaller side: 4 members, 4 x 25 GB/s
    EXPECT_EQ(partial.bytes_per_s, 4 * 25e9);
}

}  // namespace
