#pragma once

// `eval --point tp=8,checkpoint_interval=30 min` as the lines of a TOML table, so that its
// values are read exactly as the experiment file's are.

#include <string>
#include <string_view>

namespace prism::io::detail {

/// One `key = value` line per comma-separated item (the item's position is its line number in
/// messages); a value that is not TOML by itself (30 min, full) becomes a string. Throws
/// ConfigError "--point: 'tp' is not key=value".
std::string point_assignments_as_toml(std::string_view text);

}  // namespace prism::io::detail
