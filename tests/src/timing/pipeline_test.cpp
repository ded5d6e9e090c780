#include "src/timing/pipeline.hpp"

#include <algorithm>

#include <gtest/gtest.h>

#include "src/common/error.hpp"
#include "src/model/step_profile.hpp"

namespace prism::timing {
namespace {

double makespan(const PipelineShape& shape, double f, double b, double transfer = 0) {
    PipelineDurations d;
    d.op_s = [&](int, const PipeOp& op) { return op.backward ? b : f; };
    d.transfer_s = [&](int, int, const PipeOp&) { return transfer; };
    const auto finish = evaluate_pipeline(shape, build_schedule(shape), d);
    return *std::max_element(finish.begin(), finish.end());
}

TEST(Pipeline, OneFOneBMatchesTheClosedForm) {
    // Uniform stages, no transfer: (m + p - 1)(F + B) (Narayanan et al. SC'21, section 2.2.1).
    for (int p : {1, 2, 4, 8}) {
        for (int m : {1, 3, 8, 32}) {
            const double t = makespan({p, 1, m}, 1.0, 2.0);

            EXPECT_DOUBLE_EQ(t, (m + p - 1) * 3.0) << "p=" << p << " m=" << m;
        }
    }
}

TEST(Pipeline, InterleavedBubbleShrinksByTheNumberOfChunks) {
    // v chunks of F/v, B/v each: m (F + B) + (p - 1)(F + B) / v (SC'21, section 2.2.2).
    for (int p : {2, 4}) {
        for (int v : {2, 3}) {
            for (int m : {p, 2 * p, 4 * p}) {
                const double t = makespan({p, v, m}, 1.0 / v, 2.0 / v);

                EXPECT_NEAR(t, m * 3.0 + (p - 1) * 3.0 / v, 1e-12)
                    << "p=" << p << " v=" << v << " m=" << m;
            }
        }
    }
}

TEST(Pipeline, EveryOpOfEveryMicrobatchIsScheduledOnce) {
    const PipelineShape shape{4, 2, 8};

    const auto schedule = build_schedule(shape);

    for (const auto& ops : schedule) {
        EXPECT_EQ(ops.size(), static_cast<std::size_t>(2 * 2 * 8));
        int forwards = 0;
        for (const auto& op : ops) forwards += op.backward ? 0 : 1;
        EXPECT_EQ(forwards, 16);
    }
}

TEST(Pipeline, TransfersAddToTheCriticalPathOfTheFill) {
    // p = 2, m = 1: F on stage 0, transfer, F and B on stage 1, transfer, B on stage 0.
    const double t = makespan({2, 1, 1}, 1.0, 2.0, 0.5);

    EXPECT_DOUBLE_EQ(t, 1.0 + 0.5 + 1.0 + 2.0 + 0.5 + 2.0);
}

TEST(Pipeline, InterleavingNeedsMicrobatchesMultipleOfStages) {
    try {
        build_schedule({4, 2, 6});
        FAIL() << "expected ModelError";
    } catch (const ModelError& e) {
        EXPECT_STREQ(e.what(),
                     "pipeline: interleaved schedule needs microbatches (6) to be a multiple of "
                     "pp (4)");
    }
}

TEST(StepProfile, DeterministicStepAddsExposedSyncAndOptimizerToThePipeline) {
    StepProfile prof;
    prof.stages = 2;
    prof.microbatches = 4;
    prof.layers_per_chunk = 3;
    prof.layer_forward = {Segment{{Op{KernelClass::gemm, 0.1, 1, LinkLevel::local}}}};
    prof.layer_backward = {Segment{{Op{KernelClass::gemm, 0.2, 1, LinkLevel::local},
                                    Op{KernelClass::allgather, 0.25, 1, LinkLevel::nic}}}};
    prof.dp_sync = {Segment{{Op{KernelClass::allreduce, 1.0, 1, LinkLevel::nic}}}};
    prof.dp_overlap_s = 0.4;
    prof.optimizer = {Segment{{Op{KernelClass::optimizer, 0.05, 1, LinkLevel::local}}}};

    const double t = deterministic_step_time(prof);

    // chunk F = 0.3, B = 3 * max(0.2, 0.25) = 0.75; (m + p - 1)(F + B) + (1.0 - 0.4) + 0.05
    EXPECT_NEAR(t, 5 * 1.05 + 0.6 + 0.05, 1e-12);
}

TEST(StepProfile, DeterministicStepOfManyMicrobatchesFollowsTheClosedForm) {
    // (m + p - 1)(F + B) with equal stages (SC'21 section 2.2.1), here through the periodic
    // evaluation that skips the repeated rounds (m = 1000, p = 8: 992 steady rounds)
    StepProfile prof;
    prof.stages = 8;
    prof.microbatches = 1000;
    prof.layers_per_chunk = 2;
    prof.layer_forward = {Segment{{Op{KernelClass::gemm, 0.1, 1, LinkLevel::local}}}};
    prof.layer_backward = {Segment{{Op{KernelClass::gemm, 0.2, 1, LinkLevel::local}}}};

    const double t = deterministic_step_time(prof);

    EXPECT_NEAR(t, 1007 * 0.6, 1e-12 * t);
}

TEST(Pipeline, UnequalStagesByHand) {
    // p = 2, m = 2, stage 0 (F 1, B 2), stage 1 (F 2, B 4), no transfers. Stage 0 runs F1 F2 B1
    // B2, stage 1 F1 B1 F2 B2: S0 F1 [0,1], F2 [1,2]; S1 F1 [1,3], B1 [3,7]; S0 B1 [7,9];
    // S1 F2 [7,9], B2 [9,13]; S0 B2 [13,15].
    const PipelineShape shape{2, 1, 2};
    PipelineDurations d;
    d.op_s = [](int stage, const PipeOp& op) { return (op.backward ? 2.0 : 1.0) * (stage + 1); };
    d.transfer_s = [](int, int, const PipeOp&) { return 0.0; };

    const auto finish = evaluate_pipeline(shape, build_schedule(shape), d);

    EXPECT_DOUBLE_EQ(finish[0], 15.0);
    EXPECT_DOUBLE_EQ(finish[1], 13.0);
}

TEST(StepProfile, UnevenStagesTimeLikeTheEventDrivenSchedule) {
    // Llama 3's split shape: one layer fewer on the first and the last stage; the flat form of
    // deterministic_step_time against evaluate_pipeline (event-driven) with per-stage durations
    for (const int v : {1, 2}) {
        StepProfile prof;
        prof.stages = 4;
        prof.chunks = v;
        prof.microbatches = 8;
        const std::vector<int> stages{6, 8, 8, 6};
        for (int layers : stages)
            prof.uneven_chunk_layers.insert(prof.uneven_chunk_layers.end(), v, layers / v);
        prof.layers_per_chunk = 8 / v;
        prof.layer_forward = {Segment{{Op{KernelClass::gemm, 0.1, 1, LinkLevel::local}}}};
        prof.layer_backward = {Segment{{Op{KernelClass::gemm, 0.2, 1, LinkLevel::local}}}};
        prof.embedding_forward = {
            Segment{{Op{KernelClass::elementwise, 0.05, 1, LinkLevel::local}}}};
        prof.head_forward = {Segment{{Op{KernelClass::gemm, 0.15, 1, LinkLevel::local}}}};
        prof.head_backward = {Segment{{Op{KernelClass::gemm, 0.3, 1, LinkLevel::local}}}};
        prof.p2p = Op{KernelClass::p2p, 0.01, 1, LinkLevel::nvlink};
        const PipelineShape shape{4, v, 8};
        PipelineDurations d;
        d.op_s = [&](int stage, const PipeOp& op) {
            const double layers = stages[stage] / double(v);
            const bool first = stage == 0 && op.chunk == 0;
            const bool last = stage == 3 && op.chunk == v - 1;
            return op.backward ? layers * 0.2 + (last ? 0.3 : 0.0)
                               : layers * 0.1 + (first ? 0.05 : 0.0) + (last ? 0.15 : 0.0);
        };
        d.transfer_s = [](int, int, const PipeOp&) { return 0.01; };
        const auto finish = evaluate_pipeline(shape, build_schedule(shape), d);

        const double t = deterministic_step_time(prof);

        EXPECT_NEAR(t, *std::max_element(finish.begin(), finish.end()), 1e-12) << "v=" << v;
        EXPECT_EQ(prof.chunk_layers(0, v - 1), 6 / v);
        EXPECT_EQ(prof.chunk_layers(1, 0), 8 / v);
    }
}

}  // namespace
}  // namespace prism::timing
