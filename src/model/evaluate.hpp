#pragma once

// The model's one entry point for the explorer: a design point in, a row of metrics out.

#include <cstdint>

#include "src/model/metrics.hpp"
#include "src/model/spec.hpp"

namespace prism {

/// The metrics `evaluate` fills for this experiment, in order (depends on the evaluation
/// settings: slow-step deltas, run deadlines, sensitivity on/off).
MetricSchema metric_schema(const Experiment& experiment);

/// Evaluates `point` (design-space index `index`, which keys its random streams).
/// Infeasible points come back with status infeasible and a reason; a point the model cannot
/// evaluate throws ModelError. Deterministic for a given (experiment seed, index).
PointResult evaluate(const Experiment& experiment, const DesignPoint& point, std::uint64_t index);

}  // namespace prism
