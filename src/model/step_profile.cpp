#include "src/model/step_profile.hpp"

#include <algorithm>
#include <vector>

#include "src/timing/flat_pipeline.hpp"

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
    double t = chunk_layers(stage, chunk) * deterministic_time(layer_forward);
    if (stage == 0 && chunk == 0) t += deterministic_time(embedding_forward);
    if (stage == stages - 1 && chunk == chunks - 1) t += deterministic_time(head_forward);
    return t;
}

double StepProfile::chunk_backward_s(int stage, int chunk) const {
    double t = chunk_layers(stage, chunk) * deterministic_time(layer_backward);
    if (stage == 0 && chunk == 0) t += deterministic_time(embedding_backward);
    if (stage == stages - 1 && chunk == chunks - 1) t += deterministic_time(head_backward);
    return t;
}

double deterministic_step_time(const StepProfile& profile) {
    // the flat form of the schedule gives exactly evaluate_pipeline's finish times (tested)
    const timing::PipelineShape shape{profile.stages, profile.chunks, profile.microbatches};
    const auto flat = timing::cached_flat_pipeline(shape);
    const int v = profile.chunks;
    thread_local std::vector<double> fwd, bwd, op_s, transfer_s, finish;
    fwd.resize(static_cast<size_t>(profile.stages) * v);
    bwd.resize(fwd.size());
    for (int s = 0; s < profile.stages; ++s) {
        for (int c = 0; c < v; ++c) {
            fwd[s * v + c] = profile.chunk_forward_s(s, c);
            bwd[s * v + c] = profile.chunk_backward_s(s, c);
        }
    }
    const auto& ops = flat->ops();
    if (op_s.size() < ops.size()) op_s.resize(ops.size());  // scratch: only grows
    if (finish.size() < ops.size()) finish.resize(ops.size());
    transfer_s.assign(ops.size(), profile.p2p.time_s);
    for (size_t i = 0; i < ops.size(); ++i) {
        const int j = ops[i].stage * v + ops[i].chunk;
        op_s[i] = ops[i].backward ? bwd[j] : fwd[j];
    }
    const double pipeline = flat->makespan(op_s.data(), transfer_s.data(),
                                           deterministic_time(profile.dataloader), finish.data());
    const double exposed_sync =
        std::max(0.0, deterministic_time(profile.dp_sync) - profile.dp_overlap_s);
    const double tail = exposed_sync + deterministic_time(profile.optimizer);
    return pipeline + tail;
}

}  // namespace prism
