#pragma once

// The [constraints], [memory] and [evaluation] tables of an experiment file.

#include <toml++/toml.h>

#include "src/model/spec.hpp"

namespace prism::io::detail {

/// Reads [constraints] (min_gpus, max_gpus, gpus_in, max_memory_fraction). Throws ConfigError
/// at the offending node.
void parse_constraints(const toml::table& table, Constraints& constraints);

/// Reads [memory] (cuda_context, workspace, nccl_per_communicator: sizes, "512 MiB") onto
/// `reserve`, which holds the defaults (prism::default_memory_reserve). Throws ConfigError at
/// the offending node.
void parse_memory(const toml::table& table, MemoryReserveSpec& reserve);

/// Reads [evaluation] (method, samples, slow_deltas, histogram, histogram_bins, sensitivity,
/// grid_points, prune, verify); verify = "montecarlo" needs the analytic method. Throws
/// ConfigError at the offending node.
void parse_evaluation(const toml::table& table, EvaluationSpec& evaluation);

}  // namespace prism::io::detail
