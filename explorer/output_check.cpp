#include "explorer/output_check.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "src/common/error.hpp"

namespace prism::explorer {

void check_new_output(const std::string& output, const std::string& option,
                      const std::vector<std::string>& inputs, bool overwrite) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto status = fs::status(output, ec);
    if (!fs::exists(status)) return;
    for (const std::string& input : inputs) {
        if (fs::equivalent(output, input, ec)) {
            throw ConfigError(fmt::format("{} {}: is the input {}; write to another file", option,
                                          output, input));
        }
    }
    if (!fs::is_regular_file(status)) {
        throw ConfigError(fmt::format(
            "{} {}: exists and is not a regular file (a directory, a device)", option, output));
    }
    if (!overwrite) {
        throw ConfigError(
            fmt::format("{} {}: file exists (use --overwrite to replace it)", option, output));
    }
}

}  // namespace prism::explorer
