#pragma once

// The model's one entry point for the explorer: a design point in, a row of metrics out.

#include <cstdint>

#include "src/model/metrics.hpp"
#include "src/model/spec.hpp"

namespace prism {

/// The version of the evaluators' numerics and random streams, stored in every result file:
/// the same experiment and seed give the same results only under the same model version, so
/// `--resume` refuses a file made under another. Bump it whenever an evaluator's output for a
/// given point changes (grids, approximations, random streams).
inline constexpr const char* kModelVersion = "2026.11.22.3";

/// The metrics `Evaluator::evaluate` fills for this experiment, in order (depends on the
/// evaluation settings: slow-step deltas, run deadlines, sensitivity on/off).
MetricSchema metric_schema(const Experiment& experiment);

/// Evaluates design points of one experiment. Construction evaluates the baseline point (if
/// any) once, for the speedup metric. Thread-compatible: `evaluate` is const.
class Evaluator {
  public:
    explicit Evaluator(const Experiment& experiment);

    const MetricSchema& schema() const noexcept { return schema_; }

    /// Evaluates `point` (design-space index `index`, which keys its random streams).
    /// Infeasible points come back with status infeasible and a reason; a point the model cannot
    /// evaluate throws ModelError. Deterministic for a given (experiment seed, index).
    PointResult evaluate(const DesignPoint& point, std::uint64_t index) const;

  private:
    const Experiment* experiment_;
    MetricSchema schema_;
    double baseline_step_s_ = 0;  ///< 0 = no baseline
};

}  // namespace prism
