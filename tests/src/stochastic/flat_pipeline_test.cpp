#include "src/timing/flat_pipeline.hpp"

#include <gtest/gtest.h>

#include <algorithm>
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

}  // namespace
}  // namespace prism::timing
