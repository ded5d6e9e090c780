#pragma once

// A manifest of measured runs at several scales of one platform, for `prism steps fit
// --runs-from RUNS.toml` (issue 35, item 5):
//
//   [[group]]
//   experiment = "eos_dfw_h100_512.toml"   # the runs' configuration
//   runs = ["a.csv", "b.csv"]              # one step CSV per run
//
// Paths are relative to the manifest's folder.

#include <filesystem>
#include <string>
#include <vector>

namespace prism::io {

struct RunsGroup {
    std::string experiment;         ///< resolved path
    std::vector<std::string> runs;  ///< resolved paths
};

/// The manifest's groups, in file order. Throws ConfigError naming file:line:column and key
/// (not a table array, a missing or unknown key, an empty list, a value that is not a string),
/// or the path when it cannot be read (at most kMaxExperimentFileBytes).
std::vector<RunsGroup> read_runs_manifest(const std::filesystem::path& path);

}  // namespace prism::io
