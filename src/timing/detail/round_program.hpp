#pragma once

// A pipeline schedule compiled into rounds, for PeriodicPipeline. Each op on stage s gets a
// position t in "pairs": the j-th forward t = j - W_s + o_s, the j-th backward t = j + o_s
// (W_s the stage's warm-up forwards, o_s = p - 1 - s). Every edge of the schedule (stage order,
// transfers) then goes from t - 1 or t to t, and shifting every forward and backward by R = 1
// pair (1F1B) or R = p v pairs (interleaved: one group of p microbatches) maps the steady state
// onto itself (microbatch + q, q = 1 or p). A round is R consecutive positions; the rounds in
// which every stage runs steady forward/backward pairs (and no stage's last op) are identical
// up to that shift. So the schedule of m microbatches is a prefix (warm-up), `rounds` copies of
// one body, and a suffix (cool-down), each a list of ops in an order that respects the edges;
// a round reads the previous one only through a few `live` ops (the state).
//
// The own-forward edge (a backward waits for its forward) is left out: that forward ran earlier
// on the same stage, so with durations >= 0 it never finishes after the stage predecessor.

#include <cstdint>
#include <vector>

#include "src/timing/pipeline.hpp"

namespace prism::timing::detail {

/// One op: its class (2 (stage v + chunk) + backward) and the slots of its stage predecessor
/// and of its input (the op whose output it receives by a transfer); -1 for none. An op without
/// a stage predecessor is its stage's first: it may start at 0 (at the start on stage 0).
struct RoundOp {
    std::int32_t cls = 0;
    std::int32_t prev = -1;
    std::int32_t in = -1;
};

struct RoundProgram {
    PipelineShape shape;
    /// Slots are prefix positions.
    std::vector<RoundOp> prefix;
    /// Slots [0, D) are the state (the live ops of the previous round), D + i body op i.
    std::vector<RoundOp> body;
    /// Slots [0, D) are the state after the last round, D + B + i suffix op i.
    std::vector<RoundOp> suffix;
    /// live[k]: the body position whose op state slot k holds (those the next round reads
    /// first, then those only the suffix reads).
    std::vector<std::int32_t> live;
    /// entry[k]: the prefix position whose op state slot k holds before the first round (-1:
    /// the first round does not read it).
    std::vector<std::int32_t> entry;
    /// Each stage's last op, stage order: a prefix position when rounds == 0, else a slot of
    /// the suffix's numbering.
    std::vector<std::int32_t> last;
    /// Copies of the body between prefix and suffix (0: the prefix is the whole schedule).
    std::int64_t rounds = 0;
    /// The state slots the body reads (the first ones of `live`): the round's true state, the
    /// others follow from it.
    std::size_t body_reads = 0;

    /// Microbatch of each op (for tests): prefix and suffix as they are, body ops of the first
    /// round (round j adds j * microbatch_step).
    std::vector<std::int32_t> prefix_mb, body_mb, suffix_mb;
    int microbatch_step = 1;

    std::size_t state_size() const { return live.size(); }
};

/// One op as PeriodicPipeline runs it: its class, the rows of its stage predecessor and input
/// in the pass's buffer, whether it is its stage's first op (`source`), and its own row.
struct ExecOp {
    std::int32_t cls = 0;
    std::int32_t prev = 0;
    std::int32_t in = 0;
    std::int32_t source = 0;
    std::int32_t out = 0;
};

/// Rows 0, 1, 2 of every buffer hold 0, the start of stage 0 and -inf: the stage predecessor of
/// a stage's first op is row 0 or 1 (the start), the input of an op without one row 2.
inline constexpr std::int32_t kSentinelRows = 3;

/// A RoundProgram with its slots as buffer rows: the prefix buffer holds the prefix ops from
/// row 3; the work buffer the state at rows 3 + k, then the body's rows, then the suffix's. An
/// op's row is reused once every op that reads it has run (a row holds one value at a time of
/// the few that are live together), so the buffers stay small (in cache) whatever the schedule.
struct RoundExec {
    std::vector<ExecOp> prefix, body, suffix;
    std::vector<std::int32_t> live;   ///< work rows of the body ops the state holds
    std::vector<std::int32_t> entry;  ///< prefix rows the state starts from (-1: 0)
    std::vector<std::int32_t> last;   ///< prefix rows if rounds == 0, else work rows
    std::int64_t rounds = 0;
    std::size_t state = 0;        ///< D
    std::size_t body_reads = 0;   ///< RoundProgram::body_reads
    std::size_t classes = 0;      ///< op classes, 2 p v
    std::size_t prefix_rows = 0;  ///< rows of the prefix buffer (sentinels included)
    std::size_t body_end = 0;     ///< the first row after the body's (the suffix's first)
    std::size_t work_rows = 0;    ///< rows of the work buffer (sentinels included)
};

/// The rows of `program`.
RoundExec executable(const RoundProgram& program);

/// Compiles `shape` (throws ModelError for an invalid one, as build_schedule). The cost does
/// not grow with the microbatches: the prefix, body and suffix come from the schedule of a
/// few more microbatches than stages (v = 1) or groups of p (v > 1), and only `rounds` depends
/// on the microbatches. Small shapes give rounds == 0 (the whole schedule as the prefix).
RoundProgram compile_rounds(const PipelineShape& shape);

}  // namespace prism::timing::detail
