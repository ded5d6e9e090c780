#pragma once

// [variability] tables and the distributions inside them.

#include <string>

#include <toml++/toml.h>

#include "src/model/spec.hpp"

namespace prism::io::detail {

/// A distribution written as an inline table, e.g. {dist="lognormal", cv=0.05}. `key` is the
/// dotted name for messages ("variability.gemm"). Fills mean and cv for every kind (empirical:
/// sample statistics; mixture: the mixture's moments).
DistributionSpec parse_distribution(const toml::node& node, const std::string& key);

/// Applies the keys of a [variability] table (or of a variability preset file when
/// `is_preset`) onto `spec`: keys present override, keys absent keep their value. The `preset`
/// key is not handled here (the loader resolves it first).
void apply_variability_table(const toml::table& table, const std::string& path, bool is_preset,
                             VariabilitySpec& spec);

/// Applies a variability preset or profile file: the keys of [variability] at top level, or
/// under a [variability] table with `name`, `source` and `description` beside it. `name` is
/// how the file was named (preset name or path); spec.source becomes "name: <source>".
void apply_variability_file(const toml::table& file, const std::string& name,
                            VariabilitySpec& spec);

}  // namespace prism::io::detail
