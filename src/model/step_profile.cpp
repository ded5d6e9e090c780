#include "src/model/step_profile.hpp"

#include <algorithm>
#include <vector>

#include "src/timing/periodic_pipeline.hpp"

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
    const int dense = chunk_dense_layers(stage, chunk);
    double t = (chunk_layers(stage, chunk) - dense) * deterministic_time(layer_forward);
    if (dense > 0) t += dense * deterministic_time(dense_layer_forward);
    if (stage == 0 && chunk == 0) t += deterministic_time(embedding_forward);
    if (stage == stages - 1 && chunk == chunks - 1) t += deterministic_time(head_forward);
    return t;
}

double StepProfile::chunk_backward_s(int stage, int chunk) const {
    const int dense = chunk_dense_layers(stage, chunk);
    double t = (chunk_layers(stage, chunk) - dense) * deterministic_time(layer_backward);
    if (dense > 0) t += dense * deterministic_time(dense_layer_backward);
    if (stage == 0 && chunk == 0) t += deterministic_time(embedding_backward);
    if (stage == stages - 1 && chunk == chunks - 1) t += deterministic_time(head_backward);
    return t;
}

double deterministic_step_time(const StepProfile& profile) {
    // every microbatch's op of one (stage, chunk, direction) takes the same time: the periodic
    // evaluation of the schedule (equal to the op-by-op DAG to rounding, tested), whose cost
    // does not grow with the microbatches
    const timing::PipelineShape shape{profile.stages, profile.chunks, profile.microbatches};
    const auto pipe = timing::cached_periodic_pipeline(shape);
    const int v = profile.chunks;
    thread_local std::vector<double> op_s;
    op_s.resize(static_cast<size_t>(pipe->classes()));
    for (int s = 0; s < profile.stages; ++s) {
        for (int c = 0; c < v; ++c) {
            op_s[pipe->class_of(s, c, false)] = profile.chunk_forward_s(s, c);
            op_s[pipe->class_of(s, c, true)] = profile.chunk_backward_s(s, c);
        }
    }
    const double pipeline =
        pipe->makespan(op_s.data(), profile.p2p.time_s, deterministic_time(profile.dataloader));
    const double exposed_sync =
        std::max(0.0, deterministic_time(profile.dp_sync) - profile.dp_overlap_s);
    const double tail = exposed_sync + deterministic_time(profile.optimizer);
    return pipeline + tail;
}

namespace {

void add_collectives(const SegmentList& segments, double times, std::array<double, 5>& out) {
    if (times <= 0) return;
    for (const auto& seg : segments) {
        for (const auto& op : seg.ops) {
            if (is_communication(op.cls))
                out[static_cast<std::size_t>(op.link)] += times * op.time_s;
        }
    }
}

}  // namespace

std::array<double, 5> collective_seconds_by_level(const StepProfile& profile) {
    std::array<double, 5> out{};
    const double m = profile.microbatches;
    for (int s = 0; s < profile.stages; ++s) {
        for (int c = 0; c < profile.chunks; ++c) {
            const double dense = profile.chunk_dense_layers(s, c);
            const double layers = profile.chunk_layers(s, c) - dense;
            add_collectives(profile.layer_forward, m * layers, out);
            add_collectives(profile.layer_backward, m * layers, out);
            add_collectives(profile.dense_layer_forward, m * dense, out);
            add_collectives(profile.dense_layer_backward, m * dense, out);
            if (s == 0 && c == 0) {
                add_collectives(profile.embedding_forward, m, out);
                add_collectives(profile.embedding_backward, m, out);
            }
            if (s == profile.stages - 1 && c == profile.chunks - 1) {
                add_collectives(profile.head_forward, m, out);
                add_collectives(profile.head_backward, m, out);
            }
        }
    }
    const double transfers = 2.0 * m * (profile.stages * profile.chunks - 1);
    add_collectives(SegmentList{Segment{{profile.p2p}}}, transfers, out);
    add_collectives(profile.dp_sync, profile.stages, out);
    add_collectives(profile.optimizer, profile.stages, out);
    add_collectives(profile.dataloader, profile.stages, out);
    return out;
}

}  // namespace prism
