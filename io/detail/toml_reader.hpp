#pragma once

// Helpers that read toml++ nodes into plain values and turn every problem into a ConfigError
// located at the offending key or value: `FILE:LINE:COL: section.key: problem`.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "io/units.hpp"
#include "src/common/error.hpp"

namespace prism::io::detail {

/// Parses TOML `text`; a syntax error becomes `FILE:LINE:COL: invalid TOML: ...`.
toml::table parse_toml(std::string_view text, const std::string& source_name);

/// The ConfigError for `region` (file from the region's path, or `fallback_file`).
ConfigError error_at(const toml::source_region& region, const std::string& message,
                     const std::string& fallback_file = {});

[[noreturn]] void fail_at(const toml::node& node, const std::string& message);
[[noreturn]] void fail_at(const toml::key& key, const std::string& message);

/// "an integer", "a string", "a number" (floating point), "a table", ...
std::string type_phrase(toml::node_type type);

/// Levenshtein distance.
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate nearest to `word` when it is close enough to be a likely typo, else "".
std::string nearest(std::string_view word, const std::vector<std::string>& candidates);

/// "; did you mean 'tp'?" or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

/// "space" + "tp" -> "space.tp"; "" + "model" -> "model".
std::string join_key(std::string_view path, std::string_view key);

/// The entries of `table` sorted by their position in the file (toml::table is a sorted map).
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& table);

/// Throws on the first key (in file order) that is not in `allowed`:
/// `unknown key 'tpp' in [space]; did you mean 'tp'?` (at the key).
void check_keys(const toml::table& table, std::string_view path,
                const std::vector<std::string>& allowed);

/// Typed reads; `key` is the full dotted name used in messages ("space.tp").
/// Wrong type: `space.tp: expected an integer, got a string`.
std::int64_t as_integer(const toml::node& node, std::string_view key);
double as_number(const toml::node& node, std::string_view key);  ///< integer or float
const std::string& as_string(const toml::node& node, std::string_view key);
bool as_bool(const toml::node& node, std::string_view key);
const toml::table& as_table(const toml::node& node, std::string_view key);
const toml::array& as_array(const toml::node& node, std::string_view key);

/// An integer in [min, max]: `space.tp: value 0 must be >= 1`.
std::int64_t as_integer_in(const toml::node& node, std::string_view key, std::int64_t min,
                           std::int64_t max = INT32_MAX);
/// A number > 0 (`must be > 0`), or >= 0 when `allow_zero`.
double as_positive(const toml::node& node, std::string_view key, bool allow_zero = false);

/// A quantity from a string with a unit ("80 GB"), or from a bare TOML number when
/// `bare_number_in_si` (then it is taken in the SI unit). Must be > 0 (>= 0 with `allow_zero`).
double as_quantity(const toml::node& node, std::string_view key, Quantity quantity,
                   bool bare_number_in_si = false, bool allow_zero = false);

/// One of `choices`: `experiment.on_error: unknown value 'skp'; expected one of "skip", "abort"`.
std::string as_choice(const toml::node& node, std::string_view key,
                      const std::vector<std::string>& choices);

/// Formats a number for messages without trailing zeros ("0", "0.5", "1e+12").
std::string format_number(double value);

}  // namespace prism::io::detail
