// Uneven pipeline splits (issue #25 item 2): layers per stage, per-stage memory, the most
// loaded stage deciding feasibility, and the step time of unequal stages.

#include "src/model/pipeline_split.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "model_test_helpers.hpp"
#include "src/common/error.hpp"
#include "src/model/design_space.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/flops.hpp"
#include "src/model/memory.hpp"
#include "src/timing/pipeline.hpp"

namespace {

using prism::DesignPoint;

prism::ModelSpec layers(int n) {
    prism::ModelSpec m;
    m.layers = n;
    return m;
}

std::vector<int> chunk_layers_or_empty(const prism::ModelSpec& m, const prism::TrainingSpec& tr,
                                       int pp, int v) {
    return prism::stage_split_problem(m, tr, pp, v) ? std::vector<int>{}
                                                    : prism::chunk_layers(m, tr, pp, v);
}

TEST(PipelineSplit, Llama3OneLayerFewerOnTheFirstAndLastOfSixteenStages) {
    prism::TrainingSpec tr;
    tr.first_stage_layers = 7;
    tr.last_stage_layers = 7;

    const auto split = prism::stage_layers(layers(126), tr, 16, 1);

    std::vector<int> expected(16, 8);
    expected.front() = expected.back() = 7;
    EXPECT_EQ(split, expected);
    EXPECT_FALSE(prism::is_even_split(split));
}

TEST(PipelineSplit, EmbeddingAndLossSlotsGiveLlama3SplitOnEightAndSixteenStages) {
    prism::TrainingSpec tr;
    tr.account_for_embedding_in_pipeline_split = true;
    tr.account_for_loss_in_pipeline_split = true;

    const auto sixteen = prism::stage_layers(layers(126), tr, 16, 1);
    const auto eight = prism::stage_layers(layers(126), tr, 8, 1);

    std::vector<int> expected16(16, 8), expected8(8, 16);
    expected16.front() = expected16.back() = 7;
    expected8.front() = expected8.back() = 15;
    EXPECT_EQ(sixteen, expected16);
    EXPECT_EQ(eight, expected8);
    EXPECT_EQ(*prism::stage_split_problem(layers(126), tr, 12, 1),
              "pp * interleave does not divide layers plus the embedding and loss slots");
    // interleaved (Megatron-Bridge's 405B recipe: pp 8, vp 8): the slots are in the first and
    // the last virtual stage, 2 layers per chunk otherwise
    const auto chunks = prism::chunk_layers(layers(126), tr, 8, 8);
    std::vector<int> expected_chunks(64, 2);
    expected_chunks.front() = expected_chunks.back() = 1;
    EXPECT_EQ(chunks, expected_chunks);
    EXPECT_EQ(prism::stage_layers(layers(126), tr, 8, 8), expected8);
}

TEST(PipelineSplit, OneEndGivenTheOtherStagesShareTheRest) {
    prism::TrainingSpec tr;
    tr.first_stage_layers = 2;

    EXPECT_EQ(prism::stage_layers(layers(11), tr, 4, 1), (std::vector<int>{2, 3, 3, 3}));
    // pp = 1: a single stage holds everything, the ends are ignored
    EXPECT_EQ(prism::stage_layers(layers(11), tr, 1, 1), (std::vector<int>{11}));
}

TEST(PipelineSplit, ImpossibleSplitsSayWhy) {
    prism::TrainingSpec ends;
    ends.first_stage_layers = 7;
    prism::TrainingSpec list;
    list.layers_per_stage = {3, 5};

    EXPECT_EQ(*prism::stage_split_problem(layers(126), {}, 16, 1),
              "pp * interleave does not divide layers");
    EXPECT_EQ(*prism::stage_split_problem(layers(126), ends, 16, 1),
              "first/last stage layers leave a remainder the other stages cannot share");
    EXPECT_EQ(*prism::stage_split_problem(layers(8), list, 4, 1),
              "layers_per_stage does not have pp entries");
    EXPECT_EQ(*prism::stage_split_problem(layers(9), list, 2, 1),
              "layers_per_stage does not sum to layers");
    EXPECT_EQ(*prism::stage_split_problem(layers(8), list, 2, 2),
              "interleave does not divide a stage's layers");
    EXPECT_EQ(chunk_layers_or_empty(layers(8), list, 2, 1), (std::vector<int>{3, 5}));
    EXPECT_FALSE(prism::stage_split_problem(layers(8), list, 2, 1).has_value());
    try {
        prism::stage_layers(layers(126), ends, 16, 1);
        FAIL() << "expected ModelError";
    } catch (const prism::ModelError& e) {
        EXPECT_STREQ(e.what(),
                     "first/last stage layers leave a remainder the other stages cannot share "
                     "(layers 126, pp 16, interleave 1)");
    }
}

TEST(PipelineSplit, FilterReasonUsesTheSplit) {
    auto e = prism::test::small_experiment();  // 8 layers
    e.training.layers_per_stage = {1, 3, 3, 1};
    DesignPoint p;
    p.pp = 4;

    EXPECT_FALSE(prism::filter_reason(e, p).has_value());
    p.pp = 2;
    EXPECT_EQ(*prism::filter_reason(e, p), "layers_per_stage does not have pp entries");
}

TEST(PipelineSplit, EveryStageHasItsMemoryAndTheMostLoadedDecides) {
    auto e = prism::test::small_experiment();  // h 1024, 16 heads, s 1024, V 32000, MHA
    e.training.layers_per_stage = {1, 3, 3, 1};
    DesignPoint p;
    p.pp = 4;
    p.tp = 2;

    const auto r = prism::evaluate_deterministic(e, p);

    // 16 microbatches of 1; 1F1B holds p - s in flight on stage s; per layer s b h (10 + 24/t +
    // 5 a s / (h t)) = 1024 * 1024 * 62 bytes (Korthikanti et al. 2022)
    const double act = 1024.0 * 1024 * 62;
    const double h = 1024, layer = 12 * h * h + 13 * h, vocab = 32000 * h;
    const int in_flight[] = {4, 3, 2, 1};
    const int stage_layers[] = {1, 3, 3, 1};
    ASSERT_EQ(r.breakdown.stage_memory.size(), 4u);
    for (int s = 0; s < 4; ++s) {
        const auto& mem = r.breakdown.stage_memory[s];
        const double ends = (s == 0 || s == 3) ? vocab : 0;  // embedding, output layer
        EXPECT_DOUBLE_EQ(mem.weights_bytes, 2 * (stage_layers[s] * layer + ends) / 2) << s;
        EXPECT_DOUBLE_EQ(mem.activations_bytes, act * stage_layers[s] * in_flight[s]) << s;
    }
    // the last stage also holds the fp32 logits and their gradient: 2 x 4 x s V / t
    EXPECT_DOUBLE_EQ(r.breakdown.stage_memory[3].temporary_bytes, 8.0 * 1024 * 32000 / 2);
    // stage 1: 3 layers x 3 in flight beats stage 0's 1 x 4 plus the embedding
    EXPECT_EQ(r.breakdown.memory_stage, 1);
    EXPECT_EQ(r.memory.total_bytes(), r.breakdown.stage_memory[1].total_bytes());
}

TEST(PipelineSplit, UnevenStepIsTheScheduleOfUnequalStages) {
    auto e = prism::test::small_experiment();
    e.model.vocab = 8;  // negligible head and embedding
    e.hardware[0].gpu.gemm.half_flops = 0;
    e.hardware[0].gpu.hbm_bytes_per_s = 1e30;
    e.hardware[0].kernel_launch_s = 0;
    e.hardware[0].nvlink_bytes_per_s = 1e30;
    e.hardware[0].nvlink_latency_s = 0;
    e.training.layers_per_stage = {1, 3, 3, 1};
    DesignPoint p;
    p.pp = 4;

    const auto r = prism::evaluate_deterministic(e, p);

    // the event-driven 1F1B schedule (timing::evaluate_pipeline) with stage s taking its
    // layers' forward and backward
    const double f = r.breakdown.layer_forward_s, b = r.breakdown.layer_backward_s;
    const int split[] = {1, 3, 3, 1};
    prism::timing::PipelineDurations d;
    d.op_s = [&](int s, const prism::timing::PipeOp& op) {
        return split[s] * (op.backward ? b : f);
    };
    d.transfer_s = [](int, int, const prism::timing::PipeOp&) { return 0.0; };
    const prism::timing::PipelineShape shape{4, 1, 16};
    const auto finish =
        prism::timing::evaluate_pipeline(shape, prism::timing::build_schedule(shape), d);
    // tolerance: the vocab-8 head and embedding remain (~1e-5 of a stage)
    EXPECT_NEAR(r.step_time_s / *std::max_element(finish.begin(), finish.end()), 1.0, 1e-4);
    EXPECT_EQ(r.breakdown.stage, 1);
}

// Megatron-Core's pipeline layout (--pipeline-model-parallel-layout): the decoder layers of every
// virtual stage in model order, virtual stage k on rank k % pp as its chunk k / pp. DeepSeek-V3's
// 61 layers in Megatron-Bridge's layouts (its DeepSeek-V3 recipe): "Et*4|(t*4|)*14tmL" at pp 4 x
// vp 4, "Et|(tt|)*30mL" at pp 8 x vp 4 (the first and last virtual stage may hold no decoder
// layer: the embedding, the MTP layer and the loss take their slots).
TEST(PipelineSplit, ChunkLayoutListsEveryVirtualStageInModelOrder) {
    prism::TrainingSpec tr;
    tr.layers_per_chunk.assign(16, 4);
    tr.layers_per_chunk.back() = 1;
    // rank 0 holds virtual stages 0, 4, 8, 12; rank 3 holds 3, 7, 11, 15 (the last: 1 layer)
    std::vector<int> expected(16, 4);
    expected.back() = 1;
    EXPECT_EQ(prism::chunk_layers(layers(61), tr, 4, 4), expected);
    EXPECT_EQ(prism::stage_layers(layers(61), tr, 4, 4), (std::vector<int>{16, 16, 16, 13}));

    prism::TrainingSpec h100;
    h100.layers_per_chunk.assign(32, 2);
    h100.layers_per_chunk.front() = 1;
    h100.layers_per_chunk.back() = 0;
    const std::vector<int> chunks = prism::chunk_layers(layers(61), h100, 8, 4);
    EXPECT_EQ(std::vector<int>(chunks.begin(), chunks.begin() + 4), (std::vector<int>{1, 2, 2, 2}));
    EXPECT_EQ(std::vector<int>(chunks.end() - 4, chunks.end()), (std::vector<int>{2, 2, 2, 0}));
    EXPECT_EQ(prism::stage_layers(layers(61), h100, 8, 4),
              (std::vector<int>{7, 8, 8, 8, 8, 8, 8, 6}));

    EXPECT_EQ(*prism::stage_split_problem(layers(61), tr, 4, 2),
              "layers_per_chunk does not have pp * interleave entries");
    EXPECT_EQ(*prism::stage_split_problem(layers(60), tr, 4, 4),
              "layers_per_chunk does not sum to layers");
    prism::TrainingSpec hole = tr;
    hole.layers_per_chunk[5] = 0;
    hole.layers_per_chunk[6] = 8;
    EXPECT_EQ(*prism::stage_split_problem(layers(61), hole, 4, 4),
              "a pipeline stage or model chunk has no layers");
    prism::TrainingSpec empty_stage;  // pp 2, no interleaving: the last stage holds nothing
    empty_stage.layers_per_chunk = {8, 0};
    EXPECT_EQ(*prism::stage_split_problem(layers(8), empty_stage, 2, 1),
              "a pipeline stage or model chunk has no layers");
}

TEST(PipelineSplit, InterleavedChunksOfUnequalLayersRunTheInterleavedSchedule) {
    auto e = prism::test::small_experiment();  // 8 layers, 16 microbatches of 1
    e.model.vocab = 8;                         // negligible head and embedding
    e.hardware[0].gpu.gemm.half_flops = 0;
    e.hardware[0].gpu.hbm_bytes_per_s = 1e30;
    e.hardware[0].kernel_launch_s = 0;
    e.hardware[0].nvlink_bytes_per_s = 1e30;
    e.hardware[0].nvlink_latency_s = 0;
    e.training.layers_per_chunk = {1, 3, 3, 1};  // rank 0: chunks of 1 and 3, rank 1: 3 and 1
    DesignPoint p;
    p.pp = 2;
    p.interleave = 2;

    const auto r = prism::evaluate_deterministic(e, p);

    // the event-driven interleaved 1F1B schedule (timing::evaluate_pipeline) with chunk c of
    // stage s taking its layers' forward and backward
    const double f = r.breakdown.layer_forward_s, b = r.breakdown.layer_backward_s;
    const int split[2][2] = {{1, 3}, {3, 1}};
    prism::timing::PipelineDurations d;
    d.op_s = [&](int s, const prism::timing::PipeOp& op) {
        return split[s][op.chunk] * (op.backward ? b : f);
    };
    d.transfer_s = [](int, int, const prism::timing::PipeOp&) { return 0.0; };
    const prism::timing::PipelineShape shape{2, 2, 16};
    const auto finish =
        prism::timing::evaluate_pipeline(shape, prism::timing::build_schedule(shape), d);
    // tolerance: the vocab-8 head and embedding and the p2p latencies remain (~1e-4 of a step)
    EXPECT_NEAR(r.step_time_s / *std::max_element(finish.begin(), finish.end()), 1.0, 3e-4);
}

}  // namespace
