#include "src/timing/flat_pipeline.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "src/common/error.hpp"
#include "src/stochastic/random.hpp"

namespace prism::timing {
namespace {

TEST(FlatPipeline, MakespanEqualsEvaluatePipelineWithRandomDurations) {
    // truth: the reference DAG evaluation of pipeline.cpp with the same per-op durations
    for (const PipelineShape shape :
         {PipelineShape{1, 1, 1}, PipelineShape{4, 1, 8}, PipelineShape{8, 1, 3},
          PipelineShape{4, 2, 8}, PipelineShape{2, 3, 4}}) {
        const FlatPipeline flat(shape);
        const auto schedule = build_schedule(shape);
        stochastic::Stream rng(3, 4, stochastic::StreamKind::test, 0);
        std::vector<double> op_s(flat.size()), transfer_s(flat.size()), finish(flat.size());
        for (auto& d : op_s) d = rng.uniform();
        for (auto& d : transfer_s) d = 0.1 * rng.uniform();
        auto index_of = [&](int stage, const PipeOp& op) {
            for (size_t i = 0; i < flat.size(); ++i) {
                const auto& f = flat.ops()[i];
                if (f.stage == stage && f.chunk == op.chunk && f.microbatch == op.microbatch &&
                    f.backward == op.backward) {
                    return i;
                }
            }
            return flat.size();
        };
        PipelineDurations durations;
        durations.op_s = [&](int stage, const PipeOp& op) { return op_s[index_of(stage, op)]; };
        durations.transfer_s = [&](int, int to, const PipeOp& op) {
            return transfer_s[index_of(to, op)];
        };
        std::vector<double> start(shape.stages, 0.0);
        start[0] = 0.25;

        const auto ref = evaluate_pipeline(shape, schedule, durations, start);
        const double got = flat.makespan(op_s.data(), transfer_s.data(), 0.25, finish.data());

        EXPECT_EQ(got, *std::max_element(ref.begin(), ref.end()));
        EXPECT_EQ(flat.size(),
                  static_cast<size_t>(2 * shape.stages * shape.chunks * shape.microbatches));
    }
}

TEST(FlatPipeline, StageLanesEqualOneMakespanPerLane) {
    // uneven lanes: two unchanged lanes, then stage s gets s % 3 lanes (none for some stages),
    // each with its own delta (negative ones included)
    for (const PipelineShape shape :
         {PipelineShape{1, 1, 1}, PipelineShape{4, 2, 8}, PipelineShape{16, 1, 16}}) {
        const FlatPipeline flat(shape);
        stochastic::Stream rng(19, 20, stochastic::StreamKind::test, 0);
        std::vector<double> d(flat.size()), sc(flat.size()), t(flat.size()), fk(flat.size());
        for (size_t i = 0; i < flat.size(); ++i) {
            sc[i] = rng.uniform();
            d[i] = sc[i] + 0.3 * rng.uniform();
            t[i] = 0.2 * rng.uniform();
        }
        std::vector<std::int32_t> first{2};
        std::vector<double> delta{0.0, 0.0};
        std::vector<int> lane_stage{-1, -1};
        for (int s = 0; s < shape.stages; ++s) {
            // 16 stages: 4 more lanes each (82 in all: more than one block of lanes)
            for (int j = 0; j < s % 3 + (shape.stages >= 16 ? 4 : 0); ++j) {
                delta.push_back(rng.uniform() - 0.25);
                lane_stage.push_back(s);
            }
            first.push_back(static_cast<std::int32_t>(delta.size()));
        }
        std::vector<double> end(delta.size()), slope(delta.size(), -1.0);
        flat.makespan_stage_lanes(d.data(), sc.data(), t.data(), 0.4, first.data(), delta.data(),
                                  end.data(), slope.data());
        for (size_t k = 0; k < delta.size(); ++k) {
            auto durations = [&](double dk_delta) {
                std::vector<double> dk = d;
                for (size_t i = 0; i < flat.size(); ++i) {
                    if (flat.ops()[i].stage == lane_stage[k]) dk[i] = d[i] + dk_delta * sc[i];
                }
                return dk;
            };
            const auto dk = durations(delta[k]);
            const double at = flat.makespan(dk.data(), t.data(), 0.4, fk.data());
            EXPECT_EQ(end[k], at) << "lane " << k;
            // the slope: the derivative in delta (random durations: one critical path, so a
            // finite difference on either side gives it)
            const double h = 1e-7;
            const auto up = durations(delta[k] + h);
            const double fd = (flat.makespan(up.data(), t.data(), 0.4, fk.data()) - at) / h;
            EXPECT_NEAR(slope[k], fd, 1e-6 * std::max(1.0, fd)) << "lane " << k;
            if (lane_stage[k] < 0) {
                EXPECT_EQ(slope[k], 0.0);
            }
        }
    }
}

TEST(FlatPipeline, AffineLanesEqualOneMakespanPerLane) {
    // truth: makespan() with lane k's durations a + r_k b, transfers and start written out; 1 to
    // 4 lanes (the unused vector lanes must not leak into the used ones)
    for (const PipelineShape shape :
         {PipelineShape{1, 1, 1}, PipelineShape{4, 2, 8}, PipelineShape{8, 1, 16}}) {
        const FlatPipeline flat(shape);
        stochastic::Stream rng(23, 24, stochastic::StreamKind::test, 0);
        std::vector<double> a(flat.size()), b(flat.size()), fin(flat.size());
        for (size_t i = 0; i < flat.size(); ++i) {
            a[i] = rng.uniform();
            b[i] = 0.5 * rng.uniform();
        }
        const std::vector<double> r{0.7, 1.0, 1.9, 3.5};
        const std::vector<double> tr{0.01, 0.2, 0.05, 0.4};
        const std::vector<double> start{0.0, 0.3, 1.5, 0.1};
        for (size_t lanes = 1; lanes <= 4; ++lanes) {
            std::vector<double> end(lanes, -1.0);
            flat.makespan_affine_lanes(a.data(), b.data(), r.data(), tr.data(), start.data(), lanes,
                                       end.data());
            for (size_t k = 0; k < lanes; ++k) {
                std::vector<double> d(flat.size()), t(flat.size(), tr[k]);
                for (size_t i = 0; i < flat.size(); ++i) d[i] = a[i] + r[k] * b[i];
                EXPECT_EQ(end[k], flat.makespan(d.data(), t.data(), start[k], fin.data()))
                    << "p=" << shape.stages << " lanes " << lanes << " lane " << k;
            }
        }
    }
    std::vector<double> none(5, 0.0);
    const FlatPipeline flat(PipelineShape{2, 1, 2});
    EXPECT_THROW(flat.makespan_affine_lanes(none.data(), none.data(), none.data(), none.data(),
                                            none.data(), 5, none.data()),
                 ModelError);
}

TEST(FlatPipeline, CriticalPathIsAChainOfPredecessorsAsLongAsTheMakespan) {
    // truth: any chain of dependencies is at most the makespan long; a chain from a source op
    // to a last op whose length equals the makespan is a longest path
    for (const PipelineShape shape : {PipelineShape{1, 1, 1}, PipelineShape{4, 1, 8},
                                      PipelineShape{4, 2, 8}, PipelineShape{8, 1, 16}}) {
        const FlatPipeline flat(shape);
        stochastic::Stream rng(11, 12, stochastic::StreamKind::test, 0);
        std::vector<double> d(flat.size()), t(flat.size()), fin(flat.size());
        for (auto& x : d) x = rng.uniform();
        for (auto& x : t) x = 0.3 * rng.uniform();
        const double start = 0.7;
        const double makespan = flat.makespan(d.data(), t.data(), start, fin.data());
        const auto path = flat.critical_path(d.data(), t.data(), start, fin.data());
        ASSERT_FALSE(path.empty());
        const auto& ops = flat.ops();
        double length = 0;
        for (size_t k = 0; k < path.size(); ++k) {
            const auto i = path[k];
            length += d[i];
            if (k + 1 < path.size()) {
                const auto prev = path[k + 1];
                const bool linked =
                    ops[i].stage_prev == prev || ops[i].own_forward == prev || ops[i].input == prev;
                ASSERT_TRUE(linked) << "op " << i << " after " << prev;
                if (ops[i].input == prev && ops[i].stage_prev != prev &&
                    ops[i].own_forward != prev) {
                    length += t[i];
                }
            }
        }
        const auto first = path.back();
        if (ops[first].stage == 0 && ops[first].stage_prev < 0) length += start;
        EXPECT_NEAR(length, makespan, 1e-12 * makespan) << "p=" << shape.stages;
    }
}

TEST(FlatPipeline, LogPathsCountsTheScheduleDagPathsByBruteForce) {
    // truth: depth-first enumeration of every path from a source op to a stage's last op
    for (const PipelineShape shape :
         {PipelineShape{1, 1, 1}, PipelineShape{2, 1, 2}, PipelineShape{3, 1, 4},
          PipelineShape{2, 2, 4}, PipelineShape{4, 1, 6}}) {
        const FlatPipeline flat(shape);
        const auto& ops = flat.ops();
        std::vector<std::vector<int>> next(ops.size());
        for (size_t i = 0; i < ops.size(); ++i) {
            for (const int pred : {ops[i].stage_prev, ops[i].own_forward, ops[i].input}) {
                if (pred >= 0) next[pred].push_back(static_cast<int>(i));
            }
        }
        std::vector<bool> last(ops.size(), false);
        for (int s = 0; s < shape.stages; ++s) {
            int idx = -1;
            for (size_t i = 0; i < ops.size(); ++i) {
                if (ops[i].stage == s) idx = static_cast<int>(i);
            }
            if (idx >= 0) last[idx] = true;
        }
        double count = 0;
        auto walk = [&](auto&& self, int i) -> void {
            if (last[i]) count += 1;
            for (const int j : next[i]) self(self, j);
        };
        for (size_t i = 0; i < ops.size(); ++i) {
            const auto& op = ops[i];
            if (op.stage_prev < 0 && op.own_forward < 0 && op.input < 0) walk(walk, int(i));
        }

        EXPECT_NEAR(flat.log_paths(), std::log(count), 1e-12)
            << shape.stages << " " << shape.chunks << " " << shape.microbatches;
    }
}

}  // namespace
}  // namespace prism::timing
