#pragma once

// Whole-file reads through zlib, which reads gzip and plain files alike.

#include <cstdint>
#include <filesystem>
#include <string>

namespace prism::io::detail {

/// The contents of `path`, decompressed when it is gzip, at most `limit_bytes` of them. Throws
/// ConfigError naming the path when the file does not exist, is a directory or cannot be
/// opened, when its gzip stream is corrupt or truncated, or when it holds (decompressed) more
/// than `limit_bytes`.
std::string read_maybe_gzip(const std::filesystem::path& path, std::uintmax_t limit_bytes);

}  // namespace prism::io::detail
