#pragma once

// What an evaluation returns: a flat row of named metrics whose names and units are fixed by
// the experiment (the schema), so the result store, the Pareto front and the report treat all
// metrics alike.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace prism {

struct MetricInfo {
    std::string name;  ///< snake_case, unit-suffixed: "step_time_p95_s"
    std::string unit;  ///< "s", "tokens/s", "GiB", "1" (dimensionless), ...
    std::string description;
};

using MetricSchema = std::vector<MetricInfo>;

/// Index of `name` in `schema`, or -1.
int find_metric(const MetricSchema& schema, const std::string& name);

/// The current name of a metric renamed since model version 2026.11.26.4 (`tflops_per_gpu` ->
/// `megatron_tflops_per_gpu`, `time_to_target_p50_s` -> `time_to_target_p50_days`, ...), or ""
/// when `name` was not renamed.
std::string renamed_metric(const std::string& name);

enum class PointStatus : std::uint8_t {
    ok = 0,          ///< evaluated; all metrics valid
    infeasible = 1,  ///< does not fit (memory, ...); metrics that exist are filled, others NaN
    failed = 2,      ///< evaluation threw; `reason` holds the message
    /// not evaluated stochastically: the bounds of its deterministic metrics (bounds.hpp) are
    /// dominated by an evaluated point's objectives, so it is not on the Pareto front; the
    /// deterministic metrics are filled, the stochastic ones NaN
    dominated = 3,
};

/// Result of evaluating one design point. `values` follows the schema; NaN where undefined.
struct PointResult {
    std::uint64_t index = 0;
    PointStatus status = PointStatus::ok;
    std::string reason;          ///< empty when ok
    std::vector<double> values;  ///< schema.size() entries
    /// Step-time histogram (probability per bin over [lo, hi)) when the experiment asks for it.
    std::vector<float> histogram;
    double histogram_lo_s = 0;
    double histogram_hi_s = 0;
};

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace prism
