#include "io/detail/gzip_file.hpp"

#include <zlib.h>

#include <fmt/format.h>

#include "src/common/error.hpp"

namespace prism::io::detail {

std::string read_maybe_gzip(const std::filesystem::path& path) {
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr) {
        throw IoError(fmt::format("{}: cannot open the file", path.string()));
    }
    std::string out;
    std::string chunk(1 << 20, '\0');
    for (;;) {
        const int got = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
        if (got < 0) {
            int code = 0;
            const std::string message = gzerror(file, &code);
            gzclose(file);
            throw IoError(fmt::format("{}: corrupt gzip stream: {}", path.string(), message));
        }
        if (got == 0) break;
        out.append(chunk.data(), static_cast<std::size_t>(got));
    }
    // gzread reports a stream cut short only as an end of file; gzerror says which.
    int code = 0;
    const std::string message = gzerror(file, &code);
    gzclose(file);
    if (code != Z_OK) {
        throw IoError(fmt::format("{}: corrupt gzip stream: {}", path.string(), message));
    }
    return out;
}

}  // namespace prism::io::detail
