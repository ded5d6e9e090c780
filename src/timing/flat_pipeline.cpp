#include "src/timing/flat_pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
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

namespace {

/// Walks one longest path back from the last op that finishes latest: `fin(i)` is op i's
/// finish time and `dur(i)` its duration (as the forward pass added them), `visit(i)` is called
/// for each op on the path, last op first. Ties go to the stage predecessor, then the own
/// forward, then the input.
template <class Fin, class Dur, class Visit>
void walk_back(const std::vector<FlatOp>& ops, const std::vector<std::int32_t>& last_on_stage,
               const double* transfer_s, double stage0_start_s, Fin fin, Dur dur, Visit visit) {
    std::int32_t cur = -1;
    for (const auto idx : last_on_stage) {
        if (idx >= 0 && (cur < 0 || fin(idx) > fin(cur))) cur = idx;
    }
    while (cur >= 0) {
        visit(cur);
        const FlatOp& op = ops[cur];
        const double ready = fin(cur) - dur(cur);
        // the predecessor whose arrival set the ready time
        std::int32_t next = -1;
        if (op.stage_prev >= 0 && fin(op.stage_prev) == ready) {
            next = op.stage_prev;
        } else if (op.own_forward >= 0 && fin(op.own_forward) == ready) {
            next = op.own_forward;
        } else if (op.input >= 0 && fin(op.input) + transfer_s[cur] == ready) {
            next = op.input;
        } else {
            // rounding in ready + d - d: the predecessor with the latest arrival
            double best = -1e300;
            for (const std::int32_t pred : {op.stage_prev, op.own_forward, op.input}) {
                if (pred < 0) continue;
                const double arrive = fin(pred) + (pred == op.input ? transfer_s[cur] : 0.0);
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
}

/// Thread-local scratch of at least `doubles` doubles, aligned to 32 bytes for the lane passes'
/// vectors of four (aligned by hand: a std::vector of such vectors would lose the type's
/// alignment as a template argument). Each call may reuse the previous call's storage.
double* aligned_scratch(std::size_t doubles) {
    thread_local std::vector<double> storage;
    if (storage.size() < doubles + 4) storage.resize(doubles + 4);
    const auto misalign = reinterpret_cast<std::uintptr_t>(storage.data()) % 32;
    return storage.data() + (misalign == 0 ? 0 : (32 - misalign) / sizeof(double));
}

}  // namespace

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
void FlatPipeline::makespan_stage_lanes(const double* op_s, const double* scaled_s,
                                        const double* transfer_s, double stage0_start_s,
                                        const std::int32_t* lane_first, const double* delta,
                                        double* end_s, double* slope_s) const {
    const size_t n = ops_.size();
    const auto lanes = static_cast<size_t>(lane_first[shape_.stages]);
    if (lanes == 0) return;
    // Lanes go in blocks of at most kStageLaneBlock, of equal size, each its own pass over the
    // schedule: a block's finish times stay in cache where all lanes' would not (2,048 ops x
    // 250 lanes is 4 MB). A block is held as vectors of four lanes (the lanes past its end
    // carry no change and are ignored), so that the per-op loops have no remainder.
    using V4 = double __attribute__((vector_size(4 * sizeof(double))));
    const size_t blocks = (lanes + kStageLaneBlock - 1) / kStageLaneBlock;
    const size_t block = (lanes + blocks - 1) / blocks;
    const size_t nv = (block + 3) / 4;
    V4* const finish = reinterpret_cast<V4*>(aligned_scratch(n * nv * 4));
    const V4 zero{0, 0, 0, 0};
    const V4 start = zero + stage0_start_s;
    // the ops with their predecessors' rows (in vectors; -1: none) and which of them exist
    struct LaneOp {
        std::int32_t prev, own, in, kind;
    };
    thread_local std::vector<LaneOp> lops;
    lops.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const FlatOp& op = ops_[i];
        auto row = [&](std::int32_t j) { return j >= 0 ? static_cast<std::int32_t>(j * nv) : -1; };
        lops[i] = {
            row(op.stage_prev), row(op.own_forward), row(op.input),
            (op.stage_prev >= 0 ? 1 : 0) | (op.own_forward >= 0 ? 2 : 0) | (op.input >= 0 ? 4 : 0)};
    }
    thread_local std::vector<std::int32_t> own_first, own_last;
    own_first.resize(shape_.stages);
    own_last.resize(shape_.stages);
    for (size_t b0 = 0; b0 < lanes; b0 += block) {
        const size_t k_n = std::min(block, lanes - b0);
        const double* dl = delta + b0;
        // per stage, its lanes in this block
        for (int st = 0; st < shape_.stages; ++st) {
            const auto f0 = static_cast<size_t>(lane_first[st]);
            const auto f1 = static_cast<size_t>(lane_first[st + 1]);
            own_first[st] = static_cast<std::int32_t>(std::clamp(f0, b0, b0 + k_n) - b0);
            own_last[st] = static_cast<std::int32_t>(std::clamp(f1, b0, b0 + k_n) - b0);
        }
        for (size_t i = 0; i < n; ++i) {
            const LaneOp& lo = lops[i];
            V4* out = finish + i * nv;
            const V4* prev = finish + lo.prev;  // valid where the kind says so
            const V4* own = finish + lo.own;
            const V4* in = finish + lo.in;
            const double d = op_s[i];
            const double tr = transfer_s[i];
            // lane-wise max as (a > b ? a : b), the bits of std::max(b, a) in makespan() (no
            // helper taking V4: a lambda is not cloned with the function and would change the
            // vector ABI between clones)
            switch (lo.kind) {
                case 7:
                    for (size_t v = 0; v < nv; ++v) {
                        const V4 x = prev[v] > own[v] ? prev[v] : own[v];
                        const V4 y = in[v] + tr;
                        out[v] = (x > y ? x : y) + d;
                    }
                    break;
                case 3:
                    for (size_t v = 0; v < nv; ++v) {
                        out[v] = (prev[v] > own[v] ? prev[v] : own[v]) + d;
                    }
                    break;
                case 5:
                    for (size_t v = 0; v < nv; ++v) {
                        const V4 y = in[v] + tr;
                        out[v] = (prev[v] > y ? prev[v] : y) + d;
                    }
                    break;
                case 1:
                    for (size_t v = 0; v < nv; ++v) out[v] = prev[v] + d;
                    break;
                default: {
                    // no stage predecessor: from the start (stage 0) or 0
                    const V4 first = ops_[i].stage == 0 ? start : zero;
                    for (size_t v = 0; v < nv; ++v) {
                        V4 r = first;
                        if (lo.kind & 2) r = r > own[v] ? r : own[v];
                        if (lo.kind & 4) {
                            const V4 y = in[v] + tr;
                            r = r > y ? r : y;
                        }
                        out[v] = r + d;
                    }
                }
            }
            // the lanes of the op's own stage in this block take their own duration (as
            // makespan() would add it): the ready time again from the predecessors (rows
            // other than this op's, so still as they were)
            const auto k1 = static_cast<size_t>(own_last[ops_[i].stage]);
            for (auto k = static_cast<size_t>(own_first[ops_[i].stage]); k < k1; ++k) {
                const size_t q = k / 4, r = k % 4;
                double ready =
                    lo.kind & 1 ? prev[q][r] : (ops_[i].stage == 0 ? stage0_start_s : 0.0);
                if (lo.kind & 2) ready = std::max(ready, own[q][r]);
                if (lo.kind & 4) ready = std::max(ready, in[q][r] + tr);
                out[q][r] = ready + (d + dl[k] * scaled_s[i]);
            }
        }
        auto fin = [&](size_t i, size_t k) { return finish[i * nv + k / 4][k % 4]; };
        double* e = end_s + b0;
        for (size_t k = 0; k < k_n; ++k) e[k] = 0;
        for (const auto idx : last_on_stage_) {
            if (idx < 0) continue;
            for (size_t k = 0; k < k_n; ++k) e[k] = std::max(e[k], fin(idx, k));
        }
        if (shape_.stages > 0 && last_on_stage_[0] < 0) {
            for (size_t k = 0; k < k_n; ++k) e[k] = std::max(e[k], stage0_start_s);
        }
        if (slope_s == nullptr) continue;
        // each lane's critical path, walked back as critical_path() does, on its own durations
        // (lanes go in stage order: st is lane b0 + k's stage, -1 below lane_first[0])
        int st = -1;
        for (size_t k = 0; k < k_n; ++k) {
            const size_t lane_index = b0 + k;
            while (st + 1 < shape_.stages &&
                   lane_index >= static_cast<size_t>(lane_first[st + 1])) {
                ++st;
            }
            double slope = 0;
            walk_back(
                ops_, last_on_stage_, transfer_s, stage0_start_s,
                [&](std::int32_t i) { return fin(i, k); },
                [&](std::int32_t i) {
                    return ops_[i].stage == st ? op_s[i] + dl[k] * scaled_s[i] : op_s[i];
                },
                [&](std::int32_t i) {
                    if (ops_[i].stage == st) slope += scaled_s[i];
                });
            slope_s[lane_index] = slope;
        }
    }
}

PRISM_LANES_CLONES
void FlatPipeline::makespan_affine_lanes(const double* a_s, const double* b_s, const double* r,
                                         const double* transfer_s, const double* start_s,
                                         std::size_t lanes, double* end_s) const {
    if (lanes == 0) return;
    if (lanes > 4) throw ModelError("makespan_affine_lanes: at most 4 lanes");
    using V4 = double __attribute__((vector_size(4 * sizeof(double))));
    const size_t n = ops_.size();
    // lanes past `lanes` repeat lane 0 and are ignored
    V4 rv, tr, start;
    for (size_t k = 0; k < 4; ++k) {
        const size_t q = k < lanes ? k : 0;
        rv[k] = r[q];
        tr[k] = transfer_s[q];
        start[k] = start_s[q];
    }
    const V4 zero{0, 0, 0, 0};
    V4* const finish = reinterpret_cast<V4*>(aligned_scratch(n * 4));
    for (size_t i = 0; i < n; ++i) {
        const FlatOp& op = ops_[i];
        // as makespan(): ready = std::max(ready, x) is (x > ready ? x : ready) lane-wise
        V4 ready = op.stage_prev >= 0 ? finish[op.stage_prev] : (op.stage == 0 ? start : zero);
        if (op.own_forward >= 0) {
            const V4 x = finish[op.own_forward];
            ready = ready < x ? x : ready;
        }
        if (op.input >= 0) {
            const V4 x = finish[op.input] + tr;
            ready = ready < x ? x : ready;
        }
        finish[i] = ready + (a_s[i] + rv * b_s[i]);
    }
    for (size_t k = 0; k < lanes; ++k) {
        double end = 0;
        for (const auto idx : last_on_stage_) {
            if (idx >= 0) end = std::max(end, finish[idx][k]);
        }
        if (shape_.stages > 0 && last_on_stage_[0] < 0) end = std::max(end, start_s[k]);
        end_s[k] = end;
    }
}

std::vector<std::int32_t> FlatPipeline::critical_path(const double* op_s, const double* transfer_s,
                                                      double stage0_start_s, double* finish) const {
    std::vector<std::int32_t> path;
    if (ops_.empty()) return path;
    makespan(op_s, transfer_s, stage0_start_s, finish);
    walk_back(
        ops_, last_on_stage_, transfer_s, stage0_start_s, [&](std::int32_t i) { return finish[i]; },
        [&](std::int32_t i) { return op_s[i]; }, [&](std::int32_t i) { path.push_back(i); });
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
