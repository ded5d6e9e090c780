#include "src/timing/detail/round_runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

// x86-64: AVX2 / AVX-512 clones of the lane loops chosen at load time (plain max, add and
// compare, so every clone gives the same bits)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PRISM_ROUND_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PRISM_ROUND_CLONES
#endif

namespace prism::timing::detail {

namespace {

using V4 = double __attribute__((vector_size(4 * sizeof(double))));
using V8 = double __attribute__((vector_size(8 * sizeof(double))));

/// One group of W lanes (V = W doubles) of op i: ops_impl's loop body. (Vectors pass through
/// memory, not by value: a vector returned by value would change the ABI between the clones.)
template <class V, bool kContent, bool kMargin>
inline __attribute__((always_inline)) void ops_group(std::size_t q, std::size_t pa, std::size_t pb,
                                                     std::size_t pc, bool source, double* out,
                                                     double* oc, double* mgi, const double* x,
                                                     const double* xc, const PassInputs& in) {
    V y, t, a, d;
    __builtin_memcpy(&y, x + pb + q, sizeof y);
    __builtin_memcpy(&t, in.tr + pc + q, sizeof t);
    __builtin_memcpy(&a, x + pa + q, sizeof a);
    __builtin_memcpy(&d, in.dur + pc + q, sizeof d);
    y += t;
    const auto take = source ? a <= y : a < y;
    if constexpr (kMargin) {
        const V m = a - y;
        __builtin_memcpy(mgi + q, &m, sizeof m);
    }
    const V f = (take ? y : a) + d;
    __builtin_memcpy(out + q, &f, sizeof f);
    if constexpr (kContent) {
        V cb, ca, w;
        __builtin_memcpy(&cb, xc + pb + q, sizeof cb);
        __builtin_memcpy(&ca, xc + pa + q, sizeof ca);
        __builtin_memcpy(&w, in.weight + pc + q, sizeof w);
        const V c = (take ? cb : ca) + w;
        __builtin_memcpy(oc + q, &c, sizeof c);
    }
}

/// Ops ops[0 .. n) into their rows (op.out) of x: finish = max(stage predecessor, input +
/// transfer) + duration, the max as std::max(ready, arrival) in FlatPipeline::makespan. With
/// kContent, each op's content (rows of xc) is its predecessor's whose arrival set its start
/// (ties: the stage predecessor; a stage's first op: its input over the start) plus its weight.
/// With kMargin, mg[i * lanes + l] = the stage predecessor's arrival less the input's. The
/// lanes (4 or a multiple of 8, as PeriodicPipeline pads them) go in vectors of eight or four
/// (GCC vector extension: lane-wise IEEE add, compare and select, the same bits as scalar code).
template <bool kContent, bool kMargin>
inline __attribute__((always_inline)) void ops_dispatch(const ExecOp* ops, std::size_t n, double* x,
                                                        double* xc, double* mg,
                                                        const PassInputs& in) {
    const std::size_t lanes = in.lanes;
    if (lanes % 4 != 0) throw std::logic_error("round_runner: lanes not padded");
    for (std::size_t i = 0; i < n; ++i) {
        const ExecOp& op = ops[i];
        const std::size_t pa = static_cast<std::size_t>(op.prev) * lanes;
        const std::size_t pb = static_cast<std::size_t>(op.in) * lanes;
        const std::size_t pc = static_cast<std::size_t>(op.cls) * lanes;
        const std::size_t po = static_cast<std::size_t>(op.out) * lanes;
        double* out = x + po;
        double* oc = kContent ? xc + po : nullptr;
        // a stage's first op takes its input on a tie with the start
        const bool source = op.source != 0;
        double* mgi = kMargin ? mg + i * lanes : nullptr;
        if (lanes % 8 == 0) {
            for (std::size_t q = 0; q < lanes; q += 8) {
                ops_group<V8, kContent, kMargin>(q, pa, pb, pc, source, out, oc, mgi, x, xc, in);
            }
        } else {
            for (std::size_t q = 0; q < lanes; q += 4) {
                ops_group<V4, kContent, kMargin>(q, pa, pb, pc, source, out, oc, mgi, x, xc, in);
            }
        }
    }
}

PRISM_ROUND_CLONES
void ops_lanes(const ExecOp* ops, std::size_t n, double* x, const PassInputs& in) {
    ops_dispatch<false, false>(ops, n, x, nullptr, nullptr, in);
}

PRISM_ROUND_CLONES
void ops_content(const ExecOp* ops, std::size_t n, double* x, double* xc, const PassInputs& in) {
    ops_dispatch<true, false>(ops, n, x, xc, nullptr, in);
}

PRISM_ROUND_CLONES
void ops_margin(const ExecOp* ops, std::size_t n, double* x, double* mg, const PassInputs& in) {
    ops_dispatch<false, true>(ops, n, x, nullptr, mg, in);
}

PRISM_ROUND_CLONES
void ops_content_margin(const ExecOp* ops, std::size_t n, double* x, double* xc, double* mg,
                        const PassInputs& in) {
    ops_dispatch<true, true>(ops, n, x, xc, mg, in);
}

/// One lane with margins (a lane continued alone that measures a drift): the plain loop.
void ops_one_margin(const ExecOp* ops, std::size_t n, double* x, double* xc, double* mg,
                    const PassInputs& in) {
    for (std::size_t i = 0; i < n; ++i) {
        const ExecOp& op = ops[i];
        const double y = x[op.in] + in.tr[op.cls];
        const double a = x[op.prev];
        const bool take = op.source != 0 ? a <= y : a < y;
        mg[i] = a - y;
        if (xc != nullptr) xc[op.out] = xc[take ? op.in : op.prev] + in.weight[op.cls];
        x[op.out] = std::max(a, y) + in.dur[op.cls];
    }
}

/// One lane without contents or margins: the scalar loop (no vector setup per op).
void ops_scalar(const ExecOp* ops, std::size_t n, double* x, const PassInputs& in) {
    const double* dur = in.dur;
    const double* tr = in.tr;
    for (std::size_t i = 0; i < n; ++i) {
        const ExecOp& op = ops[i];
        x[op.out] = std::max(x[op.prev], x[op.in] + tr[op.cls]) + dur[op.cls];
    }
}

/// One lane with contents, no margins: the scalar loop, the selects as blends.
void ops_scalar_content(const ExecOp* ops, std::size_t n, double* x, double* xc,
                        const PassInputs& in) {
    const double* dur = in.dur;
    const double* tr = in.tr;
    const double* w = in.weight;
    for (std::size_t i = 0; i < n; ++i) {
        const ExecOp& op = ops[i];
        const double y = x[op.in] + tr[op.cls];
        const double a = x[op.prev];
        const bool take = op.source != 0 ? a <= y : a < y;
        const double c = xc[take ? op.in : op.prev];
        x[op.out] = std::max(a, y) + dur[op.cls];
        xc[op.out] = c + w[op.cls];
    }
}

void run_ops(const std::vector<ExecOp>& ops, double* x, double* xc, double* mg,
             const PassInputs& in) {
    const std::size_t n = ops.size();
    if (in.lanes == 1 && mg != nullptr) {
        ops_one_margin(ops.data(), n, x, xc, mg, in);
    } else if (xc != nullptr && in.lanes == 1) {
        ops_scalar_content(ops.data(), n, x, xc, in);
    } else if (xc != nullptr) {
        if (mg != nullptr) {
            ops_content_margin(ops.data(), n, x, xc, mg, in);
        } else {
            ops_content(ops.data(), n, x, xc, in);
        }
    } else if (mg != nullptr) {
        ops_margin(ops.data(), n, x, mg, in);
    } else if (in.lanes == 1) {
        ops_scalar(ops.data(), n, x, in);
    } else {
        ops_lanes(ops.data(), n, x, in);
    }
}

/// Rows 0, 1, 2 of a buffer of `lanes` columns: 0, the start, -inf (contents: 0).
void set_sentinels(double* x, double* xc, const PassInputs& in) {
    for (std::size_t l = 0; l < in.lanes; ++l) {
        x[l] = 0.0;
        x[in.lanes + l] = in.start[l];
        x[2 * in.lanes + l] = -HUGE_VAL;
    }
    if (xc != nullptr) std::fill(xc, xc + kSentinelRows * in.lanes, 0.0);
}

template <class T>
T* grown(std::vector<T>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

/// Rounds whose state is kept to find a repetition: cycles longer than this are not skipped.
/// A cycle of the rounds' max-plus map is a circuit through at most all D state ops, so its
/// length is at most D; several circuits of equal weight can make the period their lcm, which
/// is rare: the longest seen on random stage times is 9 rounds (pp 32).
std::int64_t max_cycle(const RoundExec& ex) {
    return std::clamp<std::int64_t>(static_cast<std::int64_t>(ex.state), 8, 64);
}

/// The steady rounds of one pass and what they keep: the state (rows 3 .. 3 + D of the work
/// buffer, relative to slot 0), the offsets the rebasing took out, and a ring of past states.
/// Lanes skip on their own: lane l has run round j + ahead[l] after the pass's round j, and
/// once it has run them all its state is kept aside (frozen) while the others go on.
/// A Rounds' scratch: a pass's, and another for the lanes it continues alone.
struct RoundsStorage {
    std::vector<double> hist, histc, href, hcref, margins, frozen, frozenc, fps;
};

class Rounds {
  public:
    /// The state is in rows 3 .. 3 + D of x (xc), `rounds` rounds to run.
    Rounds(const RoundExec& ex, const PassInputs& in, double* x, double* xc, double* offset,
           double* coffset, std::int64_t rounds, RoundsStorage& mem, PassTotals& totals)
        : ex_(ex),
          in_(in),
          rounds_(rounds),
          lanes_(in.lanes),
          state_(ex.state * in.lanes),
          cells_(ex.body.size() * in.lanes),
          ring_(max_cycle(ex) + 1),
          x_(x),
          xc_(xc),
          offset_(offset),
          coffset_(coffset),
          totals_(totals) {
        hist_ = grown(mem.hist, ring_ * state_);
        histc_ = xc ? grown(mem.histc, ring_ * state_) : nullptr;
        href_ = grown(mem.href, ring_ * lanes_);
        hcref_ = xc ? grown(mem.hcref, ring_ * lanes_) : nullptr;
        margin_ = grown(mem.margins, 2 * cells_);
        frozen_ = grown(mem.frozen, state_);
        frozenc_ = xc ? grown(mem.frozenc, state_) : nullptr;
        fp_ = grown(mem.fps, ring_ * lanes_);
        lane_.assign(lanes_, Lane{});
    }

    void run();

  private:
    /// Per lane: rounds skipped, the oldest round of the ring it continues (since its last
    /// skip), rounds left to record margins in, whether it still looks for repetitions, and
    /// whether it has run every round (its state and offsets then kept aside).
    struct Lane {
        std::int64_t ahead = 0, from = 0;
        int measuring = 0;
        bool detect = true, done = false;
        double offset = 0, coffset = 0;
    };

    double* st(double* b) const { return b + kSentinelRows * lanes_; }
    const double* hist(std::int64_t j) const { return hist_ + (j % ring_) * state_; }
    const double* histc(std::int64_t j) const { return histc_ + (j % ring_) * state_; }
    double ref(std::int64_t j, std::size_t l) const { return href_[(j % ring_) * lanes_ + l]; }
    /// the sum of the body's state slots after round j, to filter repetitions cheaply: two
    /// states within e of each other slot by slot have sums within (slots) e
    double fingerprint(std::int64_t j, std::size_t l) const {
        return fp_[(j % ring_) * lanes_ + l];
    }
    double cref(std::int64_t j, std::size_t l) const { return hcref_[(j % ring_) * lanes_ + l]; }

    void rebase(double* b, double* refs, double* offset);
    void keep(std::int64_t j);
    bool find_cycle(std::int64_t j, std::size_t l);
    bool drifting(std::int64_t j, std::size_t l) const;
    std::int64_t drift_skip(std::int64_t j, std::size_t l) const;
    void apply_drift(std::int64_t j, std::size_t l, std::int64_t n);
    void freeze(std::size_t l);
    void step(std::int64_t j, std::size_t l);
    void continue_alone(std::int64_t j, std::size_t l);

    const RoundExec& ex_;
    const PassInputs& in_;
    std::int64_t rounds_;
    std::size_t lanes_, state_, cells_;
    std::int64_t ring_;
    double *x_, *xc_, *offset_, *coffset_;
    PassTotals& totals_;
    double *hist_, *histc_, *href_, *hcref_, *margin_, *frozen_, *frozenc_;
    std::vector<Lane> lane_;
    std::size_t active_ = 0;  ///< lanes not done
    double* fp_ = nullptr;    ///< fingerprint(j, l) at [(j % ring) lanes + l]
};

/// The state again from the body rows it holds, relative to slot 0's (whose values, into
/// refs[lanes], add to the offsets).
void Rounds::rebase(double* b, double* refs, double* offset) {
    const double* r0 = b + static_cast<std::size_t>(ex_.live[0]) * lanes_;
    std::memcpy(refs, r0, lanes_ * sizeof(double));
    for (std::size_t k = 0; k < ex_.state; ++k) {
        const double* src = b + static_cast<std::size_t>(ex_.live[k]) * lanes_;
        double* dst = st(b) + k * lanes_;
        for (std::size_t l = 0; l < lanes_; ++l) dst[l] = src[l] - refs[l];
    }
    for (std::size_t l = 0; l < lanes_; ++l) offset[l] += refs[l];
}

/// The state after round j into the ring, with its fingerprints.
void Rounds::keep(std::int64_t j) {
    std::memcpy(hist_ + (j % ring_) * state_, st(x_), state_ * sizeof(double));
    double* fp = fp_ + (j % ring_) * lanes_;
    const double* y = st(x_);
    std::fill(fp, fp + lanes_, 0.0);
    for (std::size_t k = 0; k < ex_.body_reads; ++k) {
        for (std::size_t l = 0; l < lanes_; ++l) fp[l] += y[k * lanes_ + l];
    }
    if (xc_ != nullptr)
        std::memcpy(histc_ + (j % ring_) * state_, st(xc_), state_ * sizeof(double));
}

/// Whether lane l's state after round j is within eps of its state after round j - c for some
/// c, where skipping L = (rounds left) / c cycles of c rounds costs at most kSkipTolerance of the
/// lane's makespan: L eps <= kSkipTolerance |offset + L C|, C the offsets the last c rounds
/// added. If so, skips them (the lane's offsets grow by L C, its round count by L c).
///
/// Why the error is at most L eps: one round maps the absolute finish times of the state by a
/// max-plus linear map (max and + of the same durations), which commutes with adding a constant
/// and never moves two states further apart in the largest difference. If x(j) is within eps of
/// x(j - c) + C, then x(j + c) is within eps of x(j) + C, and so on: x(j + L c) is within L eps
/// of x(j) + L C, what the skip takes. (In exact arithmetic a repeated state repeats forever,
/// eps = 0; the relative values round differently from round to round by an ulp or so, which
/// eps absorbs.) The contents follow the same predecessors as the finish times, a selection
/// plus constants, likewise. Only the slots the body reads are compared: the others follow.
bool Rounds::find_cycle(std::int64_t j, std::size_t l) {
    Lane& ln = lane_[l];
    const std::int64_t left = rounds_ - (j + ln.ahead);
    const std::int64_t cmax = std::min(j - ln.from, ring_ - 1);
    // A filter first: one slot's value (the fingerprint, slot 1: slot 0 is the reference, 0)
    // against a bound above every c's allowance (allowed(c) = tol |offset + n C| / n with
    // n = left / c and |C| a few rounds' offsets: at most tol (|offset| cmax / left + |C|)); a
    // cycle it lets pass is checked in full below, one it rejects is only not skipped
    if (left < 1) return false;
    const double bound = kSkipTolerance * (std::abs(offset_[l]) * static_cast<double>(cmax) /
                                               static_cast<double>(left) +
                                           4.0 * static_cast<double>(cmax) * std::abs(ref(j, l)));
    const double cur = fingerprint(j, l);
    const double fp_bound = static_cast<double>(ex_.body_reads) * bound;
    const std::size_t reads = ex_.body_reads;
    const double* y = st(x_) + l;
    const double* z = xc_ != nullptr ? st(xc_) + l : nullptr;
    for (std::int64_t c = 1; c <= cmax; ++c) {
        if (!(std::abs(cur - fingerprint(j - c, l)) <= fp_bound)) continue;
        const std::int64_t skip = left / c;
        if (skip == 0) break;
        const double* prev = hist(j - c) + l;
        bool within = true;
        for (std::size_t k = 1; k < reads && within; ++k) {
            within = std::abs(y[k * lanes_] - prev[k * lanes_]) <= bound;
        }
        if (!within) continue;
        // the exact allowance: the offsets of rounds j - c + 1 .. j
        const double n = static_cast<double>(skip);
        double sum = 0, csum = 0;
        for (std::int64_t i = j - c + 1; i <= j; ++i) {
            sum += ref(i, l);
            if (xc_ != nullptr) csum += cref(i, l);
        }
        const double allowed = kSkipTolerance * std::abs(offset_[l] + n * sum) / n;
        for (std::size_t k = 1; k < reads && within; ++k) {
            within = std::abs(y[k * lanes_] - prev[k * lanes_]) <= allowed;
        }
        if (within && z != nullptr) {
            const double callowed = kSkipTolerance * std::abs(coffset_[l] + n * csum) / n;
            const double* prevc = histc(j - c) + l;
            for (std::size_t k = 0; k < reads && within; ++k) {
                within = std::abs(z[k * lanes_] - prevc[k * lanes_]) <= callowed;
            }
        }
        if (!within) continue;
        offset_[l] += n * sum;
        if (xc_ != nullptr) coffset_[l] += n * csum;
        ln.ahead += skip * c;
        totals_.skipped += skip * c;
        totals_.cycles += 1;
        return true;
    }
    return false;
}

/// Whether lane l's last three states (rounds j - 2 .. j) moved by nearly the same vector twice
/// (within 1e-6 of a round's offset): a drift worth measuring the margins of.
bool Rounds::drifting(std::int64_t j, std::size_t l) const {
    if (j - 2 < std::max<std::int64_t>(lane_[l].from, 1)) return false;
    const double scale = 1e-6 * std::abs(ref(j, l));
    const double f2 = fingerprint(j, l), f1 = fingerprint(j - 1, l), f0 = fingerprint(j - 2, l);
    if (!(std::abs((f2 - f1) - (f1 - f0)) <= static_cast<double>(ex_.body_reads) * scale)) {
        return false;
    }
    const double *y2 = hist(j) + l, *y1 = hist(j - 1) + l, *y0 = hist(j - 2) + l;
    for (std::size_t k = lanes_; k < state_; k += lanes_) {
        if (!(std::abs((y2[k] - y1[k]) - (y1[k] - y0[k])) <= scale)) return false;
    }
    return true;
}

/// The rounds after round j that a drift lets lane l skip (0: none). The margins of every max
/// of the body in rounds j - 1 and j (margin_ rows (j - 1) % 2 and j % 2) move by mu per round
/// while the state moves by d; as long as no margin changes sign, every max takes the same argument
/// and the rounds are a selection plus constants: the state moves by d each round, exactly. So n
/// rounds may be skipped where n + 1 rounds would not yet flip a margin, and where the rounding
/// does not cost more than kSkipTolerance of the makespan: the two measured moves differ by eps
/// (an ulp or so), which n rounds of a selection map can grow to n^2 eps / 2 at most; a margin
/// within tau of zero that does not move by more than tau a round is a tie whose sides differ by
/// rounding only (tau = kSkipTolerance / 10 of a round's offset: n rounds of it stay within a
/// tenth of the tolerance).
std::int64_t Rounds::drift_skip(std::int64_t j, std::size_t l) const {
    const double* m0 = margin_ + ((j - 1) % 2) * cells_;
    const double* m1 = margin_ + (j % 2) * cells_;
    const double r = std::abs(ref(j, l));
    double rounds = static_cast<double>(rounds_ - (j + lane_[l].ahead));
    const double tau = 0.1 * kSkipTolerance * r;
    for (std::size_t k = l; k < cells_; k += lanes_) {
        const double m = m1[k], mu = m1[k] - m0[k];
        if (!std::isfinite(m) || std::abs(mu) <= tau) continue;  // no input, or no move
        if ((m >= 0) == (mu >= 0)) continue;                     // moving away from zero
        rounds = std::min(rounds, std::floor(std::abs(m) / std::abs(mu)) - 1);
    }
    // the rounding: n^2 eps / 2 <= the tolerance of the makespan (and of the content)
    double eps = std::abs(ref(j, l) - ref(j - 1, l)), ceps = 0;
    const double *y2 = hist(j) + l, *y1 = hist(j - 1) + l, *y0 = hist(j - 2) + l;
    for (std::size_t k = 0; k < state_; k += lanes_) {
        eps = std::max(eps, std::abs((y2[k] - y1[k]) - (y1[k] - y0[k])));
    }
    if (xc_ != nullptr) {
        ceps = std::abs(cref(j, l) - cref(j - 1, l));
        const double *z2 = histc(j) + l, *z1 = histc(j - 1) + l, *z0 = histc(j - 2) + l;
        for (std::size_t k = 0; k < state_; k += lanes_) {
            ceps = std::max(ceps, std::abs((z2[k] - z1[k]) - (z1[k] - z0[k])));
        }
    }
    const double total = std::abs(offset_[l]) + rounds * r;
    if (eps > 0) rounds = std::min(rounds, std::floor(std::sqrt(2 * kSkipTolerance * total / eps)));
    if (ceps > 0) {
        const double ctotal = std::abs(coffset_[l]) + rounds * std::abs(cref(j, l));
        rounds = std::min(rounds, std::floor(std::sqrt(2 * kSkipTolerance * ctotal / ceps)));
    }
    return rounds >= 2 ? static_cast<std::int64_t>(rounds) : 0;
}

/// Skips n rounds of lane l after round j on the drift of its last round.
void Rounds::apply_drift(std::int64_t j, std::size_t l, std::int64_t n) {
    const double dn = static_cast<double>(n);
    double* y = st(x_) + l;
    const double* y1 = hist(j - 1) + l;
    for (std::size_t k = 0; k < state_; k += lanes_) y[k] += dn * (y[k] - y1[k]);
    offset_[l] += dn * ref(j, l);
    if (xc_ != nullptr) {
        double* z = st(xc_) + l;
        const double* z1 = histc(j - 1) + l;
        for (std::size_t k = 0; k < state_; k += lanes_) z[k] += dn * (z[k] - z1[k]);
        coffset_[l] += dn * cref(j, l);
    }
    lane_[l].ahead += n;
    totals_.skipped += n;
    totals_.drifts += 1;
}

/// Lane l has run every round: its state and offsets aside until the suffix.
void Rounds::freeze(std::size_t l) {
    Lane& ln = lane_[l];
    ln.done = true;
    ln.offset = offset_[l];
    for (std::size_t k = l; k < state_; k += lanes_) frozen_[k] = st(x_)[k];
    if (xc_ != nullptr) {
        ln.coffset = coffset_[l];
        for (std::size_t k = l; k < state_; k += lanes_) frozenc_[k] = st(xc_)[k];
    }
    --active_;
}

/// Lane l after the pass's round j (kept in the ring): done, a cycle, or a drift.
void Rounds::step(std::int64_t j, std::size_t l) {
    Lane& ln = lane_[l];
    if (j + ln.ahead >= rounds_) return freeze(l);
    if (!ln.detect) return;
    if (find_cycle(j, l)) {
        // the rest repeats: whole cycles skipped, the remainder (< c rounds) run
        ln.detect = false;
        if (j + ln.ahead >= rounds_) freeze(l);
        return;
    }
    if (ln.measuring > 0 && --ln.measuring == 0) {
        const std::int64_t n = drifting(j, l) ? drift_skip(j, l) : 0;
        if (n == 0) return;
        apply_drift(j, l, n);
        ln.from = j;  // its earlier states in the ring are from before the skip
        if (j + ln.ahead >= rounds_) freeze(l);
        return;
    }
    if (ln.measuring == 0 && drifting(j, l)) ln.measuring = 2;
}

/// Lane l alone from round j on (a lane whose repetition comes late, once most others are
/// done: the rounds then cost one lane, not the block), frozen at the end.
void Rounds::continue_alone(std::int64_t j, std::size_t l) {
    thread_local RoundsStorage mem;
    thread_local std::vector<double> dur, tr, weight, work, workc;
    const std::size_t classes = ex_.classes;
    dur.resize(classes);
    tr.resize(classes);
    for (std::size_t c = 0; c < classes; ++c) {
        dur[c] = in_.dur[c * lanes_ + l];
        tr[c] = in_.tr[c * lanes_ + l];
    }
    if (xc_ != nullptr) {
        weight.resize(classes);
        for (std::size_t c = 0; c < classes; ++c) weight[c] = in_.weight[c * lanes_ + l];
    }
    const PassInputs one{1, dur.data(), tr.data(), xc_ != nullptr ? weight.data() : nullptr,
                         in_.start + l};
    const std::size_t rows = ex_.body_end;
    double* x = grown(work, rows);
    double* xc = xc_ != nullptr ? grown(workc, rows) : nullptr;
    set_sentinels(x, xc, one);
    for (std::size_t k = 0; k < ex_.state; ++k) {
        x[kSentinelRows + k] = st(x_)[k * lanes_ + l];
        if (xc != nullptr) xc[kSentinelRows + k] = st(xc_)[k * lanes_ + l];
    }
    double off = offset_[l], coff = xc_ != nullptr ? coffset_[l] : 0.0;
    const std::int64_t left = rounds_ - (j + lane_[l].ahead);
    Rounds alone(ex_, one, x, xc, &off, xc != nullptr ? &coff : nullptr, left, mem, totals_);
    alone.run();
    for (std::size_t k = 0; k < ex_.state; ++k) {
        st(x_)[k * lanes_ + l] = x[kSentinelRows + k];
        if (xc != nullptr) st(xc_)[k * lanes_ + l] = xc[kSentinelRows + k];
    }
    offset_[l] = off;
    if (xc_ != nullptr) coffset_[l] = coff;
    lane_[l].ahead = rounds_ - j;
    freeze(l);
}

void Rounds::run() {
    active_ = lanes_;
    if (rounds_ <= 2) {
        for (auto& ln : lane_) ln.detect = false;
    }
    keep(0);
    for (std::int64_t j = 1; active_ > 0; ++j) {
        // the margins of round j into row j % 2 while some lane measures them
        bool measure = false;
        for (const auto& ln : lane_) measure = measure || (!ln.done && ln.measuring > 0);
        double* mg = measure ? margin_ + (j % 2) * cells_ : nullptr;
        run_ops(ex_.body, x_, xc_, mg, in_);
        totals_.ops += static_cast<std::int64_t>(ex_.body.size());
        rebase(x_, href_ + (j % ring_) * lanes_, offset_);
        if (xc_ != nullptr) rebase(xc_, hcref_ + (j % ring_) * lanes_, coffset_);
        keep(j);
        const std::int64_t drifts = totals_.drifts;
        for (std::size_t l = 0; l < lanes_; ++l) {
            if (!lane_[l].done) step(j, l);
        }
        // a drift skip changed the state of its lane: its ring entry follows it
        if (totals_.drifts != drifts) keep(j);
        // a few lanes left of many: each goes on alone
        if (lanes_ >= 8 && active_ > 0 && 4 * active_ <= lanes_) {
            for (std::size_t l = 0; l < lanes_; ++l) {
                if (!lane_[l].done) continue_alone(j, l);
            }
        }
    }
    // every lane as it was when it ran its last round
    for (std::size_t l = 0; l < lanes_; ++l) {
        const Lane& ln = lane_[l];
        offset_[l] = ln.offset;
        for (std::size_t k = l; k < state_; k += lanes_) st(x_)[k] = frozen_[k];
        if (xc_ != nullptr) {
            coffset_[l] = ln.coffset;
            for (std::size_t k = l; k < state_; k += lanes_) st(xc_)[k] = frozenc_[k];
        }
    }
}

}  // namespace

void run_pass(const RoundExec& ex, const PassInputs& in, double* end, double* content,
              PassTotals& totals) {
    thread_local std::vector<double> pre_s, prec_s, work_s, workc_s, offset_s, coffset_s;
    const std::size_t lanes = in.lanes;
    const bool with_content = content != nullptr;
    totals.passes += 1;
    totals.lanes += static_cast<std::int64_t>(lanes);
    totals.rounds += ex.rounds;
    totals.ops += static_cast<std::int64_t>(ex.prefix.size() + ex.suffix.size());
    const std::size_t rows_pre = ex.prefix_rows;
    double* pre = grown(pre_s, rows_pre * lanes);
    double* prec = with_content ? grown(prec_s, rows_pre * lanes) : nullptr;
    set_sentinels(pre, prec, in);
    run_ops(ex.prefix, pre, prec, nullptr, in);
    const double *x_end = pre, *xc_end = prec, *offset = nullptr, *coffset = nullptr;
    if (ex.rounds > 0) {
        const std::size_t rows = ex.work_rows;
        double* x = grown(work_s, rows * lanes);
        double* xc = with_content ? grown(workc_s, rows * lanes) : nullptr;
        double* off = grown(offset_s, lanes);
        double* coff = with_content ? grown(coffset_s, lanes) : nullptr;
        set_sentinels(x, xc, in);
        // the state before the first round, relative to slot 0 (its value is the first offset)
        auto enter = [&](const double* from, double* to, double* o) {
            const double* r0 = from + static_cast<std::size_t>(ex.entry[0]) * lanes;
            for (std::size_t k = 0; k < ex.state; ++k) {
                double* dst = to + (kSentinelRows + k) * lanes;
                const std::int32_t e = ex.entry[k];
                for (std::size_t l = 0; l < lanes; ++l) {
                    dst[l] = e >= 0 ? from[static_cast<std::size_t>(e) * lanes + l] - r0[l] : 0.0;
                }
            }
            std::memcpy(o, r0, lanes * sizeof(double));
        };
        enter(pre, x, off);
        if (with_content) enter(prec, xc, coff);
        thread_local RoundsStorage mem;
        Rounds(ex, in, x, xc, off, coff, ex.rounds, mem, totals).run();
        run_ops(ex.suffix, x, xc, nullptr, in);
        x_end = x;
        xc_end = xc;
        offset = off;
        coffset = coff;
    }
    // the makespan: the stages' last ops, ties to the lowest stage (whose content is taken)
    for (std::size_t l = 0; l < lanes; ++l) {
        std::int32_t best = -1;
        double e = 0;
        for (const auto r : ex.last) {
            const double f = x_end[static_cast<std::size_t>(r) * lanes + l];
            if (best < 0 || f > e) {
                e = f;
                best = r;
            }
        }
        end[l] = offset != nullptr ? offset[l] + e : e;
        if (content != nullptr) {
            const double c = xc_end[static_cast<std::size_t>(best) * lanes + l];
            content[l] = coffset != nullptr ? coffset[l] + c : c;
        }
    }
}

}  // namespace prism::timing::detail
