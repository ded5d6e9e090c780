#include "src/timing/detail/round_program.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "src/common/error.hpp"
#include "src/timing/flat_pipeline.hpp"

namespace prism::timing::detail {

namespace {

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

[[noreturn]] void internal(const PipelineShape& s, const std::string& what) {
    throw ModelError("pipeline rounds (pp " + std::to_string(s.stages) + ", v " +
                     std::to_string(s.chunks) + ", m " + std::to_string(s.microbatches) +
                     "): " + what + " (internal error)");
}

std::int32_t op_class(const PipelineShape& s, const FlatOp& op) {
    return 2 * (op.stage * s.chunks + op.chunk) + (op.backward ? 1 : 0);
}

/// The whole schedule as the prefix (rounds = 0).
RoundProgram flat_program(const PipelineShape& s) {
    const FlatPipeline flat(s);
    RoundProgram pr;
    pr.shape = s;
    for (const auto& op : flat.ops()) {
        pr.prefix.push_back({op_class(s, op), op.stage_prev, op.input});
        pr.prefix_mb.push_back(op.microbatch);
    }
    pr.last = flat.last_on_stage();
    return pr;
}

/// The schedule of one shape with its ops in round order.
struct Analysis {
    PipelineShape shape;
    FlatPipeline flat;
    std::vector<std::int64_t> round;  ///< per op (flat index)
    std::vector<std::int32_t> order;  ///< flat indices in round order
    std::vector<std::int32_t> pos;    ///< flat index -> position in `order`
    std::int64_t first_round = 0;
    std::vector<std::int32_t> round_begin;  ///< positions in `order`, per round from first_round
    std::int64_t steady_first = 0, steady_last = -1;  ///< the run of identical rounds

    std::int64_t steady_count() const { return steady_last - steady_first + 1; }
    std::int32_t begin_of(std::int64_t k) const { return round_begin[k - first_round]; }
    std::int32_t end_of(std::int64_t k) const { return round_begin[k - first_round + 1]; }
};

Analysis analyze(const PipelineShape& s) {
    Analysis a{s, FlatPipeline(s), {}, {}, {}, 0, {}, 0, -1};
    const auto& ops = a.flat.ops();
    const int p = s.stages;
    const std::int64_t total = static_cast<std::int64_t>(s.microbatches) * s.chunks;
    const std::int64_t span = s.chunks == 1 ? 1 : static_cast<std::int64_t>(p) * s.chunks;
    std::vector<std::int64_t> t(ops.size());
    std::vector<char> pair(ops.size());
    std::vector<std::int64_t> jf(p, 0), jb(p, 0);
    a.round.resize(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
        const auto& op = ops[i];
        const std::int64_t w = warmup_forwards(s, op.stage);
        const std::int64_t o = p - 1 - op.stage;
        if (op.backward) {
            t[i] = jb[op.stage] + o;
            pair[i] = jb[op.stage] < total - w;
            ++jb[op.stage];
        } else {
            t[i] = jf[op.stage] - w + o;
            pair[i] = jf[op.stage] >= w;
            ++jf[op.stage];
        }
        a.round[i] = floor_div(t[i], span);
    }
    a.order.resize(ops.size());
    std::iota(a.order.begin(), a.order.end(), 0);
    std::stable_sort(a.order.begin(), a.order.end(), [&](std::int32_t x, std::int32_t y) {
        return std::make_tuple(a.round[x], t[x], ops[x].backward, ops[x].stage) <
               std::make_tuple(a.round[y], t[y], ops[y].backward, ops[y].stage);
    });
    a.pos.resize(ops.size());
    for (size_t k = 0; k < a.order.size(); ++k) a.pos[a.order[k]] = static_cast<std::int32_t>(k);
    for (size_t i = 0; i < ops.size(); ++i) {
        for (const auto pred : {ops[i].stage_prev, ops[i].input}) {
            if (pred >= 0 && a.pos[pred] >= a.pos[i]) internal(s, "round order breaks an edge");
        }
    }
    // rounds: their extent and whether they are steady (every stage runs R pairs, none ends)
    a.first_round = a.round[a.order.front()];
    const std::int64_t last_round = a.round[a.order.back()];
    const auto count = static_cast<size_t>(last_round - a.first_round + 1);
    std::vector<std::int64_t> ops_in(count, 0);
    std::vector<char> regular(count, 1);
    for (size_t i = 0; i < ops.size(); ++i) {
        const auto k = static_cast<size_t>(a.round[i] - a.first_round);
        ++ops_in[k];
        if (!pair[i]) regular[k] = 0;
    }
    for (const auto i : a.flat.last_on_stage()) regular[a.round[i] - a.first_round] = 0;
    a.round_begin.assign(count + 1, 0);
    for (size_t k = 0; k < count; ++k) {
        a.round_begin[k + 1] = a.round_begin[k] + static_cast<std::int32_t>(ops_in[k]);
        if (ops_in[k] != 2 * span * p) regular[k] = 0;
    }
    size_t k = 0;
    while (k < count && !regular[k]) ++k;
    if (k == count) return a;
    size_t e = k;
    while (e + 1 < count && regular[e + 1]) ++e;
    for (size_t r = e + 1; r < count; ++r) {
        if (regular[r]) return a;  // a second run: not the expected structure, no rounds
    }
    // the first round must read a prefix: a run from the very first round starts one later
    if (k == 0) ++k;
    if (k > e) return a;
    a.steady_first = a.first_round + static_cast<std::int64_t>(k);
    a.steady_last = a.first_round + static_cast<std::int64_t>(e);
    return a;
}

/// The program of the analysed template shape with `rounds` copies of the body and the suffix's
/// microbatches moved by `mb_shift`.
RoundProgram template_program(const Analysis& a) {
    const PipelineShape& s = a.shape;
    const auto& ops = a.flat.ops();
    const std::int64_t ka = a.steady_first, kb = a.steady_last;
    const int q = s.chunks == 1 ? 1 : s.stages;
    RoundProgram pr;
    pr.shape = s;
    pr.microbatch_step = q;
    pr.rounds = a.steady_count();
    // a reference of op x from an op of round k: same round (pos), previous round (pos), other
    enum class Ref { none, same, prev, other };
    auto classify = [&](std::int32_t x, std::int64_t k) -> std::pair<Ref, std::int32_t> {
        if (x < 0) return {Ref::none, -1};
        const std::int64_t rx = a.round[x];
        if (rx == k) return {Ref::same, a.pos[x] - a.begin_of(k)};
        if (rx == k - 1 && rx >= ka) return {Ref::prev, a.pos[x] - a.begin_of(k - 1)};
        return {Ref::other, -1};
    };
    // the body: round ka + 1 against round ka; rounds ka + 2 .. kb must repeat it
    const std::int64_t kbody = ka + 1;
    const std::int32_t nb = a.end_of(kbody) - a.begin_of(kbody);
    struct Pattern {
        std::int32_t cls;
        std::pair<Ref, std::int32_t> prev, in;
    };
    std::vector<Pattern> body(nb);
    for (std::int64_t k = kbody; k <= kb; ++k) {
        for (std::int32_t b = 0; b < nb; ++b) {
            const std::int32_t i = a.order[a.begin_of(k) + b];
            const Pattern pt{op_class(s, ops[i]), classify(ops[i].stage_prev, k),
                             classify(ops[i].input, k)};
            if (pt.prev.first == Ref::other || pt.in.first == Ref::other ||
                pt.prev.first == Ref::none) {
                internal(s, "a steady round reads beyond the previous round");
            }
            if (k == kbody) {
                body[b] = pt;
            } else if (pt.cls != body[b].cls || pt.prev != body[b].prev || pt.in != body[b].in) {
                internal(s, "steady rounds differ");
            }
        }
    }
    // live positions: those the next round reads, then those only the suffix reads
    std::vector<std::int32_t> live_of(nb, -1);
    for (const auto& pt : body) {
        for (const auto& ref : {pt.prev, pt.in}) {
            if (ref.first == Ref::prev && live_of[ref.second] < 0) {
                live_of[ref.second] = static_cast<std::int32_t>(pr.live.size());
                pr.live.push_back(ref.second);
            }
        }
    }
    const auto body_reads = pr.live.size();
    pr.body_reads = body_reads;
    const std::int32_t suffix_begin = a.end_of(kb);
    const auto n_suffix = static_cast<std::int32_t>(ops.size()) - suffix_begin;
    for (std::int32_t j = 0; j < n_suffix; ++j) {
        const std::int32_t i = a.order[suffix_begin + j];
        for (const auto x : {ops[i].stage_prev, ops[i].input}) {
            if (x < 0 || a.pos[x] >= suffix_begin) continue;
            if (a.round[x] != kb) internal(s, "the suffix reads beyond the last round");
            const std::int32_t b = a.pos[x] - a.begin_of(kb);
            if (live_of[b] < 0) {
                live_of[b] = static_cast<std::int32_t>(pr.live.size());
                pr.live.push_back(b);
            }
        }
    }
    const auto d = static_cast<std::int32_t>(pr.live.size());
    // prefix: every op before round ka, slots its own positions
    const std::int32_t np = a.begin_of(ka);
    for (std::int32_t j = 0; j < np; ++j) {
        const std::int32_t i = a.order[j];
        const auto ref = [&](std::int32_t x) { return x < 0 ? -1 : a.pos[x]; };
        pr.prefix.push_back({op_class(s, ops[i]), ref(ops[i].stage_prev), ref(ops[i].input)});
        pr.prefix_mb.push_back(ops[i].microbatch);
    }
    // the first round: the body's pattern, its previous-round reads in the prefix (entry)
    pr.entry.assign(d, -1);
    for (std::int32_t b = 0; b < nb; ++b) {
        const std::int32_t i = a.order[a.begin_of(ka) + b];
        if (op_class(s, ops[i]) != body[b].cls) internal(s, "the first round differs");
        const std::pair<std::int32_t, std::pair<Ref, std::int32_t>> refs[] = {
            {ops[i].stage_prev, body[b].prev}, {ops[i].input, body[b].in}};
        for (const auto& [x, want] : refs) {
            if (want.first == Ref::none) {
                if (x >= 0) internal(s, "the first round differs");
                continue;
            }
            if (want.first == Ref::same) {
                if (x < 0 || a.round[x] != ka || a.pos[x] - a.begin_of(ka) != want.second) {
                    internal(s, "the first round differs");
                }
                continue;
            }
            if (x < 0 || a.pos[x] >= np) internal(s, "the first round reads beyond the prefix");
            auto& e = pr.entry[live_of[want.second]];
            if (e >= 0 && e != a.pos[x]) internal(s, "the first round's state is ambiguous");
            e = a.pos[x];
        }
        pr.body_mb.push_back(ops[i].microbatch);
        const std::int32_t i2 = a.order[a.begin_of(ka + 1) + b];
        if (ops[i2].microbatch != ops[i].microbatch + q) internal(s, "rounds do not shift by q");
    }
    if (d == 0 || body_reads == 0 || pr.entry[0] < 0) internal(s, "rounds without state");
    // body and suffix slots
    const auto slot = [&](const std::pair<Ref, std::int32_t>& ref) -> std::int32_t {
        if (ref.first == Ref::none) return -1;
        return ref.first == Ref::prev ? live_of[ref.second] : d + ref.second;
    };
    for (const auto& pt : body) pr.body.push_back({pt.cls, slot(pt.prev), slot(pt.in)});
    for (std::int32_t j = 0; j < n_suffix; ++j) {
        const std::int32_t i = a.order[suffix_begin + j];
        const auto ref = [&](std::int32_t x) -> std::int32_t {
            if (x < 0) return -1;
            if (a.pos[x] >= suffix_begin) return d + nb + (a.pos[x] - suffix_begin);
            return live_of[a.pos[x] - a.begin_of(kb)];
        };
        if (ops[i].stage_prev < 0) internal(s, "a stage starts in the suffix");
        pr.suffix.push_back({op_class(s, ops[i]), ref(ops[i].stage_prev), ref(ops[i].input)});
        pr.suffix_mb.push_back(ops[i].microbatch);
    }
    for (const auto i : a.flat.last_on_stage()) {
        if (a.pos[i] < suffix_begin) internal(s, "a stage ends before the suffix");
        pr.last.push_back(d + nb + (a.pos[i] - suffix_begin));
    }
    return pr;
}

/// The template of (p, v): the fewest microbatches with at least three steady rounds, its
/// program and its microbatches (shared per thread).
struct Template {
    int microbatches = 0;  ///< 0: none (the shapes of (p, v) are all compiled flat)
    RoundProgram program;
};

const Template& template_of(int p, int v) {
    thread_local std::map<std::pair<int, int>, Template> cache;
    const auto key = std::make_pair(p, v);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    Template tp;
    const int q = v == 1 ? 1 : p;
    for (int m = v == 1 ? p + 1 : 2 * p, tries = 0; tries < 16; m += q, ++tries) {
        const Analysis a = analyze({p, v, m});
        if (a.steady_count() >= 3) {
            tp.microbatches = m;
            tp.program = template_program(a);
            break;
        }
    }
    if (cache.size() >= 64) cache.clear();
    return cache.emplace(key, std::move(tp)).first->second;
}

}  // namespace

RoundProgram compile_rounds(const PipelineShape& shape) {
    build_schedule(shape);  // validates (throws)
    const Template& tp = template_of(shape.stages, shape.chunks);
    if (tp.microbatches == 0 || shape.microbatches <= tp.microbatches) return flat_program(shape);
    RoundProgram pr = tp.program;
    const int extra = shape.microbatches - tp.microbatches;
    pr.shape = shape;
    pr.rounds += extra / pr.microbatch_step;
    for (auto& mb : pr.suffix_mb) mb += extra;
    return pr;
}

namespace {

/// Puts the ops of one section (rows base .. base + n) in order of their depth in the section
/// (stable): consecutive ops then rarely wait on each other, where the round order runs long
/// chains (the forwards of one position, stage after stage). Rows that refer into the section
/// are moved along (`refs`).
void level_order(std::vector<ExecOp>& ops, std::int32_t base,
                 const std::vector<std::vector<std::int32_t>*>& refs) {
    const auto n = static_cast<std::int32_t>(ops.size());
    auto inside = [&](std::int32_t r) { return r >= base && r < base + n; };
    std::vector<std::int32_t> level(n, 0);
    for (std::int32_t i = 0; i < n; ++i) {
        for (const auto r : {ops[i].prev, ops[i].in}) {
            if (inside(r)) level[i] = std::max(level[i], level[r - base] + 1);
        }
    }
    std::vector<std::int32_t> order(n), moved(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int32_t a, std::int32_t b) { return level[a] < level[b]; });
    for (std::int32_t k = 0; k < n; ++k) moved[order[k]] = k;
    auto move = [&](std::int32_t r) { return inside(r) ? base + moved[r - base] : r; };
    std::vector<ExecOp> out(n);
    for (std::int32_t i = 0; i < n; ++i) {
        ExecOp e = ops[i];
        e.prev = move(e.prev);
        e.in = move(e.in);
        out[moved[i]] = e;
    }
    ops = std::move(out);
    for (auto* list : refs) {
        for (auto& r : *list) r = move(r);
    }
}

/// Gives the ops of one section (rows old_base + i, in run order) rows from new_base on, a row
/// going back to the pool once its last reader has run (linear scan): rows referred to from
/// outside the section (`refs`, moved along) stay until the section's end. Returns the rows used.
std::int32_t allocate_rows(std::vector<ExecOp>& ops, std::int32_t old_base, std::int32_t new_base,
                           const std::vector<std::vector<std::int32_t>*>& refs) {
    const auto n = static_cast<std::int32_t>(ops.size());
    auto inside = [&](std::int32_t r) { return r >= old_base && r < old_base + n; };
    std::vector<std::int32_t> last_use(n);
    for (std::int32_t i = 0; i < n; ++i) last_use[i] = i;
    for (std::int32_t i = 0; i < n; ++i) {
        for (const auto r : {ops[i].prev, ops[i].in}) {
            if (inside(r)) last_use[r - old_base] = std::max(last_use[r - old_base], i);
        }
    }
    for (auto* list : refs) {
        for (const auto r : *list) {
            if (inside(r)) last_use[r - old_base] = n;
        }
    }
    std::vector<std::int32_t> slot(n), pool;
    std::int32_t used = 0;
    for (std::int32_t i = 0; i < n; ++i) {
        if (pool.empty()) {
            slot[i] = used++;
        } else {
            slot[i] = pool.back();
            pool.pop_back();
        }
        // rows whose last reader is op i are free after it (not for its own output: no alias)
        for (const auto r : {ops[i].prev, ops[i].in}) {
            if (inside(r) && last_use[r - old_base] == i) {
                pool.push_back(slot[r - old_base]);
                last_use[r - old_base] = -1;  // freed once, even when read twice
            }
        }
        if (last_use[i] == i) pool.push_back(slot[i]);  // never read
    }
    auto move = [&](std::int32_t r) { return inside(r) ? new_base + slot[r - old_base] : r; };
    for (std::int32_t i = 0; i < n; ++i) {
        ops[i].prev = move(ops[i].prev);
        ops[i].in = move(ops[i].in);
        ops[i].out = new_base + slot[i];
    }
    for (auto* list : refs) {
        for (auto& r : *list) r = move(r);
    }
    return used;
}

}  // namespace

RoundExec executable(const RoundProgram& pr) {
    RoundExec x;
    const int v = pr.shape.chunks;
    auto exec = [&](const RoundOp& op) {
        ExecOp e;
        e.cls = op.cls;
        e.source = op.prev < 0 ? 1 : 0;
        e.prev = op.prev >= 0 ? kSentinelRows + op.prev : (op.cls < 2 * v ? 1 : 0);
        e.in = op.in >= 0 ? kSentinelRows + op.in : 2;
        return e;
    };
    for (const auto& op : pr.prefix) x.prefix.push_back(exec(op));
    for (const auto& op : pr.body) x.body.push_back(exec(op));
    for (const auto& op : pr.suffix) x.suffix.push_back(exec(op));
    const auto d = static_cast<std::int32_t>(pr.live.size());
    for (const auto b : pr.live) x.live.push_back(kSentinelRows + d + b);
    for (const auto e : pr.entry) x.entry.push_back(e >= 0 ? kSentinelRows + e : -1);
    for (const auto l : pr.last) x.last.push_back(kSentinelRows + l);
    x.rounds = pr.rounds;
    x.state = pr.live.size();
    x.body_reads = pr.body_reads;
    x.classes = static_cast<std::size_t>(2 * pr.shape.stages * pr.shape.chunks);
    const std::int32_t body_base = kSentinelRows + d;
    const auto suffix_base = body_base + static_cast<std::int32_t>(pr.body.size());
    if (x.rounds == 0) {
        level_order(x.prefix, kSentinelRows, {&x.last});
        x.prefix_rows =
            kSentinelRows + allocate_rows(x.prefix, kSentinelRows, kSentinelRows, {&x.last});
        return x;
    }
    level_order(x.prefix, kSentinelRows, {&x.entry});
    level_order(x.body, body_base, {&x.live});
    level_order(x.suffix, suffix_base, {&x.last});
    x.prefix_rows =
        kSentinelRows + allocate_rows(x.prefix, kSentinelRows, kSentinelRows, {&x.entry});
    x.body_end = body_base + allocate_rows(x.body, body_base, body_base, {&x.live});
    const auto end = static_cast<std::int32_t>(x.body_end);
    x.work_rows = end + allocate_rows(x.suffix, suffix_base, end, {&x.last});
    return x;
}

}  // namespace prism::timing::detail
