#pragma once

// Experiment files: TOML -> prism::Experiment, with every error located at the offending key or
// value (`FILE:LINE:COL: section.key: problem`). Tables: [experiment] [model] [training]
// [hardware.<name>]... [cluster] [defaults] [space] [constraints] [objectives] [evaluation]
// [variability] [failures] [cotune]; see tests/data/experiments/full.toml for every key.

#include <filesystem>
#include <string>
#include <string_view>

#include "src/model/metrics.hpp"
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

/// The hint after an unknown metric name: "; renamed 'megatron_tflops_per_gpu'" for a metric
/// renamed since an earlier model version (prism::renamed_metric), else "; did you mean 'x'?"
/// with the nearest name of `schema` when it is a likely typo, else "".
std::string metric_suggestion(const std::string& name, const prism::MetricSchema& schema);

}  // namespace prism::io
