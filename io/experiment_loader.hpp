#pragma once

// Experiment files: TOML -> prism::Experiment, with every error located at the offending key or
// value (`FILE:LINE:COL: section.key: problem`). Tables: [experiment] [model] [training]
// [hardware.<name>]... [cluster] [defaults] [space] [constraints] [objectives] [evaluation]
// [variability] [failures] [cotune]; see tests/data/experiments/full.toml for every key.

#include <filesystem>
#include <string>
#include <string_view>

#include "src/model/spec.hpp"

namespace prism::io {

/// Reads and parses the experiment file at `path`. Experiment::file is `path` as given and
/// Experiment::text the exact file text. Throws ConfigError: the file cannot be read (naming the
/// path), malformed TOML, an unknown key (with the nearest valid key when close), a wrong type
/// or unit, a value out of range, an unknown preset or metric.
prism::Experiment load_experiment(const std::filesystem::path& path);

/// Parses experiment TOML `text`; `source_name` is used in error locations and stored in
/// Experiment::file. Same errors as load_experiment.
prism::Experiment parse_experiment(std::string_view text, const std::string& source_name);

/// The design point of `eval --point`: "tp=8,pp=2,checkpoint_interval=30 min" applied to the
/// experiment's defaults, each value read exactly as in the TOML file (units included; a
/// value that is not TOML by itself is a string), `gpus` last (dp = gpus / (tp*pp*cp)).
/// ConfigError "--point:2:25: point.checkpoint_interval: ..." (line = the item's position).
prism::DesignPoint parse_point_assignments(const prism::Experiment& experiment,
                                           std::string_view text);

}  // namespace prism::io
