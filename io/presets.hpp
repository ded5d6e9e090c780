#pragma once

// Presets (models, GPUs with their node, variability profiles) are TOML files under
// configs/presets/<kind>/<name>.toml, embedded into the binary at configure time so that
// `prism` works from any directory.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prism::io {

/// The TOML text of preset `name` of `kind` ("models", "gpus" or "variability"), or nullopt.
std::optional<std::string_view> preset_text(std::string_view kind, std::string_view name);

/// The names of the presets of `kind`, sorted; empty for an unknown kind.
std::vector<std::string> preset_names(std::string_view kind);

}  // namespace prism::io
