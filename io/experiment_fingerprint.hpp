#pragma once

// The identity of an experiment for `--resume`: what it says, not how it is written.

#include <string>
#include <string_view>
#include <vector>

#include "src/model/spec.hpp"

namespace prism::io {

/// SHA-256 (hex) of the parsed experiment TOML in a canonical form: one line per value,
/// `dotted.key = value` with keys sorted, floats at 17 significant digits, strings escaped,
/// inline and standard tables alike. Comments, blank lines, key order and number spellings
/// (1e11, 1.0e11) do not change it; any value does. Text that does not parse hashes as text.
std::string experiment_fingerprint(std::string_view toml_text);

/// The experiment's identity with the files it reads besides itself (variability profiles):
/// their canonical forms follow its own, each under its name, so that editing a profile's
/// values blocks `--resume` as editing the experiment does. Without included files it is
/// experiment_fingerprint(toml_text).
std::string experiment_fingerprint(std::string_view toml_text,
                                   const std::vector<IncludedFile>& included);

/// The canonical form itself (for tests and for the record).
std::string canonical_experiment(std::string_view toml_text);

}  // namespace prism::io
