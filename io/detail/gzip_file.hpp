#pragma once

// Whole-file reads through zlib, which reads gzip and plain files alike.

#include <filesystem>
#include <string>

namespace prism::io::detail {

/// The contents of `path`, decompressed when it is gzip. Throws IoError naming the path when
/// the file cannot be opened or its gzip stream is corrupt or truncated.
std::string read_maybe_gzip(const std::filesystem::path& path);

}  // namespace prism::io::detail
