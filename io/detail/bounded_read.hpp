#pragma once

// Reads of input files with a size limit (io/work_limits.hpp): a device (/dev/urandom,
// /dev/zero), a directory or a far larger file than the reader's kind stops at once with a
// message naming the file, instead of filling memory.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace prism::io::detail {

/// The contents of `path`, at most `limit_bytes`. `what` names the kind of file in messages
/// ("step file"). Throws ConfigError naming the path when the file does not exist, is a
/// directory, cannot be read, or holds more than `limit_bytes` (read up to `limit_bytes` + 1).
std::string read_bounded(const std::filesystem::path& path, std::uintmax_t limit_bytes,
                         std::string_view what);

}  // namespace prism::io::detail
