#pragma once

// Checks of a parsed experiment as a whole, so that `prism validate` refuses everything `sweep`
// and `eval` would (with the file, line, column and key of the culprit): the baseline point
// against the model and the space, the run's step count against 64-bit overflow, metric names
// that collide, and the work limits of io/work_limits.hpp.

#include <toml++/toml.h>

#include "src/model/spec.hpp"

namespace prism::io::detail {

/// Throws ConfigError located at the offending value. `root` is the parsed file.
void check_experiment(const toml::table& root, const Experiment& experiment);

}  // namespace prism::io::detail
