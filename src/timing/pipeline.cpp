#include "src/timing/pipeline.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "src/common/error.hpp"

namespace prism::timing {

namespace {

/// Megatron's interleaved schedule: virtual microbatch k -> (chunk, microbatch).
PipeOp interleaved_op(int k, const PipelineShape& s, bool backward) {
    const int group = s.stages * s.chunks;
    const int in_group = k % group;
    int chunk = in_group / s.stages;
    if (backward) chunk = s.chunks - chunk - 1;
    const int microbatch = (k / group) * s.stages + (k % s.stages);
    return {chunk, microbatch, backward};
}

}  // namespace

int warmup_forwards(const PipelineShape& s, int stage) {
    if (s.chunks == 1) return std::min(s.stages - stage - 1, s.microbatches);
    const int total = s.microbatches * s.chunks;
    if (s.microbatches == s.stages) return total;
    return std::min((s.stages - stage - 1) * 2 + (s.chunks - 1) * s.stages, total);
}

std::vector<std::vector<PipeOp>> build_schedule(const PipelineShape& s) {
    if (s.stages < 1 || s.chunks < 1 || s.microbatches < 1) {
        throw ModelError("pipeline: stages, chunks and microbatches must be >= 1");
    }
    if (s.chunks > 1 && s.microbatches % s.stages != 0) {
        throw ModelError("pipeline: interleaved schedule needs microbatches (" +
                         std::to_string(s.microbatches) + ") to be a multiple of pp (" +
                         std::to_string(s.stages) + ")");
    }
    std::vector<std::vector<PipeOp>> order(s.stages);
    for (int rank = 0; rank < s.stages; ++rank) {
        auto& ops = order[rank];
        const int warmup = warmup_forwards(s, rank);
        if (s.chunks == 1) {
            const int remaining = s.microbatches - warmup;
            int next_f = 0;
            int next_b = 0;
            for (int i = 0; i < warmup; ++i) ops.push_back({0, next_f++, false});
            for (int i = 0; i < remaining; ++i) {
                ops.push_back({0, next_f++, false});
                ops.push_back({0, next_b++, true});
            }
            while (next_b < s.microbatches) ops.push_back({0, next_b++, true});
            continue;
        }
        const int total = s.microbatches * s.chunks;
        const int remaining = total - warmup;
        for (int k = 0; k < warmup; ++k) ops.push_back(interleaved_op(k, s, false));
        for (int k = 0; k < remaining; ++k) {
            ops.push_back(interleaved_op(k + warmup, s, false));
            ops.push_back(interleaved_op(k, s, true));
        }
        for (int k = remaining; k < total; ++k) ops.push_back(interleaved_op(k, s, true));
    }
    return order;
}

std::vector<double> evaluate_pipeline(const PipelineShape& s,
                                      const std::vector<std::vector<PipeOp>>& schedule,
                                      const PipelineDurations& durations,
                                      const std::vector<double>& start_s) {
    const int p = s.stages;
    const int vstages = p * s.chunks;
    constexpr double kPending = -1.0;
    // finish[dir][virtual stage][microbatch]
    std::vector<double> fwd(static_cast<size_t>(vstages) * s.microbatches, kPending);
    std::vector<double> bwd(fwd.size(), kPending);
    auto at = [&](int vstage, int mb) { return static_cast<size_t>(vstage) * s.microbatches + mb; };

    std::vector<double> free_at(p, 0.0);
    if (!start_s.empty()) free_at = start_s;
    std::vector<size_t> next(p, 0);
    size_t done = 0;
    size_t total = 0;
    for (const auto& ops : schedule) total += ops.size();

    while (done < total) {
        bool progressed = false;
        for (int stage = 0; stage < p; ++stage) {
            while (next[stage] < schedule[stage].size()) {
                const PipeOp& op = schedule[stage][next[stage]];
                const int vs = op.chunk * p + stage;
                double ready = free_at[stage];
                if (!op.backward) {
                    if (vs > 0) {
                        const double in = fwd[at(vs - 1, op.microbatch)];
                        if (in == kPending) break;
                        ready = std::max(ready, in + durations.transfer_s((vs - 1) % p, stage, op));
                    }
                } else {
                    const double own = fwd[at(vs, op.microbatch)];
                    if (own == kPending) break;
                    ready = std::max(ready, own);
                    if (vs < vstages - 1) {
                        const double in = bwd[at(vs + 1, op.microbatch)];
                        if (in == kPending) break;
                        ready = std::max(ready, in + durations.transfer_s((vs + 1) % p, stage, op));
                    }
                }
                const double finish = ready + durations.op_s(stage, op);
                (op.backward ? bwd : fwd)[at(vs, op.microbatch)] = finish;
                free_at[stage] = finish;
                ++next[stage];
                ++done;
                progressed = true;
            }
        }
        if (!progressed) throw ModelError("pipeline: schedule deadlocks (internal error)");
    }
    return free_at;
}

double bubble_fraction(const PipelineShape& s) {
    return static_cast<double>(s.stages - 1) / (static_cast<double>(s.chunks) * s.microbatches);
}

}  // namespace prism::timing
