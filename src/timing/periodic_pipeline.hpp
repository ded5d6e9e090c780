#pragma once

// Pipeline makespans whose cost does not grow with the number of microbatches, for schedules in
// which every microbatch's op of one (stage, chunk, direction) takes the same time (the
// deterministic step, the analytic evaluator's passes, Monte Carlo's mean-duration runs; not
// Monte Carlo's draws, whose every op has its own duration).
//
// 1F1B and interleaved 1F1B repeat themselves after the warm-up: the finish times of one steady
// round are a max-plus linear function of the previous round's (Cohen et al., "A linear-system-
// theoretic view of discrete-event processes", 1983; Baccelli et al., "Synchronization and
// Linearity", 1992, chapter 3), so from some round on they are periodic: x(k + c) = x(k) + c
// lambda. The schedule is compiled into prefix, body and suffix (detail/round_program.hpp) and
// evaluated round by round with the state taken relative to one of its ops. The relative state
// is a deterministic function of the previous one (same durations every round), so once it
// repeats bit for bit after c rounds it repeats forever: the remaining whole cycles are skipped
// (their offsets added as a multiple of one cycle's sum) and the last rounds and the cool-down
// are run op by op. The results equal the op-by-op DAG (FlatPipeline) up to rounding: the
// relative values round differently from absolute ones (tested within 1e-12 relative).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/timing/detail/round_program.hpp"
#include "src/timing/detail/round_runner.hpp"
#include "src/timing/pipeline.hpp"

namespace prism::timing {

class PeriodicPipeline {
  public:
    /// the most lanes one pass of makespans() evaluates together (more go in several passes);
    /// a pass pads its lanes to 4 or a multiple of 8
    static constexpr std::size_t kLaneBlock = 64;

    /// Throws ModelError for an invalid shape (see build_schedule).
    explicit PeriodicPipeline(const PipelineShape& shape);

    const PipelineShape& shape() const { return program_.shape; }
    /// Op classes: 2 p v; class_of(stage, chunk, backward) = 2 (stage v + chunk) + backward.
    int classes() const { return 2 * program_.shape.stages * program_.shape.chunks; }
    int class_of(int stage, int chunk, bool backward) const {
        return 2 * (stage * program_.shape.chunks + chunk) + (backward ? 1 : 0);
    }
    int stage_of_class(int cls) const { return cls / (2 * program_.shape.chunks); }
    const detail::RoundProgram& program() const { return program_; }
    /// The program's rows (Monte Carlo runs its drawn schedules on them).
    const detail::RoundExec& exec() const { return exec_; }

    /// Schedules evaluated together, one per lane; arrays are class-major: x[c * lanes + k].
    struct Lanes {
        std::size_t lanes = 0;
        const double* op_s = nullptr;        ///< duration of an op of class c in lane k, >= 0
        const double* transfer_s = nullptr;  ///< transfer into an op of class c (if it has one)
        const double* start_s = nullptr;     ///< [lanes]: when stage 0 may begin
        /// optional: the weight of class c in lane k's critical-path content
        const double* weight = nullptr;
    };

    /// Makespans (the finish of the last op over all stages) into end_s[lanes]. With `content`
    /// (needs Lanes::weight), content[k] is the sum of the weights of the ops on one critical
    /// path of lane k: each op takes the predecessor whose arrival set its start, ties to the
    /// stage predecessor (an op without one: to its input over the start), and the path ends
    /// at the lowest stage among those that finish last. Durations must be >= 0 (the
    /// own-forward edge is left out, see detail/round_program.hpp).
    void makespans(const Lanes& lanes, double* end_s, double* content = nullptr) const;

    /// One schedule: op_s[class], one transfer time for every transfer.
    double makespan(const double* op_s, double transfer_s, double stage0_start_s) const;

    /// FlatPipeline::makespan_stage_lanes with per-class arrays (op_s, scaled_s: [class]) and
    /// one transfer time: lane k in [lane_first[s], lane_first[s + 1]) has stage s's ops take
    /// op_s + delta[k] scaled_s, the others op_s (lanes below lane_first[0]: no change);
    /// slope_s[k] the content in scaled_s of stage s's ops on a critical path (see makespans).
    void makespan_stage_lanes(const double* op_s, const double* scaled_s, double transfer_s,
                              double stage0_start_s, const std::int32_t* lane_first,
                              const double* delta, double* end_s, double* slope_s = nullptr) const;

    /// FlatPipeline::makespan_affine_lanes with per-class a_s, b_s: lane k has an op take
    /// a_s + r[k] b_s, transfers transfer_s[k], stage 0 start start_s[k]; any number of lanes.
    void makespan_affine_lanes(const double* a_s, const double* b_s, const double* r,
                               const double* transfer_s, const double* start_s, std::size_t lanes,
                               double* end_s) const;

    /// Per stage, the sum of weight_s[class] over the ops of one critical path (the path of
    /// makespans(), one for all stages) into content_s[stages]; returns the makespan.
    double critical_path_content(const double* op_s, const double* weight_s, double transfer_s,
                                 double stage0_start_s, double* content_s) const;

    /// Rounds the last makespans() call of this thread skipped (0 when nothing repeated: the
    /// diagnostic of tests and benchmarks).
    static std::int64_t last_skipped_rounds();

    /// This thread's totals since it started (diagnostics of benchmarks): passes (one per
    /// block of lanes), lanes, steady rounds, rounds skipped, ops run (per lane block), skips
    /// by a cycle and by a drift.
    using Totals = detail::PassTotals;
    static Totals& totals();

  private:
    detail::RoundProgram program_;
    detail::RoundExec exec_;
};

/// The PeriodicPipeline of `shape`, built once per thread and shape and shared (as
/// cached_flat_pipeline). Throws as the constructor does.
std::shared_ptr<const PeriodicPipeline> cached_periodic_pipeline(const PipelineShape& shape);

}  // namespace prism::timing
