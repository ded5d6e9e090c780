#include "src/timing/flat_pipeline.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

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

TEST(FlatPipeline, MakespanPairEqualsTwoMakespans) {
    const FlatPipeline flat(PipelineShape{4, 2, 8});
    stochastic::Stream rng(5, 6, stochastic::StreamKind::test, 0);
    std::vector<double> a(flat.size()), ta(flat.size()), b(flat.size()), tb(flat.size());
    for (auto* v : {&a, &ta, &b, &tb}) {
        for (auto& d : *v) d = rng.uniform();
    }
    std::vector<double> f1(flat.size()), f2(flat.size());

    double end_a = 0, end_b = 0;
    flat.makespan_pair(a.data(), ta.data(), 0.5, b.data(), tb.data(), 0.25, f1.data(), f2.data(),
                       end_a, end_b);

    EXPECT_EQ(end_a, flat.makespan(a.data(), ta.data(), 0.5, f1.data()));
    EXPECT_EQ(end_b, flat.makespan(b.data(), tb.data(), 0.25, f2.data()));
}

TEST(FlatPipeline, StageScaledMakespansEqualOneMakespanPerScaledStage) {
    for (const PipelineShape shape :
         {PipelineShape{1, 1, 1}, PipelineShape{4, 2, 8}, PipelineShape{16, 1, 16}}) {
        const FlatPipeline flat(shape);
        stochastic::Stream rng(9, 10, stochastic::StreamKind::test, 0);
        std::vector<double> d(flat.size()), sc(flat.size()), t(flat.size()), fk(flat.size());
        for (size_t i = 0; i < flat.size(); ++i) {
            sc[i] = rng.uniform();
            d[i] = sc[i] + 0.3 * rng.uniform();
            t[i] = 0.2 * rng.uniform();
        }
        const std::vector<double> factors{1.02, 1.5, 2.0};
        const int lanes = 1 + 3 * shape.stages;
        std::vector<double> fin(flat.size() * lanes), end(lanes);
        flat.makespan_stage_scaled(d.data(), sc.data(), t.data(), 0.4, factors.data(), 3,
                                   fin.data(), end.data());
        EXPECT_EQ(end[0], flat.makespan(d.data(), t.data(), 0.4, fk.data()));
        for (int s = 0; s < shape.stages; ++s) {
            for (int j = 0; j < 3; ++j) {
                std::vector<double> dk = d;
                for (size_t i = 0; i < flat.size(); ++i) {
                    if (flat.ops()[i].stage == s) dk[i] = d[i] + (factors[j] - 1.0) * sc[i];
                }
                EXPECT_EQ(end[1 + 3 * s + j], flat.makespan(dk.data(), t.data(), 0.4, fk.data()))
                    << "stage " << s << " factor " << factors[j];
            }
        }
    }
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
