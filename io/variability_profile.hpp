#pragma once

// Variability profiles as files: the keys of an experiment's [variability] table at top level
// with `name`, `source` and `description` (the format of configs/presets/variability/*.toml),
// every value preceded by comment lines that say where it comes from. `prism trace fit` and
// `prism steps fit` write them; an experiment uses one with `[variability] preset = "x.toml"`
// (a path relative to the experiment file) or, copied into configs/presets/variability/, by
// its name.

#include <array>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "src/model/spec.hpp"

namespace prism::io {

struct VariabilityProfile {
    std::string name;
    std::string source;               ///< one line: where the numbers come from
    std::string description;          ///< one line
    std::vector<std::string> header;  ///< comment lines at the top (without '#')
    VariabilitySpec spec;
    /// Comment lines above each value (without '#'); empty: no comment.
    std::array<std::vector<std::string>, kKernelClassCount> class_notes;
    std::vector<std::string> regime_notes, spatial_notes, slow_notes;
    std::vector<std::string> hiccup_notes;    ///< above the hiccup keys (written when q > 0)
    std::vector<std::string> level_notes;     ///< above regime_levels (written when set)
    std::vector<std::string> periodic_notes;  ///< above [periodic] (written when it has events)
    std::vector<std::string> stall_notes;     ///< above the stall keys (written when active)
};

/// A distribution as an inline TOML table: {dist = "lognormal", cv = 0.0213}.
std::string format_distribution(const DistributionSpec& spec);

/// The profile's file text.
std::string format_variability_profile(const VariabilityProfile& profile);

/// Writes the profile to `path` (replacing it). Throws IoError naming the path.
void write_variability_profile(const std::filesystem::path& path,
                               const VariabilityProfile& profile);

/// The text of a profile file, read with a limit (kMaxProfileFileBytes, io/work_limits.hpp).
/// Throws ConfigError naming the path when it does not exist, is a directory, is larger than
/// the limit, cannot be read, or is empty (or only blanks): "no variability" is the preset
/// 'none', never a file that says nothing.
std::string read_profile_text(const std::filesystem::path& path);

/// A variability profile by embedded preset name ("prism-paper") or, for a name ending in
/// ".toml", from that file (read_profile_text). Throws ConfigError naming the preset or file
/// (unknown preset, unreadable, empty or too large file, invalid keys or values with
/// file:line:column).
VariabilitySpec load_variability(std::string_view preset_or_path);

}  // namespace prism::io
