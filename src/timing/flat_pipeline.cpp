#include "src/timing/flat_pipeline.hpp"

#include <algorithm>
#include <cmath>

#include "src/common/error.hpp"

namespace prism::timing {

FlatPipeline::FlatPipeline(const PipelineShape& s) : shape_(s) {
    const auto schedule = build_schedule(s);
    const int p = s.stages;
    const int vstages = p * s.chunks;
    // index of the op computing (direction, virtual stage, microbatch)
    std::vector<std::int32_t> fwd(static_cast<size_t>(vstages) * s.microbatches, -1);
    std::vector<std::int32_t> bwd(fwd.size(), -1);
    auto at = [&](int vs, int mb) { return static_cast<size_t>(vs) * s.microbatches + mb; };
    std::vector<size_t> next(p, 0);
    std::vector<std::int32_t> last(p, -1);
    size_t total = 0;
    for (const auto& stage_ops : schedule) total += stage_ops.size();
    ops_.reserve(total);
    // Same sweep as evaluate_pipeline, recording the order in which ops become ready.
    while (ops_.size() < total) {
        bool progressed = false;
        for (int stage = 0; stage < p; ++stage) {
            while (next[stage] < schedule[stage].size()) {
                const PipeOp& op = schedule[stage][next[stage]];
                const int vs = op.chunk * p + stage;
                FlatOp f;
                f.stage = stage;
                f.chunk = op.chunk;
                f.microbatch = op.microbatch;
                f.backward = op.backward;
                f.stage_prev = last[stage];
                if (!op.backward) {
                    if (vs > 0) {
                        f.input = fwd[at(vs - 1, op.microbatch)];
                        if (f.input < 0) break;
                    }
                } else {
                    f.own_forward = fwd[at(vs, op.microbatch)];
                    if (f.own_forward < 0) break;
                    if (vs < vstages - 1) {
                        f.input = bwd[at(vs + 1, op.microbatch)];
                        if (f.input < 0) break;
                    }
                }
                const auto idx = static_cast<std::int32_t>(ops_.size());
                (op.backward ? bwd : fwd)[at(vs, op.microbatch)] = idx;
                last[stage] = idx;
                ops_.push_back(f);
                ++next[stage];
                progressed = true;
            }
        }
        if (!progressed) throw ModelError("pipeline: schedule deadlocks (internal error)");
    }
    last_on_stage_ = last;

    // paths into each op, in log space (they grow combinatorially with m and p)
    auto log_add = [](double a, double b) {
        if (a == -HUGE_VAL) return b;
        if (b == -HUGE_VAL) return a;
        const double hi = std::max(a, b);
        return hi + std::log1p(std::exp(std::min(a, b) - hi));
    };
    std::vector<double> lp(ops_.size(), -HUGE_VAL);
    for (size_t i = 0; i < ops_.size(); ++i) {
        const FlatOp& op = ops_[i];
        double l = -HUGE_VAL;
        if (op.stage_prev >= 0) l = log_add(l, lp[op.stage_prev]);
        if (op.own_forward >= 0) l = log_add(l, lp[op.own_forward]);
        if (op.input >= 0) l = log_add(l, lp[op.input]);
        lp[i] = l == -HUGE_VAL ? 0.0 : l;  // a source op: one path
    }
    log_paths_ = -HUGE_VAL;
    for (const auto idx : last_on_stage_) {
        if (idx >= 0) log_paths_ = log_add(log_paths_, lp[idx]);
    }
    if (log_paths_ == -HUGE_VAL) log_paths_ = 0;
}

void FlatPipeline::makespan_pair(const double* op_a, const double* transfer_a, double start_a,
                                 const double* op_b, const double* transfer_b, double start_b,
                                 double* finish_a, double* finish_b, double& end_a,
                                 double& end_b) const {
    const size_t n = ops_.size();
    for (size_t i = 0; i < n; ++i) {
        const FlatOp& op = ops_[i];
        double ra, rb;
        if (op.stage_prev >= 0) {
            ra = finish_a[op.stage_prev];
            rb = finish_b[op.stage_prev];
        } else {
            ra = op.stage == 0 ? start_a : 0.0;
            rb = op.stage == 0 ? start_b : 0.0;
        }
        if (op.own_forward >= 0) {
            ra = std::max(ra, finish_a[op.own_forward]);
            rb = std::max(rb, finish_b[op.own_forward]);
        }
        if (op.input >= 0) {
            ra = std::max(ra, finish_a[op.input] + transfer_a[i]);
            rb = std::max(rb, finish_b[op.input] + transfer_b[i]);
        }
        finish_a[i] = ra + op_a[i];
        finish_b[i] = rb + op_b[i];
    }
    end_a = 0;
    end_b = 0;
    for (const auto idx : last_on_stage_) {
        if (idx >= 0) {
            end_a = std::max(end_a, finish_a[idx]);
            end_b = std::max(end_b, finish_b[idx]);
        }
    }
    if (shape_.stages > 0 && last_on_stage_[0] < 0) {
        end_a = std::max(end_a, start_a);
        end_b = std::max(end_b, start_b);
    }
}

double FlatPipeline::makespan(const double* op_s, const double* transfer_s, double stage0_start_s,
                              double* finish) const {
    const size_t n = ops_.size();
    for (size_t i = 0; i < n; ++i) {
        const FlatOp& op = ops_[i];
        double ready =
            op.stage_prev >= 0 ? finish[op.stage_prev] : (op.stage == 0 ? stage0_start_s : 0.0);
        if (op.own_forward >= 0) ready = std::max(ready, finish[op.own_forward]);
        if (op.input >= 0) ready = std::max(ready, finish[op.input] + transfer_s[i]);
        finish[i] = ready + op_s[i];
    }
    double end = 0;
    for (const auto idx : last_on_stage_) {
        if (idx >= 0) end = std::max(end, finish[idx]);
    }
    if (shape_.stages > 0 && last_on_stage_[0] < 0) end = std::max(end, stage0_start_s);
    return end;
}

}  // namespace prism::timing
