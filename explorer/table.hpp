#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace prism::explorer {

/// Formats a number for a human: `significant_digits` significant digits (at least 1), trailing
/// zeros dropped; fixed notation for 1e-3 <= |value| < 1e5 (numbers from 1e4 keep all their
/// integer digits, so 4 digits give 4 or 5 significant), scientific otherwise ("1.235e+06",
/// "2.5e-05"). Zero is "0" (also -0), NaN "nan", infinities "inf" and "-inf".
std::string format_number(double value, int significant_digits = 4);

/// One table cell: empty (printed "-"), a floating-point number (format_number), an integer
/// (printed exactly) or text.
class Cell {
  public:
    Cell() = default;
    Cell(double value) : value_(value) {}  // NOLINT(google-explicit-constructor): table literals
    Cell(float value) : value_(static_cast<double>(value)) {}  // NOLINT
    template <std::integral T>
    requires(!std::same_as<T, bool>) Cell(T value) : value_(integer(value)) {}  // NOLINT
    Cell(bool value) : value_(std::string(value ? "true" : "false")) {}         // NOLINT
    Cell(std::string text) : value_(std::move(text)) {}                         // NOLINT
    Cell(const char* text) : value_(std::string(text)) {}                       // NOLINT

    bool is_empty() const noexcept { return std::holds_alternative<std::monostate>(value_); }
    bool is_number() const noexcept {
        return std::holds_alternative<double>(value_) ||
               std::holds_alternative<std::int64_t>(value_) ||
               std::holds_alternative<std::uint64_t>(value_);
    }
    /// The cell as printed, with `significant_digits` for floating-point numbers.
    std::string text(int significant_digits) const;

  private:
    using Value = std::variant<std::monostate, double, std::int64_t, std::uint64_t, std::string>;

    // Unsigned values keep their full range (point indices, counts up to 2^64 - 1).
    template <std::integral T>
    static Value integer(T value) {
        if constexpr (std::is_unsigned_v<T>) {
            return static_cast<std::uint64_t>(value);
        } else {
            return static_cast<std::int64_t>(value);
        }
    }

    Value value_;
};

enum class Align {
    automatic,  ///< right when the column holds at least one number, else left
    left,
    right,
};

struct TableColumn {
    std::string header;
    std::string unit;  ///< shown in the unit row under the header ("s", "GiB"); may be empty
    Align align = Align::automatic;
    int significant_digits = 4;
};

struct TableOptions {
    std::string separator = "  ";  ///< between columns
    bool unit_row = true;          ///< print the unit row when some column has a unit
    bool rule = true;              ///< a line of '-' under the header (and unit) rows
    std::string indent;            ///< prefix of every line
};

/// An aligned text table: header row, optional unit row, a rule, then one line per row. Each
/// column is as wide as its widest entry; numbers and headers follow the column's alignment.
/// Lines end in '\n' and carry no trailing spaces. A row shorter than the columns is padded
/// with empty cells; throws prism::Error for a row longer than the columns.
std::string format_table(const std::vector<TableColumn>& columns,
                         const std::vector<std::vector<Cell>>& rows,
                         const TableOptions& options = {});

}  // namespace prism::explorer
