#pragma once

// One pass of PeriodicPipeline over a compiled schedule (round_program.hpp) for a block of lanes:
// the prefix op by op, the steady rounds with their state taken relative to one of its ops,
// skipping what repeats, then the suffix. Two ways to skip, both exact up to a stated error:
//  * a cycle: the state after round j is within eps of the state after round j - c; the rounds
//    then repeat with period c (exactly, in exact arithmetic: the rounds are a deterministic
//    max-plus map);
//  * a drift: the state moves by the same vector d over two consecutive rounds, and every max
//    of the body keeps its argument while the margins between its arguments, which move
//    linearly, keep their signs; the rounds until the first margin would change sign are
//    skipped at once (x + n d). This is the transient in which a path family that is not the
//    critical one falls behind at a constant rate (stages whose cycle times nearly tie).
// See find_cycle and drift_skip in round_runner.cpp for the error bounds (at most
// kSkipTolerance of the makespan).

#include <cstddef>
#include <cstdint>

#include "src/timing/detail/round_program.hpp"

namespace prism::timing::detail {

/// The largest error one skip may add, relative to the lane's makespan.
inline constexpr double kSkipTolerance = 1e-13;

/// One pass's inputs: class-major rows (x[c * lanes + k]).
struct PassInputs {
    std::size_t lanes = 0;
    const double* dur = nullptr;
    const double* tr = nullptr;
    const double* weight = nullptr;  ///< null: no content
    const double* start = nullptr;   ///< [lanes]
};

/// Counters of a thread's passes (diagnostics).
struct PassTotals {
    std::int64_t passes = 0, lanes = 0, rounds = 0, skipped = 0, ops = 0, cycles = 0, drifts = 0;
};

/// Makespans into end[lanes] (and the critical paths' contents into content[lanes] when
/// in.weight is set). Adds to `totals`.
void run_pass(const RoundExec& ex, const PassInputs& in, double* end, double* content,
              PassTotals& totals);

}  // namespace prism::timing::detail
