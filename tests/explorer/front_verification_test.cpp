// Front verification verifies once the front points that share a step-time law (equal design
// points but for the ZeRO stage, equal step profiles: at dp 1 ZeRO stages 0-2 are one step).
// The shared figures must be what the duplicate's own verification gives on the same random
// streams, bit for bit.

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "explorer/design_space.hpp"
#include "explorer/front_verification.hpp"
#include "io/experiment_loader.hpp"
#include "src/model/evaluate.hpp"

namespace prism::explorer {
namespace {

Experiment zero_stage_experiment() {
    return io::parse_experiment(R"(
[experiment]
name = "zero-stages"
seed = 5

[model]
preset = "llama3-8b"

[training]
global_batch = 64

[hardware.h100]
preset = "h100-sxm"

[defaults]
gpus = 16
recompute = "full"

[space]
tp = [8, 4]
pp = [2]
zero_stage = [0, 1, 2, 3]

[variability]
preset = "prism-paper"

[evaluation]
method = "analytic"
samples = 200
)",
                                "zero_stages.toml");
}

TEST(FrontVerification, PointsOfOneLawShareTheVerificationTheyWouldEachGet) {
    const Experiment e = zero_stage_experiment();
    const DesignSpace space(e);
    std::vector<std::uint64_t> front;
    for (std::uint64_t i = 0; i < space.size(); ++i) {
        if (!space.decode(i).filtered) front.push_back(i);
    }
    ASSERT_EQ(front.size(), 8u);
    const auto rep = same_law_as(e, space, front);
    ASSERT_EQ(rep.size(), front.size());
    int shared = 0;
    for (std::size_t k = 0; k < front.size(); ++k) {
        const auto pk = space.decode(front[k]).point;
        const auto pj = space.decode(front[rep[k]]).point;
        ASSERT_LE(rep[k], k);
        if (rep[k] == k) continue;
        ++shared;
        SCOPED_TRACE(k);
        // one law: the duplicate verified on its representative's streams gives the
        // representative's figures bit for bit
        EXPECT_EQ(pk.tp, pj.tp);
        EXPECT_NE(pk.zero_stage, pj.zero_stage);
        const auto stream = space.stream_index(front[rep[k]]);
        const auto own = verify_point(e, pk, stream);
        const auto theirs = verify_point(e, pj, stream);
        EXPECT_EQ(own.ks, theirs.ks);
        EXPECT_EQ(own.analytic_p95_s, theirs.analytic_p95_s);
        EXPECT_EQ(own.mc_mean_s, theirs.mc_mean_s);
        EXPECT_EQ(own.mc_p99_s, theirs.mc_p99_s);
    }
    // tp 8, pp 2 on 16 GPUs is dp 1: ZeRO stages 0, 1 and 2 shard nothing, one law
    int dp1_shared = 0;
    for (std::size_t k = 0; k < front.size(); ++k) {
        const auto p = space.decode(front[k]).point;
        if (p.dp == 1 && (p.zero_stage == 1 || p.zero_stage == 2) && rep[k] != k) ++dp1_shared;
    }
    EXPECT_EQ(dp1_shared, 2);
    EXPECT_GE(shared, 2);
}

}  // namespace
}  // namespace prism::explorer
