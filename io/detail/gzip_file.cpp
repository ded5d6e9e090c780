#include "io/detail/gzip_file.hpp"

#include <zlib.h>

#include <fmt/format.h>

#include "src/common/error.hpp"

namespace prism::io::detail {

std::string read_maybe_gzip(const std::filesystem::path& path, std::uintmax_t limit_bytes) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(status)) {
        throw ConfigError(fmt::format("{}: no such file", path.string()));
    }
    if (std::filesystem::is_directory(status)) {
        throw ConfigError(fmt::format("{}: is a directory, not a trace", path.string()));
    }
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr) {
        throw ConfigError(fmt::format("{}: cannot open the file", path.string()));
    }
    std::string out;
    std::string chunk(1 << 20, '\0');
    for (;;) {
        if (out.size() > limit_bytes) {
            gzclose(file);
            throw ConfigError(fmt::format(
                "{}: larger than {} bytes (decompressed), the limit for a trace; profile fewer "
                "steps (torch.profiler schedule active=N)",
                path.string(), limit_bytes));
        }
        const int got = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
        if (got < 0) {
            int code = 0;
            const std::string message = gzerror(file, &code);
            gzclose(file);
            throw ConfigError(fmt::format("{}: corrupt gzip stream: {}", path.string(), message));
        }
        if (got == 0) break;
        out.append(chunk.data(), static_cast<std::size_t>(got));
    }
    // gzread reports a stream cut short only as an end of file; gzerror says which.
    int code = 0;
    const std::string message = gzerror(file, &code);
    gzclose(file);
    if (code != Z_OK) {
        throw ConfigError(fmt::format("{}: corrupt gzip stream: {}", path.string(), message));
    }
    return out;
}

}  // namespace prism::io::detail
