#include "src/timing/flat_pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "src/common/error.hpp"

// x86-64: an AVX2 clone chosen at load time where the CPU has it (the lane loops are plain
// max / add, so both clones give bit-identical results)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PRISM_LANES_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PRISM_LANES_CLONES
#endif

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

PRISM_LANES_CLONES
void FlatPipeline::makespan_stage_scaled(const double* op_s, const double* scaled_s,
                                         const double* transfer_s, double stage0_start_s,
                                         const double* factors, int f, double* finish,
                                         double* end_s) const {
    if (f < 0 || f > 8) throw ModelError("makespan_stage_scaled: at most 8 factors");
    const size_t n = ops_.size();
    const auto k_n = static_cast<size_t>(1 + f * shape_.stages);
    // one fused pass per op: out = max(stage predecessor, own forward, input + transfer)
    thread_local std::vector<double> zeros, starts;
    zeros.assign(k_n, 0.0);
    starts.assign(k_n, stage0_start_s);
    for (size_t i = 0; i < n; ++i) {
        const FlatOp& op = ops_[i];
        double* out = finish + i * k_n;
        const double* prev = op.stage_prev >= 0 ? finish + static_cast<size_t>(op.stage_prev) * k_n
                                                : (op.stage == 0 ? starts.data() : zeros.data());
        const double d = op_s[i];
        const double* own =
            op.own_forward >= 0 ? finish + static_cast<size_t>(op.own_forward) * k_n : nullptr;
        const double* in = op.input >= 0 ? finish + static_cast<size_t>(op.input) * k_n : nullptr;
        // the lanes of the op's own stage take their own duration (as makespan() would add it)
        const size_t first = 1 + static_cast<size_t>(f) * op.stage;
        double own_lane[8];
        for (int j = 0; j < f; ++j) {
            const size_t k = first + j;
            double ready = prev[k];
            if (own != nullptr) ready = std::max(ready, own[k]);
            if (in != nullptr) ready = std::max(ready, in[k] + transfer_s[i]);
            own_lane[j] = ready + (d + (factors[j] - 1.0) * scaled_s[i]);
        }
        if (own != nullptr && in != nullptr) {
            const double tr = transfer_s[i];
            for (size_t k = 0; k < k_n; ++k) {
                out[k] = std::max(std::max(prev[k], own[k]), in[k] + tr) + d;
            }
        } else if (own != nullptr) {
            for (size_t k = 0; k < k_n; ++k) out[k] = std::max(prev[k], own[k]) + d;
        } else if (in != nullptr) {
            const double tr = transfer_s[i];
            for (size_t k = 0; k < k_n; ++k) out[k] = std::max(prev[k], in[k] + tr) + d;
        } else {
            for (size_t k = 0; k < k_n; ++k) out[k] = prev[k] + d;
        }
        for (int j = 0; j < f; ++j) out[first + j] = own_lane[j];
    }
    for (size_t k = 0; k < k_n; ++k) end_s[k] = 0;
    for (const auto idx : last_on_stage_) {
        if (idx < 0) continue;
        const double* fin = finish + static_cast<size_t>(idx) * k_n;
        for (size_t k = 0; k < k_n; ++k) end_s[k] = std::max(end_s[k], fin[k]);
    }
    if (shape_.stages > 0 && last_on_stage_[0] < 0) {
        for (size_t k = 0; k < k_n; ++k) end_s[k] = std::max(end_s[k], stage0_start_s);
    }
}

std::vector<std::int32_t> FlatPipeline::critical_path(const double* op_s, const double* transfer_s,
                                                      double stage0_start_s, double* finish) const {
    std::vector<std::int32_t> path;
    if (ops_.empty()) return path;
    makespan(op_s, transfer_s, stage0_start_s, finish);
    std::int32_t cur = -1;
    for (const auto idx : last_on_stage_) {
        if (idx >= 0 && (cur < 0 || finish[idx] > finish[cur])) cur = idx;
    }
    while (cur >= 0) {
        path.push_back(cur);
        const FlatOp& op = ops_[cur];
        const double ready = finish[cur] - op_s[cur];
        // the predecessor whose arrival set the ready time
        std::int32_t next = -1;
        if (op.stage_prev >= 0 && finish[op.stage_prev] == ready) {
            next = op.stage_prev;
        } else if (op.own_forward >= 0 && finish[op.own_forward] == ready) {
            next = op.own_forward;
        } else if (op.input >= 0 && finish[op.input] + transfer_s[cur] == ready) {
            next = op.input;
        } else {
            // rounding in ready + d - d: the predecessor with the latest arrival
            double best = -1e300;
            for (const std::int32_t pred : {op.stage_prev, op.own_forward, op.input}) {
                if (pred < 0) continue;
                const double arrive = finish[pred] + (pred == op.input ? transfer_s[cur] : 0.0);
                if (arrive > best) {
                    best = arrive;
                    next = pred;
                }
            }
            const double start = op.stage == 0 ? stage0_start_s : 0.0;
            if (op.stage_prev < 0 && start >= best) next = -1;
        }
        cur = next;
    }
    return path;
}

std::shared_ptr<const FlatPipeline> cached_flat_pipeline(const PipelineShape& shape) {
    thread_local std::map<std::tuple<int, int, int>, std::shared_ptr<const FlatPipeline>> cache;
    const auto key = std::make_tuple(shape.stages, shape.chunks, shape.microbatches);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    auto flat = std::make_shared<const FlatPipeline>(shape);
    if (cache.size() >= 256) cache.clear();
    cache.emplace(key, flat);
    return flat;
}

}  // namespace prism::timing
