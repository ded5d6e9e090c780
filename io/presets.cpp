#include "io/presets.hpp"

#include <algorithm>

#include "io/detail/toml_embedded.hpp"

namespace prism::io {

std::optional<std::string_view> preset_text(std::string_view kind, std::string_view name) {
    for (const detail::EmbeddedPreset& preset : detail::embedded_presets()) {
        if (preset.kind == kind && preset.name == name) return preset.text;
    }
    return std::nullopt;
}

std::vector<std::string> preset_names(std::string_view kind) {
    std::vector<std::string> names;
    for (const detail::EmbeddedPreset& preset : detail::embedded_presets()) {
        if (preset.kind == kind) names.emplace_back(preset.name);
    }
    std::sort(names.begin(), names.end());
    return names;
}

}  // namespace prism::io
