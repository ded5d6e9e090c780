// Points that differ only in learning_rate or checkpoint_interval run the same training steps:
// they share their random streams (DesignSpace::stream_index) and the sweep evaluates their
// step-time distribution once (StepCache). These tests hold the shared results to what each
// point gives when evaluated alone, with no cache, in any order.

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "explorer/chunk_evaluator.hpp"
#include "explorer/design_space.hpp"
#include "io/experiment_loader.hpp"
#include "src/model/evaluate.hpp"

namespace prism::explorer {
namespace {

// learning_rate first (slowest) and checkpoint_interval last (fastest): the points sharing
// steps are both far apart and adjacent in index order.
Experiment lr_ckpt_experiment(const std::string& method) {
    return io::parse_experiment(R"(
[experiment]
name = "lr-ckpt"
seed = 3

[model]
preset = "llama3-8b"

[training]
global_batch = 64
total_tokens = 1.0e11

[hardware.h100]
preset = "h100-sxm"

[defaults]
recompute = "full"
zero_stage = 1

[space]
learning_rate = [1e-4, 3e-4, 6e-4]
gpus = [32]
tp = [2, 4]
pp = [1, 2]
checkpoint_interval = [1800, 3600]

[failures]
enabled = true
checkpoint_policy = "fixed"
checkpoint_bandwidth = "100 GB/s"

[[failures.cause]]
name = "gpu"
scope = "gpu"
mtbf = "2000 h"

[variability]
preset = "prism-paper"

[evaluation]
method = ")" + method + R"("
samples = 64
)",
                                "lr-ckpt.toml");
}

std::size_t column(const Evaluator& ev, const std::string& name) {
    const auto& s = ev.schema();
    for (std::size_t k = 0; k < s.size(); ++k) {
        if (s[k].name == name) return k;
    }
    ADD_FAILURE() << "no metric " << name;
    return 0;
}

bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t k = 0; k < a.size(); ++k) {
        if (!(a[k] == b[k] || (std::isnan(a[k]) && std::isnan(b[k])))) return false;
    }
    return true;
}

TEST(DesignSpace, StreamIndexSetsOnlyLearningRateAndCheckpointToTheirFirstValue) {
    const Experiment e = lr_ckpt_experiment("analytic");
    const DesignSpace space(e);
    ASSERT_EQ(space.size(), 3u * 1u * 2u * 2u * 2u);
    EXPECT_EQ(space.points_per_stream(), 3u * 2u);
    std::set<std::uint64_t> streams;
    for (std::uint64_t i = 0; i < space.size(); ++i) {
        auto digits = space.digits(i);
        digits[0] = 0;  // learning_rate
        digits[4] = 0;  // checkpoint_interval
        EXPECT_EQ(space.stream_index(i), space.index_of(digits)) << i;
        streams.insert(space.stream_index(i));
        // the stream's point runs the same steps
        const DesignPoint a = space.point(i), b = space.point(space.stream_index(i));
        EXPECT_EQ(a.tp, b.tp);
        EXPECT_EQ(a.pp, b.pp);
        EXPECT_EQ(a.dp, b.dp);
    }
    EXPECT_EQ(streams.size(), space.size() / 6);
}

TEST(DesignSpace, StreamIndexIsTheIndexWithoutStepNeutralDimensions) {
    Experiment e = lr_ckpt_experiment("analytic");
    e.space.dimensions.erase(e.space.dimensions.begin());  // learning_rate
    e.space.dimensions.pop_back();                         // checkpoint_interval
    const DesignSpace space(e);
    EXPECT_EQ(space.points_per_stream(), 1u);
    for (std::uint64_t i = 0; i < space.size(); ++i) EXPECT_EQ(space.stream_index(i), i);
}

void check_shared_steps(const std::string& method) {
    const Experiment e = lr_ckpt_experiment(method);
    const DesignSpace space(e);
    const Evaluator evaluator(e);
    // the sweep's way: one chunk evaluator (one cache) over all indices
    const ChunkEvaluator chunk(space, evaluator);
    const ChunkResult all = chunk(WorkOrder{0, 0, space.size()});
    ASSERT_EQ(all.rows.size(), space.size());  // nothing filtered in this space
    // each point alone: no cache, its streams at its stream index, in reverse order
    std::vector<PointResult> alone(space.size());
    for (std::uint64_t i = space.size(); i-- > 0;) {
        alone[i] = evaluator.evaluate(space.point(i), i, space.stream_index(i), nullptr);
    }
    std::set<std::uint64_t> ok_streams;
    std::size_t ok_points = 0;
    for (std::uint64_t i = 0; i < space.size(); ++i) {
        const PointResult& r = all.rows[i];
        ASSERT_EQ(r.index, i);
        EXPECT_EQ(r.status, alone[i].status) << i;
        EXPECT_TRUE(same_values(r.values, alone[i].values)) << "point " << i;
        if (r.status == PointStatus::ok) {
            ++ok_points;
            ok_streams.insert(space.stream_index(i));
        }
    }
    ASSERT_GT(ok_points, 0u);
    // one distribution per stream index, the other points from the cache
    EXPECT_EQ(chunk.step_cache().misses(), ok_streams.size());
    EXPECT_EQ(chunk.step_cache().hits(), ok_points - ok_streams.size());

    // the step metrics are those of the stream's point; the run metrics follow the interval
    const std::size_t p95 = column(evaluator, "step_time_p95_s");
    const std::size_t mean = column(evaluator, "step_time_mean_s");
    const std::size_t ckpt = column(evaluator, "checkpoint_interval_s");
    const std::size_t run = column(evaluator, "run_time_p50_days");
    bool interval_matters = false;
    for (std::uint64_t i = 0; i < space.size(); ++i) {
        const std::uint64_t s = space.stream_index(i);
        if (all.rows[i].status != PointStatus::ok) continue;
        EXPECT_EQ(all.rows[i].values[p95], all.rows[s].values[p95]) << i;
        EXPECT_EQ(all.rows[i].values[mean], all.rows[s].values[mean]) << i;
        const DesignPoint pi = space.point(i), ps = space.point(s);
        if (pi.checkpoint_interval_s == ps.checkpoint_interval_s) {
            // a learning rate alone changes nothing of the run
            EXPECT_TRUE(same_values(all.rows[i].values, all.rows[s].values)) << i;
        } else {
            EXPECT_EQ(all.rows[i].values[ckpt], pi.checkpoint_interval_s) << i;
            interval_matters =
                interval_matters || all.rows[i].values[run] != all.rows[s].values[run];
        }
    }
    EXPECT_TRUE(interval_matters) << "the checkpoint interval should change the run time";
}

TEST(StepCache, SharedStepsGiveEveryPointWhatItGivesAloneAnalytic) {
    check_shared_steps("analytic");
}

TEST(StepCache, SharedStepsGiveEveryPointWhatItGivesAloneMonteCarlo) {
    check_shared_steps("montecarlo");
}

TEST(StepCache, AnEntryServesOnlyAPointWithTheSameSteps) {
    // a stream index reused for another configuration (a caller's mistake) is not a hit
    const Experiment e = lr_ckpt_experiment("analytic");
    const DesignSpace space(e);
    const Evaluator evaluator(e);
    StepCache cache;
    const PointResult a = evaluator.evaluate(space.point(0), 0, 0, &cache);
    const std::uint64_t other = space.index_of({0, 0, 1, 1, 0});  // tp 2, pp 2
    const PointResult b = evaluator.evaluate(space.point(other), other, 0, &cache);
    const PointResult b_alone = evaluator.evaluate(space.point(other), other, 0, nullptr);
    EXPECT_EQ(cache.hits(), 0u);
    EXPECT_EQ(cache.misses(), 2u);
    EXPECT_TRUE(same_values(b.values, b_alone.values));
    EXPECT_FALSE(same_values(a.values, b.values));
}

}  // namespace
}  // namespace prism::explorer
