#include "io/detail/point_text.hpp"

#include <sstream>

#include <toml++/toml.h>

#include "src/common/error.hpp"

namespace prism::io::detail {

namespace {

std::string trim(std::string s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    return s;
}

}  // namespace

std::string point_assignments_as_toml(std::string_view text) {
    std::string lines;
    std::stringstream in{std::string(text)};
    std::string item;
    while (std::getline(in, item, ',')) {
        const auto eq = item.find('=');
        if (eq == std::string::npos) {
            throw ConfigError("--point: '" + item + "' is not key=value");
        }
        const std::string key = trim(item.substr(0, eq));
        std::string value = trim(item.substr(eq + 1));
        try {
            (void)toml::parse("v = " + value);
        } catch (const toml::parse_error&) {
            std::string quoted = "\"";
            for (const char c : value) {
                if (c == '"' || c == '\\') quoted += '\\';
                quoted += c;
            }
            value = quoted + "\"";
        }
        lines += key + " = " + value + "\n";
    }
    return lines;
}

}  // namespace prism::io::detail
