#include "src/model/step_profile.hpp"

#include <algorithm>

#include "src/timing/pipeline.hpp"

namespace prism {

double deterministic_time(const SegmentList& segments) {
    double total = 0;
    for (const auto& seg : segments) {
        double longest = 0;
        for (const auto& op : seg.ops) longest = std::max(longest, op.time_s);
        total += longest;
    }
    return total;
}

double StepProfile::chunk_forward_s(int stage, int chunk) const {
    double t = layers_per_chunk * deterministic_time(layer_forward);
    if (stage == 0 && chunk == 0) t += deterministic_time(embedding_forward);
    if (stage == stages - 1 && chunk == chunks - 1) t += deterministic_time(head_forward);
    return t;
}

double StepProfile::chunk_backward_s(int stage, int chunk) const {
    double t = layers_per_chunk * deterministic_time(layer_backward);
    if (stage == 0 && chunk == 0) t += deterministic_time(embedding_backward);
    if (stage == stages - 1 && chunk == chunks - 1) t += deterministic_time(head_backward);
    return t;
}

double deterministic_step_time(const StepProfile& profile) {
    const timing::PipelineShape shape{profile.stages, profile.chunks, profile.microbatches};
    const auto schedule = timing::build_schedule(shape);
    timing::PipelineDurations durations;
    durations.op_s = [&](int stage, const timing::PipeOp& op) {
        return op.backward ? profile.chunk_backward_s(stage, op.chunk)
                           : profile.chunk_forward_s(stage, op.chunk);
    };
    durations.transfer_s = [&](int, int, const timing::PipeOp&) { return profile.p2p.time_s; };
    std::vector<double> start(profile.stages, 0.0);
    start[0] = deterministic_time(profile.dataloader);
    const auto finish = timing::evaluate_pipeline(shape, schedule, durations, start);
    const double exposed_sync =
        std::max(0.0, deterministic_time(profile.dp_sync) - profile.dp_overlap_s);
    const double tail = exposed_sync + deterministic_time(profile.optimizer);
    return *std::max_element(finish.begin(), finish.end()) + tail;
}

}  // namespace prism
