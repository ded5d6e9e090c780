#pragma once

// The [cotune] table: a learning-rate / batch-size / throughput co-tuning study
// (DESIGN.md section 6; every key in tests/data/experiments/full.toml).

#include <toml++/toml.h>

#include "src/model/spec.hpp"

namespace prism::io::detail {

/// Reads [cotune] into `experiment.cotune` and checks it against the rest of the experiment
/// (model, training, and the `learning_rate` / `b_noise` dimensions of [space] and [defaults],
/// which must already be parsed). Every error is a ConfigError at the offending key.
void parse_cotune(const toml::table& table, Experiment& experiment);

/// A `b_noise` dimension ([space] or [defaults]) needs a [cotune] table with the constant
/// noise model; `root` is the file's root table (for the error's location).
void check_b_noise_dimension(const toml::table& root, const Experiment& experiment);

}  // namespace prism::io::detail
