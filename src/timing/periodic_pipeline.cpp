#include "src/timing/periodic_pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "src/common/error.hpp"

// x86-64: AVX2 / AVX-512 clones of the lane loops chosen at load time (plain max, add and
// compare, so every clone gives the same bits)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PRISM_ROUND_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PRISM_ROUND_CLONES
#endif

namespace prism::timing {

namespace {

using detail::ExecOp;
using detail::kSentinelRows;
using detail::RoundExec;

/// Largest error a skip may add, relative to the makespan (find_cycle).
constexpr double kSkipTolerance = 1e-13;

/// Rounds whose state is kept to find a repetition: cycles longer than this are not skipped.
/// A cycle of the rounds' max-plus map is a circuit through at most all D state ops, so its
/// length is at most D; several circuits of equal weight can make the period their lcm, which
/// is rare: the longest seen on random stage times is 9 rounds (pp 32).
std::int64_t max_cycle(const RoundExec& ex) {
    return std::clamp<std::int64_t>(static_cast<std::int64_t>(ex.state), 8, 64);
}

thread_local std::int64_t t_skipped = 0;

/// What one pass reads: per-class rows of `lanes` values.
struct Inputs {
    std::size_t lanes;
    const double* dur;
    const double* tr;
    const double* weight;  ///< null without content
    const double* start;   ///< [lanes]
};

/// Ops ops[0 .. n) into rows row0 + i of x: finish = max(stage predecessor, input +
/// transfer) + duration, the max as std::max(ready, arrival) in FlatPipeline::makespan.
PRISM_ROUND_CLONES
void run_ops_lanes(const ExecOp* ops, std::size_t n, std::size_t row0, double* x,
                   const Inputs& in) {
    const std::size_t lanes = in.lanes;
    for (std::size_t i = 0; i < n; ++i) {
        const ExecOp& op = ops[i];
        double* out = x + (row0 + i) * lanes;
        const double* a = x + static_cast<std::size_t>(op.prev) * lanes;
        const double* b = x + static_cast<std::size_t>(op.in) * lanes;
        const double* d = in.dur + static_cast<std::size_t>(op.cls) * lanes;
        const double* t = in.tr + static_cast<std::size_t>(op.cls) * lanes;
        for (std::size_t l = 0; l < lanes; ++l) {
            const double y = b[l] + t[l];
            out[l] = (a[l] < y ? y : a[l]) + d[l];
        }
    }
}

/// run_ops_lanes for one lane.
void run_ops_scalar(const ExecOp* ops, std::size_t n, std::size_t row0, double* x,
                    const Inputs& in) {
    const double* dur = in.dur;
    const double* tr = in.tr;
    double* out = x + row0;
    for (std::size_t i = 0; i < n; ++i) {
        const ExecOp& op = ops[i];
        out[i] = std::max(x[op.prev], x[op.in] + tr[op.cls]) + dur[op.cls];
    }
}

/// run_ops_lanes with contents (rows of xc): each op's content is its predecessor's whose
/// arrival set its start (ties: the stage predecessor; a stage's first op: its input over the
/// start) plus its weight.
PRISM_ROUND_CLONES
void run_ops_content(const ExecOp* ops, std::size_t n, std::size_t row0, double* x, double* xc,
                     const Inputs& in) {
    const std::size_t lanes = in.lanes;
    for (std::size_t i = 0; i < n; ++i) {
        const ExecOp& op = ops[i];
        const std::size_t pa = static_cast<std::size_t>(op.prev) * lanes;
        const std::size_t pb = static_cast<std::size_t>(op.in) * lanes;
        const std::size_t pc = static_cast<std::size_t>(op.cls) * lanes;
        double* out = x + (row0 + i) * lanes;
        double* oc = xc + (row0 + i) * lanes;
        if (op.source) {
            for (std::size_t l = 0; l < lanes; ++l) {
                const double y = x[pb + l] + in.tr[pc + l];
                const bool take = x[pa + l] <= y;
                out[l] = (take ? y : x[pa + l]) + in.dur[pc + l];
                oc[l] = (take ? xc[pb + l] : xc[pa + l]) + in.weight[pc + l];
            }
        } else {
            for (std::size_t l = 0; l < lanes; ++l) {
                const double y = x[pb + l] + in.tr[pc + l];
                const bool take = x[pa + l] < y;
                out[l] = (take ? y : x[pa + l]) + in.dur[pc + l];
                oc[l] = (take ? xc[pb + l] : xc[pa + l]) + in.weight[pc + l];
            }
        }
    }
}

void run_ops(const std::vector<ExecOp>& ops, std::size_t row0, double* x, double* xc,
             const Inputs& in) {
    if (xc != nullptr) {
        run_ops_content(ops.data(), ops.size(), row0, x, xc, in);
    } else if (in.lanes == 1) {
        run_ops_scalar(ops.data(), ops.size(), row0, x, in);
    } else {
        run_ops_lanes(ops.data(), ops.size(), row0, x, in);
    }
}

/// Rows 0, 1, 2 of a buffer of `lanes` columns: 0, the start, -inf (contents: 0).
void set_sentinels(double* x, double* xc, const Inputs& in) {
    for (std::size_t l = 0; l < in.lanes; ++l) {
        x[l] = 0.0;
        x[in.lanes + l] = in.start[l];
        x[2 * in.lanes + l] = -HUGE_VAL;
    }
    if (xc != nullptr) std::fill(xc, xc + kSentinelRows * in.lanes, 0.0);
}

/// Per-thread scratch of one pass.
struct Scratch {
    std::vector<double> pre, prec, work, workc, offset, coffset;
    std::vector<double> hist, histc, hist_ref, hist_cref;
    std::vector<double> cycle_sum;
};

Scratch& scratch() {
    thread_local Scratch s;
    return s;
}

template <class T>
T* grown(std::vector<T>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

/// The makespan (and content) of each lane from the rows of the stages' last ops, plus offsets.
void finish_lanes(const RoundExec& ex, std::size_t lanes, const double* x, const double* xc,
                  const double* offset, const double* coffset, double* end, double* content) {
    for (std::size_t l = 0; l < lanes; ++l) {
        std::int32_t best = -1;
        double e = 0;
        for (const auto r : ex.last) {
            const double f = x[static_cast<std::size_t>(r) * lanes + l];
            if (best < 0 || f > e) {
                e = f;
                best = r;
            }
        }
        end[l] = offset != nullptr ? offset[l] + e : e;
        if (content != nullptr) {
            const double c = xc[static_cast<std::size_t>(best) * lanes + l];
            content[l] = coffset != nullptr ? coffset[l] + c : c;
        }
    }
}

/// The shortest c <= max_cycle (0: none) such that the state after round j (x, xc: relative to
/// slot 0) is within eps of the state after round j - c, where skipping L = (rounds - j) / c
/// cycles of c rounds costs at most kSkipTolerance of the lane's makespan: L eps <= kSkipTolerance
/// (offset + L C), C the offsets the last c rounds added (into cycle_sum[lanes], the contents'
/// into cycle_sum[lanes + l]).
///
/// Why the error is at most L eps: one round maps the absolute finish times of the state by a
/// max-plus linear map (max and + of the same durations), which commutes with adding a constant
/// and never moves two states further apart in the largest difference. If x(j) is within eps of
/// x(j - c) + C, then x(j + c) is within eps of x(j) + C, and so on: x(j + L c) is within L eps
/// of x(j) + L C, what the skip takes. (In exact arithmetic a repeated state repeats forever,
/// eps = 0; the relative values round differently from round to round by an ulp or so, which
/// eps absorbs.) The contents follow the same predecessors as the finish times, a selection
/// plus constants, likewise within L eps_c where the path choices repeat.
std::int64_t find_cycle(const RoundExec& ex, std::int64_t j, std::size_t lanes, const double* x,
                        const double* xc, const double* hist, const double* histc,
                        const double* href, const double* hcref, const double* offset,
                        const double* coffset, std::vector<double>& cycle_sum) {
    const std::int64_t ring = max_cycle(ex) + 1;
    const std::size_t state = ex.state * lanes;
    const bool with_content = xc != nullptr;
    cycle_sum.assign(2 * lanes, 0.0);
    thread_local std::vector<double> allowed;
    allowed.resize(2 * lanes);
    for (std::int64_t c = 1; c <= std::min(j - 1, ring - 1); ++c) {
        const std::int64_t skip = (ex.rounds - j) / c;
        if (skip == 0) break;
        // the offsets of rounds j - c + 1 .. j (summed from the last one back)
        const std::int64_t added = (j - c + 1) % ring;
        const double n = static_cast<double>(skip);
        for (std::size_t l = 0; l < lanes; ++l) {
            cycle_sum[l] += href[added * lanes + l];
            allowed[l] = kSkipTolerance * std::abs(offset[l] + n * cycle_sum[l]) / n;
            if (with_content) {
                cycle_sum[lanes + l] += hcref[added * lanes + l];
                allowed[lanes + l] =
                    kSkipTolerance * std::abs(coffset[l] + n * cycle_sum[lanes + l]) / n;
            }
        }
        const double* prev = hist + ((j - c) % ring) * state;
        const double* prevc = with_content ? histc + ((j - c) % ring) * state : nullptr;
        bool within = true;
        for (std::size_t k = 0; k < state && within; ++k) {
            const std::size_t l = k % lanes;
            within = std::abs(x[k] - prev[k]) <= allowed[l];
            if (within && with_content) within = std::abs(xc[k] - prevc[k]) <= allowed[lanes + l];
        }
        if (within) return c;
    }
    return 0;
}

/// The state (rows 3 .. 3 + D of the work buffer) again from the body rows it holds, relative
/// to slot 0's (whose values, into ref[lanes], add to the offsets).
void rebase_state(const RoundExec& ex, std::size_t lanes, double* x, double* ref, double* offset) {
    const double* r0 = x + static_cast<std::size_t>(ex.live[0]) * lanes;
    std::memcpy(ref, r0, lanes * sizeof(double));
    for (std::size_t k = 0; k < ex.state; ++k) {
        const double* src = x + static_cast<std::size_t>(ex.live[k]) * lanes;
        double* dst = x + (kSentinelRows + k) * lanes;
        for (std::size_t l = 0; l < lanes; ++l) dst[l] = src[l] - ref[l];
    }
    for (std::size_t l = 0; l < lanes; ++l) offset[l] += ref[l];
}

/// The steady rounds of one pass on the state in the work buffer: each round's body, then the
/// state rebased, skipping whole cycles once a state repeats (find_cycle).
void run_rounds(const RoundExec& ex, const Inputs& in, Scratch& s, bool with_content) {
    const std::size_t lanes = in.lanes;
    const std::size_t state = ex.state * lanes;
    const std::size_t body_row = kSentinelRows + ex.state;
    const std::int64_t ring = max_cycle(ex) + 1;
    double* hist = grown(s.hist, ring * state);
    double* histc = with_content ? grown(s.histc, ring * state) : nullptr;
    double* href = grown(s.hist_ref, ring * lanes);
    double* hcref = with_content ? grown(s.hist_cref, ring * lanes) : nullptr;
    double* x = s.work.data();
    double* xc = with_content ? s.workc.data() : nullptr;
    double* offset = s.offset.data();
    double* coffset = with_content ? s.coffset.data() : nullptr;
    const double* st = x + kSentinelRows * lanes;
    const double* stc = with_content ? xc + kSentinelRows * lanes : nullptr;
    bool detect = ex.rounds > 2;
    for (std::int64_t j = 1; j <= ex.rounds; ++j) {
        run_ops(ex.body, body_row, x, xc, in);
        const std::int64_t e = j % ring;
        rebase_state(ex, lanes, x, href + e * lanes, offset);
        if (with_content) rebase_state(ex, lanes, xc, hcref + e * lanes, coffset);
        if (!detect || j == ex.rounds) continue;
        std::memcpy(hist + e * state, st, state * sizeof(double));
        if (with_content) std::memcpy(histc + e * state, stc, state * sizeof(double));
        const std::int64_t cycle = find_cycle(ex, j, lanes, st, stc, hist, histc, href, hcref,
                                              offset, coffset, s.cycle_sum);
        if (cycle == 0) continue;
        detect = false;
        const std::int64_t skip = (ex.rounds - j) / cycle;
        const double* sum = s.cycle_sum.data();
        for (std::size_t l = 0; l < lanes; ++l) {
            offset[l] += static_cast<double>(skip) * sum[l];
            if (with_content) coffset[l] += static_cast<double>(skip) * sum[lanes + l];
        }
        j += skip * cycle;
        t_skipped += skip * cycle;
    }
}

/// One pass over at most kLaneBlock lanes (class-major rows of `in.lanes`).
void run_block(const RoundExec& ex, const Inputs& in, double* end, double* content) {
    Scratch& s = scratch();
    const std::size_t lanes = in.lanes;
    const bool with_content = content != nullptr;
    const std::size_t rows_pre = kSentinelRows + ex.prefix.size();
    double* pre = grown(s.pre, rows_pre * lanes);
    double* prec = with_content ? grown(s.prec, rows_pre * lanes) : nullptr;
    set_sentinels(pre, prec, in);
    run_ops(ex.prefix, kSentinelRows, pre, prec, in);
    if (ex.rounds == 0) {
        finish_lanes(ex, lanes, pre, prec, nullptr, nullptr, end, content);
        return;
    }
    const std::size_t rows = kSentinelRows + ex.state + ex.body.size() + ex.suffix.size();
    double* x = grown(s.work, rows * lanes);
    double* xc = with_content ? grown(s.workc, rows * lanes) : nullptr;
    double* offset = grown(s.offset, lanes);
    double* coffset = with_content ? grown(s.coffset, lanes) : nullptr;
    set_sentinels(x, xc, in);
    // the state before the first round, relative to slot 0 (its value is the first offset)
    auto enter = [&](const double* from, double* to, double* off) {
        const double* r0 = from + static_cast<std::size_t>(ex.entry[0]) * lanes;
        for (std::size_t k = 0; k < ex.state; ++k) {
            double* dst = to + (kSentinelRows + k) * lanes;
            const std::int32_t e = ex.entry[k];
            for (std::size_t l = 0; l < lanes; ++l) {
                dst[l] = e >= 0 ? from[static_cast<std::size_t>(e) * lanes + l] - r0[l] : 0.0;
            }
        }
        std::memcpy(off, r0, lanes * sizeof(double));
    };
    enter(pre, x, offset);
    if (with_content) enter(prec, xc, coffset);
    run_rounds(ex, in, s, with_content);
    run_ops(ex.suffix, kSentinelRows + ex.state + ex.body.size(), x, xc, in);
    finish_lanes(ex, lanes, x, xc, offset, coffset, end, content);
}

}  // namespace

PeriodicPipeline::PeriodicPipeline(const PipelineShape& shape)
    : program_(detail::compile_rounds(shape)), exec_(detail::executable(program_)) {}

std::int64_t PeriodicPipeline::last_skipped_rounds() { return t_skipped; }

void PeriodicPipeline::makespans(const Lanes& lanes, double* end_s, double* content) const {
    t_skipped = 0;
    if (lanes.lanes == 0) return;
    if (content != nullptr && lanes.weight == nullptr) {
        throw ModelError("PeriodicPipeline::makespans: content needs weights");
    }
    const auto nc = static_cast<std::size_t>(classes());
    const std::size_t total = lanes.lanes;
    const std::size_t blocks = (total + kLaneBlock - 1) / kLaneBlock;
    const std::size_t block = (total + blocks - 1) / blocks;
    thread_local std::vector<double> dur, tr, w;
    for (std::size_t b0 = 0; b0 < total; b0 += block) {
        const std::size_t n = std::min(block, total - b0);
        const double *dp = lanes.op_s, *tp = lanes.transfer_s, *wp = lanes.weight;
        if (blocks > 1) {
            // this block's lanes as class-major rows of their own
            dur.resize(nc * n);
            tr.resize(nc * n);
            if (content != nullptr) w.resize(nc * n);
            for (std::size_t c = 0; c < nc; ++c) {
                std::memcpy(&dur[c * n], lanes.op_s + c * total + b0, n * sizeof(double));
                std::memcpy(&tr[c * n], lanes.transfer_s + c * total + b0, n * sizeof(double));
                if (content != nullptr) {
                    std::memcpy(&w[c * n], lanes.weight + c * total + b0, n * sizeof(double));
                }
            }
            dp = dur.data();
            tp = tr.data();
            wp = content != nullptr ? w.data() : nullptr;
        }
        const Inputs in{n, dp, tp, content != nullptr ? wp : nullptr, lanes.start_s + b0};
        run_block(exec_, in, end_s + b0, content != nullptr ? content + b0 : nullptr);
    }
}

double PeriodicPipeline::makespan(const double* op_s, double transfer_s,
                                  double stage0_start_s) const {
    const auto nc = static_cast<std::size_t>(classes());
    thread_local std::vector<double> tr;
    tr.assign(nc, transfer_s);
    Lanes l;
    l.lanes = 1;
    l.op_s = op_s;
    l.transfer_s = tr.data();
    l.start_s = &stage0_start_s;
    double end = 0;
    makespans(l, &end);
    return end;
}

void PeriodicPipeline::makespan_stage_lanes(const double* op_s, const double* scaled_s,
                                            double transfer_s, double stage0_start_s,
                                            const std::int32_t* lane_first, const double* delta,
                                            double* end_s, double* slope_s) const {
    const int p = program_.shape.stages;
    const auto lanes = static_cast<std::size_t>(lane_first[p]);
    if (lanes == 0) return;
    const auto nc = static_cast<std::size_t>(classes());
    thread_local std::vector<double> dur, tr, w, start;
    thread_local std::vector<int> lane_stage;
    lane_stage.assign(lanes, -1);
    for (int st = 0; st < p; ++st) {
        for (auto k = static_cast<std::size_t>(lane_first[st]);
             k < static_cast<std::size_t>(lane_first[st + 1]); ++k) {
            lane_stage[k] = st;
        }
    }
    dur.resize(nc * lanes);
    tr.assign(nc * lanes, transfer_s);
    start.assign(lanes, stage0_start_s);
    if (slope_s != nullptr) w.resize(nc * lanes);
    for (std::size_t c = 0; c < nc; ++c) {
        const int st = stage_of_class(static_cast<int>(c));
        double* dr = &dur[c * lanes];
        for (std::size_t k = 0; k < lanes; ++k) {
            const bool own = lane_stage[k] == st;
            // as FlatPipeline::makespan_stage_lanes: d + delta * scaled on the lane's stage
            dr[k] = own ? op_s[c] + delta[k] * scaled_s[c] : op_s[c];
            if (slope_s != nullptr) w[c * lanes + k] = own ? scaled_s[c] : 0.0;
        }
    }
    Lanes l;
    l.lanes = lanes;
    l.op_s = dur.data();
    l.transfer_s = tr.data();
    l.start_s = start.data();
    l.weight = slope_s != nullptr ? w.data() : nullptr;
    makespans(l, end_s, slope_s);
}

void PeriodicPipeline::makespan_affine_lanes(const double* a_s, const double* b_s, const double* r,
                                             const double* transfer_s, const double* start_s,
                                             std::size_t lanes, double* end_s) const {
    if (lanes == 0) return;
    const auto nc = static_cast<std::size_t>(classes());
    thread_local std::vector<double> dur, tr;
    dur.resize(nc * lanes);
    tr.resize(nc * lanes);
    for (std::size_t c = 0; c < nc; ++c) {
        for (std::size_t k = 0; k < lanes; ++k) {
            dur[c * lanes + k] = a_s[c] + r[k] * b_s[c];
            tr[c * lanes + k] = transfer_s[k];
        }
    }
    Lanes l;
    l.lanes = lanes;
    l.op_s = dur.data();
    l.transfer_s = tr.data();
    l.start_s = start_s;
    makespans(l, end_s);
}

double PeriodicPipeline::critical_path_content(const double* op_s, const double* weight_s,
                                               double transfer_s, double stage0_start_s,
                                               double* content_s) const {
    // one lane per stage, all with the same durations (so the same path), each weighing only
    // its stage's ops
    const int p = program_.shape.stages;
    const auto lanes = static_cast<std::size_t>(p);
    const auto nc = static_cast<std::size_t>(classes());
    thread_local std::vector<double> dur, tr, w, start, end;
    dur.resize(nc * lanes);
    w.resize(nc * lanes);
    tr.assign(nc * lanes, transfer_s);
    start.assign(lanes, stage0_start_s);
    end.resize(lanes);
    for (std::size_t c = 0; c < nc; ++c) {
        const int st = stage_of_class(static_cast<int>(c));
        for (std::size_t k = 0; k < lanes; ++k) {
            dur[c * lanes + k] = op_s[c];
            w[c * lanes + k] = static_cast<int>(k) == st ? weight_s[c] : 0.0;
        }
    }
    Lanes l;
    l.lanes = lanes;
    l.op_s = dur.data();
    l.transfer_s = tr.data();
    l.start_s = start.data();
    l.weight = w.data();
    makespans(l, end.data(), content_s);
    return end[0];
}

std::shared_ptr<const PeriodicPipeline> cached_periodic_pipeline(const PipelineShape& shape) {
    thread_local std::map<std::tuple<int, int, int>, std::shared_ptr<const PeriodicPipeline>> cache;
    const auto key = std::make_tuple(shape.stages, shape.chunks, shape.microbatches);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    auto pipe = std::make_shared<const PeriodicPipeline>(shape);
    if (cache.size() >= 1024) cache.clear();
    cache.emplace(key, pipe);
    return pipe;
}

}  // namespace prism::timing
