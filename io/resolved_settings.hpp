#pragma once

// `prism validate`: the settings an experiment runs with, each marked when the loader filled
// it (the experiment file does not name it), with why the default is what it is.

#include <string>
#include <vector>

#include "src/model/spec.hpp"

namespace prism::io {

struct ResolvedSetting {
    std::string key;         ///< "training.flash_attention"
    std::string value;       ///< as a TOML value or a phrase: "true", "0.95", "512 MiB"
    bool defaulted = false;  ///< not in the experiment file: the loader's default
    std::string why;         ///< for a default: where it comes from (may be empty)
};

/// The training flags, the [defaults] point's dimensions that [space] does not list, the
/// memory reserve and usable fraction and the evaluation settings of `experiment`, in that
/// order; `defaulted` from the experiment's own text (Experiment::text). Throws ConfigError when
/// the text does not parse (it parsed when the experiment was loaded).
std::vector<ResolvedSetting> resolved_settings(const prism::Experiment& experiment);

}  // namespace prism::io
