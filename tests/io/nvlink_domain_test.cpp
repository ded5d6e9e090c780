// Rack-scale NVLink domains (issue 34 item 4): hardware nvlink_domain from the presets and the
// experiment file, its checks, and on gb200-nvl72 TP groups inside the 72-GPU domain timed at
// NVLink bandwidth, by hand, and cheaper than the same groups across domains.

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "io/experiment_loader.hpp"
#include "src/model/collectives.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/topology.hpp"
#include "tests/io/loader_test_helpers.hpp"

namespace {

using prism::Experiment;
using prism::io::parse_experiment;

std::string experiment(const std::string& hardware_keys, int tp) {
    // Llama 3.1 405B, bf16, a 512-GPU job: tp x pp 8 x dp
    return "[model]\npreset = \"llama3-405b\"\n[training]\nglobal_batch = 64\n"
           "flash_attention = true\naccount_for_embedding_in_pipeline_split = true\n"
           "account_for_loss_in_pipeline_split = true\n"
           "[hardware.gb]\npreset = \"gb200-nvl72\"\n" +
           hardware_keys +
           "[cluster]\nnodes_per_rack = 128\n"
           "[defaults]\ntp = " +
           std::to_string(tp) + "\npp = 8\ndp = " + std::to_string(512 / (8 * tp)) +
           "\nmicrobatch = 1\nzero_stage = 1\nrecompute = \"full\"\nsequence_parallel = true\n";
}

TEST(NvlinkDomain, PresetAndExperimentSetTheDomain) {
    const Experiment preset = parse_experiment(experiment("", 8), "exp.toml");
    const Experiment trays = parse_experiment(experiment("nvlink_domain = 4\n", 8), "exp.toml");
    const Experiment h100 = parse_experiment(
        "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n"
        "[hardware.h]\npreset = \"h100-sxm\"\n",
        "exp.toml");

    EXPECT_EQ(preset.hardware[0].gpus_per_node, 4);
    EXPECT_EQ(preset.hardware[0].nvlink_domain_gpus(), 72);
    EXPECT_EQ(trays.hardware[0].nvlink_domain_gpus(), 4);
    EXPECT_EQ(h100.hardware[0].nvlink_domain_gpus(), 8);  // the node when not given
}

TEST(NvlinkDomain, DomainMustBeAPositiveMultipleOfTheNode) {
    EXPECT_EQ(prism::test::loader_error_of(experiment("nvlink_domain = 70\n", 8)),
              "exp.toml:10:17: hardware.gb.nvlink_domain: nvlink_domain = 70 is not a multiple of "
              "gpus_per_node = 4 (an NVLink domain joins whole nodes)");
    EXPECT_EQ(prism::test::loader_error_of(experiment("nvlink_domain = 0\n", 8)),
              "exp.toml:10:17: hardware.gb.nvlink_domain: value 0 must be >= 1");
    // the preset's 72 against a node of 5 given in the experiment: reported at the preset key
    EXPECT_EQ(prism::test::loader_error_of(experiment("gpus_per_node = 5\n", 8)),
              "exp.toml:9:10: hardware.gb.nvlink_domain: nvlink_domain = 72 is not a multiple of "
              "gpus_per_node = 5 (an NVLink domain joins whole nodes)");
}

/// The TP ReduceScatter of one layer's output on `e`'s default point: s b h / cp bytes in bf16.
double tp_scatter_s(const Experiment& e) {
    const prism::HardwareSpec& hw = e.hardware[0];
    const prism::GroupLink link =
        prism::group_link(hw, e.cluster, e.defaults, prism::ParallelDim::tp);
    return prism::collective_time_s(prism::KernelClass::reducescatter, 2.0 * 8192 * 16384, link,
                                    hw.collective_efficiency);
}

TEST(NvlinkDomain, GB200TensorParallelInsideTheDomainRunsAtNvlinkSpeed) {
    for (const int tp : {8, 16}) {
        // TP 16 blocks do not tile 72 GPUs (the fifth crosses into the next rack): the job's
        // domain is 64, as a 512-GPU job on 8 racks of 16 trays (MLPerf's Carina) has it
        const std::string inside_keys = tp == 16 ? "nvlink_domain = 64\n" : "";
        const Experiment inside = parse_experiment(experiment(inside_keys, tp), "exp.toml");
        const Experiment across =
            parse_experiment(experiment("nvlink_domain = 4\n", tp), "exp.toml");

        // by hand: (n - 1) / n x bytes / (900 GB/s x eff) + (n - 1) x 3.4 us, eff the preset's
        // collective ceiling (0.8) times the default stack's factor
        const double eff = inside.hardware[0].collective_efficiency;
        EXPECT_LT(eff, 0.8);
        EXPECT_GT(eff, 0.3);
        const double bytes = 2.0 * 8192 * 16384;
        const double nvlink = (tp - 1.0) / tp * bytes / (900e9 * eff) + (tp - 1) * 3.4e-6;
        // across 4-GPU domains: 4 members per tray drive 4 NICs, min(900, 4 x 50) GB/s; of the
        // ring's tp - 1 steps tp / 4 - 1 leave a tray (9.6 us), the rest are NVLink's (3.4 us)
        const int trays = tp / 4;
        const double nic =
            (tp - 1.0) / tp * bytes / (200e9 * eff) + (tp - trays) * 3.4e-6 + (trays - 1) * 9.6e-6;
        EXPECT_NEAR(tp_scatter_s(inside), nvlink, 1e-12) << tp;
        EXPECT_NEAR(tp_scatter_s(across), nic, 1e-12) << tp;

        const double inside_step =
            prism::evaluate_deterministic(inside, inside.defaults).step_time_s;
        const double across_step =
            prism::evaluate_deterministic(across, across.defaults).step_time_s;
        EXPECT_LT(inside_step, across_step) << tp;
        std::printf(
            "  tp %2d: TP reduce-scatter %.3f ms (NVLink) vs %.3f ms (NIC); step %.2f s "
            "vs %.2f s\n",
            tp, 1e3 * nvlink, 1e3 * nic, inside_step, across_step);
    }
}

TEST(NvlinkDomain, CarinaExampleKeepsTensorContextAndPipelineGroupsOnNvlink) {
    const Experiment e = prism::io::load_experiment(std::string(PRISM_SOURCE_DIR) +
                                                    "/configs/examples/gb200_nvl72.toml");
    const prism::HardwareSpec& hw = e.hardware[0];

    const auto r = prism::evaluate_deterministic(e, e.defaults);

    EXPECT_TRUE(r.feasible) << r.reason;
    // tp 4 (one tray), cp 2 (8 GPUs), pp 8 (stride 8: 64 GPUs, the job's domain) on NVLink; the
    // d c group (stride 4 and 64 over 512 GPUs) across domains and racks (16 trays per rack, no
    // oversubscription): 2 members per domain drive 2 NICs
    using prism::ParallelDim;
    for (const ParallelDim d : {ParallelDim::tp, ParallelDim::cp, ParallelDim::pp}) {
        EXPECT_EQ(prism::group_link(hw, e.cluster, e.defaults, d).level, prism::LinkLevel::nvlink);
    }
    const auto dp = prism::group_link(hw, e.cluster, e.defaults, ParallelDim::dp, ParallelDim::cp);
    EXPECT_EQ(dp.level, prism::LinkLevel::rack);
    EXPECT_DOUBLE_EQ(dp.bytes_per_s, 2 * 50e9);
    // MLPerf v5.0 Carina, 3 runs: median step 19.31 s (docs/hardware.md); not fitted
    std::printf("  carina example: predicted step %.2f s (measured median 19.31 s)\n",
                r.step_time_s);
}

}  // namespace
