#include "explorer/table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "src/common/error.hpp"

namespace prism::explorer {
namespace {

/// "1.2500" -> "1.25", "3.000" -> "3"; text without a point is returned as is.
std::string strip_trailing_zeros(std::string s) {
    if (s.find('.') == std::string::npos) return s;
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
}

std::string printf_double(const char* format, int precision, double value) {
    char buf[64];
    const int n = std::snprintf(buf, sizeof buf, format, precision, value);
    return std::string(buf, static_cast<std::size_t>(std::max(0, n)));
}

std::string pad(const std::string& text, std::size_t width, bool right) {
    if (text.size() >= width) return text;
    const std::string fill(width - text.size(), ' ');
    return right ? fill + text : text + fill;
}

void rstrip(std::string& line) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
}

}  // namespace

std::string format_number(double value, int significant_digits) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    if (value == 0.0) return "0";
    const int digits = std::max(1, significant_digits);
    // The exponent after rounding to `digits` digits decides the notation, so 99999.7 becomes
    // 1e+05 and 0.99996 becomes 1.
    const std::string scientific = printf_double("%.*e", digits - 1, value);
    const std::size_t e = scientific.find('e');
    const int exponent = std::atoi(scientific.c_str() + e + 1);
    if (exponent >= 5 || exponent < -3) {
        return strip_trailing_zeros(scientific.substr(0, e)) + scientific.substr(e);
    }
    const int decimals = std::max(0, digits - 1 - exponent);
    return strip_trailing_zeros(printf_double("%.*f", decimals, value));
}

std::string Cell::text(int significant_digits) const {
    if (const auto* d = std::get_if<double>(&value_)) return format_number(*d, significant_digits);
    if (const auto* i = std::get_if<std::int64_t>(&value_)) return std::to_string(*i);
    if (const auto* u = std::get_if<std::uint64_t>(&value_)) return std::to_string(*u);
    if (const auto* s = std::get_if<std::string>(&value_)) return *s;
    return "-";
}

std::string format_table(const std::vector<TableColumn>& columns,
                         const std::vector<std::vector<Cell>>& rows, const TableOptions& options) {
    const std::size_t ncols = columns.size();
    std::vector<std::vector<std::string>> texts(rows.size(), std::vector<std::string>(ncols, "-"));
    std::vector<std::size_t> widths(ncols);
    std::vector<bool> right(ncols);
    bool any_unit = false;
    for (std::size_t c = 0; c < ncols; ++c) {
        widths[c] = std::max(columns[c].header.size(), columns[c].unit.size());
        any_unit = any_unit || !columns[c].unit.empty();
        right[c] = columns[c].align == Align::right;
    }
    for (std::size_t r = 0; r < rows.size(); ++r) {
        if (rows[r].size() > ncols) {
            throw Error("format_table: row " + std::to_string(r) + " has " +
                        std::to_string(rows[r].size()) + " cells, expected at most " +
                        std::to_string(ncols));
        }
        for (std::size_t c = 0; c < rows[r].size(); ++c) {
            texts[r][c] = rows[r][c].text(columns[c].significant_digits);
            if (columns[c].align == Align::automatic && rows[r][c].is_number()) right[c] = true;
        }
    }
    for (const auto& row : texts) {
        for (std::size_t c = 0; c < ncols; ++c) widths[c] = std::max(widths[c], row[c].size());
    }

    std::string out;
    const auto emit = [&](const auto& cell_text) {
        std::string line = options.indent;
        for (std::size_t c = 0; c < ncols; ++c) {
            if (c > 0) line += options.separator;
            line += pad(cell_text(c), widths[c], right[c]);
        }
        rstrip(line);
        out += line;
        out += '\n';
    };
    emit([&](std::size_t c) { return columns[c].header; });
    if (options.unit_row && any_unit) emit([&](std::size_t c) { return columns[c].unit; });
    if (options.rule) emit([&](std::size_t c) { return std::string(widths[c], '-'); });
    for (const auto& row : texts) emit([&](std::size_t c) { return row[c]; });
    return out;
}

}  // namespace prism::explorer
