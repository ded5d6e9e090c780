#include "io/detail/bounded_read.hpp"

#include <fstream>

#include <fmt/format.h>

#include "src/common/error.hpp"

namespace prism::io::detail {

std::string read_bounded(const std::filesystem::path& path, std::uintmax_t limit_bytes,
                         std::string_view what) {
    const std::string name = path.string();
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(status)) {
        throw ConfigError(fmt::format("{}: no such {}", name, what));
    }
    if (std::filesystem::is_directory(status)) {
        throw ConfigError(fmt::format("{}: is a directory, not a {}", name, what));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ConfigError(fmt::format("{}: cannot open the {}", name, what));
    // in pieces: the memory held grows with what the file holds, never past the limit
    std::string text;
    std::string chunk(std::size_t{1} << 20, '\0');
    while (in && text.size() <= limit_bytes) {
        in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    }
    if (in.bad()) throw ConfigError(fmt::format("{}: cannot read the {}", name, what));
    if (text.size() > limit_bytes) {
        throw ConfigError(
            fmt::format("{}: larger than {} bytes, the limit for a {} (is it the "
                        "right file?)",
                        name, limit_bytes, what));
    }
    return text;
}

}  // namespace prism::io::detail
