// Random placement's links (PlacementKind::random: the job's nodes drawn at random from the
// machine, ranks in order inside each node; src/model/topology.hpp random_link): a group on k
// nodes has them on a random k-subset of the machine's nodes, so it crosses racks and pods more
// often than the ordered layout's consecutive nodes. Hand calculations on the helpers' cluster
// (8 GPUs a node, NVLink 300 GB/s and 3 us, NIC 25 GB/s and 10 us, 4 nodes a rack, 2 racks a
// pod, racks oversubscribed 2x and pods 3x more), and the probabilities against an enumeration
// of every k-subset.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "model_test_helpers.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/topology.hpp"

namespace {

using prism::DesignPoint;
using prism::LinkLevel;
using prism::ParallelDim;
using prism::PlacementKind;

/// tp 8 x dp 4: the DP group one member a node on 4 nodes (ordered: one rack, the NIC).
DesignPoint tp8_dp4(PlacementKind kind) {
    DesignPoint p;
    p.tp = 8;
    p.dp = 4;
    p.placement.kind = kind;
    return p;
}

/// Brute force: the share of the k-subsets of `machine` nodes (racks of 4, pods of 8) that lie in
/// one rack, and in one pod.
std::pair<double, double> enumerate(int machine, int k) {
    std::vector<int> pick(std::size_t(machine), 0);
    std::fill(pick.end() - k, pick.end(), 1);
    double all = 0, rack = 0, pod = 0;
    do {
        std::vector<int> nodes;
        for (int i = 0; i < machine; ++i) {
            if (pick[std::size_t(i)]) nodes.push_back(i);
        }
        const bool one_rack = nodes.front() / 4 == nodes.back() / 4;
        const bool one_pod = nodes.front() / 8 == nodes.back() / 8;
        all += 1;
        rack += one_rack;
        pod += one_pod;
    } while (std::next_permutation(pick.begin(), pick.end()));
    return {rack / all, pod / all};
}

TEST(RandomPlacementLinks, AJobThatFillsTheMachineKeepsItsOrderedLinks) {
    auto e = prism::test::small_experiment();  // total_gpus 0: the machine is the job's 4 nodes
    const auto ordered = prism::group_link(e.hardware[0], e.cluster,
                                           tp8_dp4(PlacementKind::ordered), ParallelDim::dp);
    const auto random = prism::group_link(e.hardware[0], e.cluster, tp8_dp4(PlacementKind::random),
                                          ParallelDim::dp);
    EXPECT_EQ(random.level, ordered.level);
    EXPECT_EQ(random.level, LinkLevel::nic);
    EXPECT_DOUBLE_EQ(random.bytes_per_s, ordered.bytes_per_s);
    EXPECT_DOUBLE_EQ(random.latency_s, ordered.latency_s);
    // a group inside a node keeps NVLink whatever the nodes
    const auto tp = prism::group_link(e.hardware[0], e.cluster, tp8_dp4(PlacementKind::random),
                                      ParallelDim::tp);
    EXPECT_EQ(tp.level, LinkLevel::nvlink);
    EXPECT_EQ(tp.bytes_per_s, 300e9);
}

TEST(RandomPlacementLinks, FourNodesOfEightCrossRacksOfFourAlmostAlways) {
    auto e = prism::test::small_experiment();
    e.cluster.total_gpus = 64;  // 8 nodes: 2 racks, 1 pod
    const auto [rack, pod] = enumerate(8, 4);
    EXPECT_DOUBLE_EQ(rack, 2.0 / 70);  // 2 racks of C(4, 4) of C(8, 4) subsets
    EXPECT_DOUBLE_EQ(pod, 1.0);
    const auto link = prism::group_link(e.hardware[0], e.cluster, tp8_dp4(PlacementKind::random),
                                        ParallelDim::dp);
    // one NIC a member: 25 GB/s inside a rack, 12.5 across racks
    const double expected = 1.0 / (rack / 25e9 + (1 - rack) / 12.5e9);
    EXPECT_NEAR(link.bytes_per_s / expected, 1.0, 1e-12);
    EXPECT_EQ(link.level, LinkLevel::rack);
    EXPECT_NEAR(link.latency_s, 10e-6, 1e-18);
    // ordered, the 4 nodes are one rack
    const auto ordered = prism::group_link(e.hardware[0], e.cluster,
                                           tp8_dp4(PlacementKind::ordered), ParallelDim::dp);
    EXPECT_EQ(ordered.level, LinkLevel::nic);
    EXPECT_EQ(ordered.bytes_per_s, 25e9);
}

TEST(RandomPlacementLinks, OnTwoPodsMostGroupsPayBothOversubscriptions) {
    auto e = prism::test::small_experiment();
    e.cluster.total_gpus = 128;  // 16 nodes: 4 racks, 2 pods
    const auto [rack, pod] = enumerate(16, 4);
    EXPECT_NEAR(rack, 4.0 / 1820, 1e-15);
    EXPECT_NEAR(pod, 140.0 / 1820, 1e-15);
    const auto link = prism::group_link(e.hardware[0], e.cluster, tp8_dp4(PlacementKind::random),
                                        ParallelDim::dp);
    const double expected =
        1.0 / (rack / 25e9 + (pod - rack) / 12.5e9 + (1 - pod) / (25e9 / 2 / 3));
    EXPECT_NEAR(link.bytes_per_s / expected, 1.0, 1e-12);
    EXPECT_EQ(link.level, LinkLevel::pod);

    // the DP reduction of the step follows: the same point, ZeRO-1, reduce-scatter of fp32
    // gradients and gather of bf16 weights, each a ring of 4 at 0.8 x the link's bandwidth
    e.training.overlap_param_gather = false;
    DesignPoint p = tp8_dp4(PlacementKind::random);
    p.zero_stage = 1;
    p.microbatch = 4;
    DesignPoint q = p;
    q.placement.kind = PlacementKind::ordered;
    const auto r = prism::evaluate_deterministic(e, p);
    const auto o = prism::evaluate_deterministic(e, q);
    const double stage =
        (8 * prism::test::kLayerParams + prism::test::kVocab * prism::test::kH) / 8;
    const auto ring = [&](double bytes, double bw) {
        return 0.75 * bytes / (0.8 * bw) + 3 * 10e-6;
    };
    EXPECT_NEAR(r.breakdown.dp_sync_exposed_s,
                ring(4 * stage, expected) + ring(2 * stage, expected), 1e-9);
    EXPECT_NEAR(o.breakdown.dp_sync_exposed_s, ring(4 * stage, 25e9) + ring(2 * stage, 25e9), 1e-9);
    EXPECT_GT(r.step_time_s, o.step_time_s);
}

TEST(RandomPlacementLinks, TraysOfAnNvlinkDomainDrawnApartLoseNvlink) {
    // GB200-like: 4 GPUs a tray, 72 a domain (18 trays); tp 8 on two trays
    auto e = prism::test::small_experiment();
    e.hardware[0].gpus_per_node = 4;
    e.hardware[0].nvlink_domain = 72;
    e.cluster.nodes_per_rack = 18;
    e.cluster.racks_per_pod = 16;
    e.cluster.rack_oversubscription = 1;
    e.cluster.total_gpus = 144;  // 36 trays: 2 domains (racks)
    DesignPoint p;
    p.tp = 8;
    p.dp = 18;
    const auto ordered = prism::group_link(e.hardware[0], e.cluster, p, ParallelDim::tp);
    EXPECT_EQ(ordered.level, LinkLevel::nvlink);
    p.placement.kind = PlacementKind::random;
    const auto random = prism::group_link(e.hardware[0], e.cluster, p, ParallelDim::tp);
    // a group's two trays share a domain with probability 2 C(18, 2) / C(36, 2) = 306 / 630; else
    // the 4 members of a tray drive their 4 NICs (100 GB/s) across the racks (not oversubscribed
    // here); the job waits for the slowest of its 18 groups, all within domains with probability
    // (306 / 630)^18 (the draws as independent)
    const double same = std::pow(306.0 / 630, 18);
    EXPECT_NEAR(random.bytes_per_s / (1.0 / (same / 300e9 + (1 - same) / 100e9)), 1.0, 1e-12);
    EXPECT_EQ(random.level, LinkLevel::rack);
    EXPECT_NEAR(random.latency_s, same * 3e-6 + (1 - same) * 10e-6, 1e-18);

    // on a machine of 20 such domains (pods of 16 racks: 288 trays and 72, pods 3x
    // oversubscribed), the 2-domain job's 18 groups are rarely all joined either, and one of
    // them almost surely crosses pods
    e.cluster.total_gpus = 1440;
    const auto big = prism::group_link(e.hardware[0], e.cluster, p, ParallelDim::tp);
    const double pairs = 360.0 * 359 / 2;
    const double one = std::pow(20 * 153.0 / pairs, 18);
    const double pod = std::pow((288.0 * 287 / 2 + 72.0 * 71 / 2) / pairs, 18);
    EXPECT_NEAR(
        big.bytes_per_s / (1.0 / (one / 300e9 + (pod - one) / 100e9 + (1 - pod) / (100e9 / 3))),
        1.0, 1e-12);
    EXPECT_EQ(big.level, LinkLevel::pod);
}

// The slowest of a job's groups against a scheduler's draws: 128 nodes (racks of 16, pods of 64:
// 2 pods, racks 2x and pods 3x more oversubscribed), a job of 8 nodes drawn at random in random
// order, tp 16 (two nodes a group, 8 NICs a member node: 200 GB/s) x dp 4: four groups, the step
// paced by the slowest. 100,000 draws of the job's nodes without replacement; the mean of the
// slowest group's seconds per byte is the link's 1 / bytes_per_s within 1% (the model draws the
// groups as independent). The mean group's (the link before model 2026.11.29.9) is 32% faster.
TEST(RandomPlacementLinks, TheJobWaitsForItsSlowestGroupAsAScheduledJobDoes) {
    auto e = prism::test::small_experiment();
    e.cluster.total_gpus = 1024;
    e.cluster.nodes_per_rack = 16;
    e.cluster.racks_per_pod = 4;
    DesignPoint p;
    p.tp = 16;
    p.dp = 4;
    p.placement.kind = PlacementKind::random;
    const auto link = prism::group_link(e.hardware[0], e.cluster, p, ParallelDim::tp);

    const double rack_bw = 200e9, pod_bw = 200e9 / 2, top_bw = 200e9 / 6;
    std::vector<int> nodes(128);
    std::iota(nodes.begin(), nodes.end(), 0);
    std::mt19937_64 rng(2026);
    const int draws = 100000;
    double slowest_sum = 0, mean_sum = 0;
    for (int d = 0; d < draws; ++d) {
        std::shuffle(nodes.begin(), nodes.end(), rng);  // the job: the first 8, in drawn order
        double slowest = 0, mean = 0;
        for (int g = 0; g < 4; ++g) {
            const int a = nodes[std::size_t(2 * g)], b = nodes[std::size_t(2 * g + 1)];
            const double bw = a / 16 == b / 16 ? rack_bw : a / 64 == b / 64 ? pod_bw : top_bw;
            slowest = std::max(slowest, 1 / bw);
            mean += 0.25 / bw;
        }
        slowest_sum += slowest;
        mean_sum += mean;
    }
    const double scheduled = slowest_sum / draws;
    EXPECT_NEAR(1 / link.bytes_per_s / scheduled, 1.0, 0.01);
    EXPECT_EQ(link.level, LinkLevel::pod);
    EXPECT_LT(mean_sum / draws / scheduled, 0.75);  // what the mean group would have given
}

// An expert-parallel group over two nodes (ep 16 of 8-GPU nodes): its all-to-all leaves each
// node through each GPU's own NIC; drawn at random from 16 nodes (racks of 4, pods of 8) the two
// share a rack with probability 4 C(4, 2) / C(16, 2) = 0.2, a pod with 2 C(8, 2) / C(16, 2).
TEST(RandomPlacementLinks, ExpertGroupsAcrossNodesFollowTheDraw) {
    auto e = prism::test::small_moe_experiment();
    e.cluster.total_gpus = 128;
    DesignPoint p;
    p.dp = 16;
    p.ep = 16;
    const auto ordered = prism::expert_group(e.hardware[0], e.cluster, p, 16, 1, false);
    EXPECT_EQ(ordered.link.level, LinkLevel::nic);
    EXPECT_EQ(ordered.link.bytes_per_s, 25e9);
    p.placement.kind = PlacementKind::random;
    const auto random = prism::expert_group(e.hardware[0], e.cluster, p, 16, 1, false);
    // the job is this one group (16 GPUs on 2 nodes): nothing slower to wait for
    const double rack = 24.0 / 120, pod = 56.0 / 120;
    const double expected = 1.0 / (rack / 25e9 + (pod - rack) / 12.5e9 + (1 - pod) / (25e9 / 6));
    EXPECT_NEAR(random.link.bytes_per_s / expected, 1.0, 1e-12);
    EXPECT_EQ(random.link.level, LinkLevel::pod);
    EXPECT_EQ(random.per_domain, ordered.per_domain);  // 8 members a node either way
}

// A machine without NICs (single-node hardware) cannot join nodes: ordered and random alike.
TEST(RandomPlacementLinks, NodesWithoutNicsStayUnjoined) {
    auto e = prism::test::small_experiment();
    e.hardware[0].nic_bytes_per_s = 0;
    e.cluster.total_gpus = 64;
    const auto ordered = prism::group_link(e.hardware[0], e.cluster,
                                           tp8_dp4(PlacementKind::ordered), ParallelDim::dp);
    const auto random = prism::group_link(e.hardware[0], e.cluster, tp8_dp4(PlacementKind::random),
                                          ParallelDim::dp);
    EXPECT_EQ(ordered.bytes_per_s, 0.0);
    EXPECT_EQ(random.bytes_per_s, 0.0);
}

}  // namespace
