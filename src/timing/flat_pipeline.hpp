#pragma once

// An allocation-free form of a pipeline schedule for repeated evaluation (Monte Carlo): the ops
// of all stages in one dependency-respecting order, each with the index of the op before it on
// its stage and of the op whose output it consumes. Evaluating it with given durations gives
// exactly what timing::evaluate_pipeline gives with the same durations.

#include <cstdint>
#include <memory>
#include <vector>

#include "src/timing/pipeline.hpp"

namespace prism::timing {

struct FlatOp {
    std::int32_t stage = 0;
    std::int32_t chunk = 0;
    std::int32_t microbatch = 0;
    bool backward = false;
    std::int32_t stage_prev = -1;   ///< previous op on the same stage, -1 if first
    std::int32_t input = -1;        ///< op whose output arrives by a transfer, -1 if none
    std::int32_t own_forward = -1;  ///< for a backward op whose input is on the same stage
};

class FlatPipeline {
  public:
    /// the most lanes makespan_stage_lanes runs in one pass (see there)
    static constexpr std::size_t kStageLaneBlock = 64;

    FlatPipeline() = default;
    /// Throws ModelError for an invalid shape (see build_schedule).
    explicit FlatPipeline(const PipelineShape& shape);

    const PipelineShape& shape() const { return shape_; }
    const std::vector<FlatOp>& ops() const { return ops_; }
    std::size_t size() const { return ops_.size(); }
    /// Index of each stage's last op (in ops()), stage order.
    const std::vector<std::int32_t>& last_on_stage() const { return last_on_stage_; }

    /// Finish time of the last op over all stages. `op_s[i]` is the duration of ops()[i],
    /// `transfer_s[i]` the transfer into op i (ignored when it has no input), `stage0_start_s`
    /// when stage 0 may begin (others begin at 0). `finish` is scratch of size() entries.
    double makespan(const double* op_s, const double* transfer_s, double stage0_start_s,
                    double* finish) const;

    /// Makespans of lane_first[stages] schedules in one pass: lane k in [lane_first[s],
    /// lane_first[s + 1]) has the ops of stage s take op_s[i] + delta[k] * scaled_s[i] and the
    /// others op_s[i]; lanes below lane_first[0] have no change. Transfers and the start as in
    /// makespan(); the makespans go to end_s.
    /// Each lane equals makespan() with that lane's durations exactly.
    /// With `slope_s`, slope_s[k] is the sum of scaled_s over the ops of lane k's stage on a
    /// critical path of lane k (ties as in critical_path; 0 for the lanes without a stage): the
    /// derivative of the lane's makespan in delta[k] where one path is critical, a subgradient
    /// (the slope of a path that is a longest one there) at a tie.
    void makespan_stage_lanes(const double* op_s, const double* scaled_s, const double* transfer_s,
                              double stage0_start_s, const std::int32_t* lane_first,
                              const double* delta, double* end_s, double* slope_s = nullptr) const;

    /// Makespans of up to four schedules in one pass whose durations are affine in a lane
    /// parameter: lane k has op i take a_s[i] + r[k] * b_s[i], transfers transfer_s[k] and stage
    /// 0 start start_s[k]; the makespans go to end_s[0 .. lanes). Each equals makespan() with
    /// those durations exactly (the same roundings).
    void makespan_affine_lanes(const double* a_s, const double* b_s, const double* r,
                               const double* transfer_s, const double* start_s, std::size_t lanes,
                               double* end_s) const;
    /// The ops of one longest path (a critical path), last op first, for durations as in
    /// makespan(); `finish` is scratch of size() entries. Ties go to the stage predecessor,
    /// then the own forward, then the input.
    std::vector<std::int32_t> critical_path(const double* op_s, const double* transfer_s,
                                            double stage0_start_s, double* finish) const;

    /// Natural log of the number of distinct paths from a first op to a last op (through
    /// stage order, own-forward and transfer edges): the union-bound count over critical paths.
    double log_paths() const { return log_paths_; }

  private:
    PipelineShape shape_;
    double log_paths_ = 0;
    std::vector<FlatOp> ops_;
    std::vector<std::int32_t> last_on_stage_;
};

/// The FlatPipeline of `shape`, built once per thread and shape and shared: a sweep evaluates
/// millions of points with a handful of shapes. Throws as the constructor does.
std::shared_ptr<const FlatPipeline> cached_flat_pipeline(const PipelineShape& shape);

}  // namespace prism::timing
