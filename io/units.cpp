#include "io/units.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "src/common/error.hpp"

namespace prism::io {

namespace {

struct Unit {
    std::string_view name;
    Quantity quantity;
    double to_si;
};

// Decimal prefixes for bytes and bits (SI, as storage and network vendors use them), binary
// prefixes for KiB..PiB (IEC 80000-13). Bit rates are divided by 8 to give bytes/s.
constexpr std::array kUnits{
    Unit{"ns", Quantity::time, 1e-9},
    Unit{"us", Quantity::time, 1e-6},
    Unit{"\u00b5s", Quantity::time, 1e-6},
    Unit{"ms", Quantity::time, 1e-3},
    Unit{"s", Quantity::time, 1.0},
    Unit{"min", Quantity::time, 60.0},
    Unit{"h", Quantity::time, 3600.0},
    Unit{"day", Quantity::time, 86400.0},
    Unit{"days", Quantity::time, 86400.0},

    Unit{"B", Quantity::bytes, 1.0},
    Unit{"KB", Quantity::bytes, 1e3},
    Unit{"kB", Quantity::bytes, 1e3},
    Unit{"MB", Quantity::bytes, 1e6},
    Unit{"GB", Quantity::bytes, 1e9},
    Unit{"TB", Quantity::bytes, 1e12},
    Unit{"PB", Quantity::bytes, 1e15},
    Unit{"KiB", Quantity::bytes, 1024.0},
    Unit{"MiB", Quantity::bytes, 1024.0 * 1024.0},
    Unit{"GiB", Quantity::bytes, 1024.0 * 1024.0 * 1024.0},
    Unit{"TiB", Quantity::bytes, 1024.0 * 1024.0 * 1024.0 * 1024.0},
    Unit{"PiB", Quantity::bytes, 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0},

    Unit{"B/s", Quantity::bandwidth, 1.0},
    Unit{"KB/s", Quantity::bandwidth, 1e3},
    Unit{"kB/s", Quantity::bandwidth, 1e3},
    Unit{"MB/s", Quantity::bandwidth, 1e6},
    Unit{"GB/s", Quantity::bandwidth, 1e9},
    Unit{"TB/s", Quantity::bandwidth, 1e12},
    Unit{"KiB/s", Quantity::bandwidth, 1024.0},
    Unit{"MiB/s", Quantity::bandwidth, 1024.0 * 1024.0},
    Unit{"GiB/s", Quantity::bandwidth, 1024.0 * 1024.0 * 1024.0},
    Unit{"TiB/s", Quantity::bandwidth, 1024.0 * 1024.0 * 1024.0 * 1024.0},
    Unit{"b/s", Quantity::bandwidth, 1.0 / 8},
    Unit{"Kb/s", Quantity::bandwidth, 1e3 / 8},
    Unit{"kb/s", Quantity::bandwidth, 1e3 / 8},
    Unit{"Mb/s", Quantity::bandwidth, 1e6 / 8},
    Unit{"Gb/s", Quantity::bandwidth, 1e9 / 8},
    Unit{"Tb/s", Quantity::bandwidth, 1e12 / 8},
    Unit{"bit/s", Quantity::bandwidth, 1.0 / 8},
    Unit{"Kbit/s", Quantity::bandwidth, 1e3 / 8},
    Unit{"kbit/s", Quantity::bandwidth, 1e3 / 8},
    Unit{"Mbit/s", Quantity::bandwidth, 1e6 / 8},
    Unit{"Gbit/s", Quantity::bandwidth, 1e9 / 8},
    Unit{"Tbit/s", Quantity::bandwidth, 1e12 / 8},

    Unit{"FLOP/s", Quantity::flop_rate, 1.0},
    Unit{"GFLOP/s", Quantity::flop_rate, 1e9},
    Unit{"TFLOP/s", Quantity::flop_rate, 1e12},
    Unit{"PFLOP/s", Quantity::flop_rate, 1e15},
};

const Unit* find_unit(std::string_view name) {
    for (const Unit& unit : kUnits) {
        if (unit.name == name) return &unit;
    }
    return nullptr;
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    return text;
}

std::string expected(Quantity quantity) {
    return fmt::format("expected {} (e.g. \"{}\")", quantity_phrase(quantity),
                       quantity_example(quantity));
}

}  // namespace

std::string quantity_phrase(Quantity quantity) {
    switch (quantity) {
        case Quantity::time:
            return "a time";
        case Quantity::bytes:
            return "a size in bytes";
        case Quantity::bandwidth:
            return "a bandwidth";
        case Quantity::flop_rate:
            return "a FLOP rate";
        case Quantity::dimensionless:
            return "a number";
    }
    return "a number";
}

std::string quantity_example(Quantity quantity) {
    switch (quantity) {
        case Quantity::time:
            return "30 min";
        case Quantity::bytes:
            return "80 GB";
        case Quantity::bandwidth:
            return "400 Gb/s";
        case Quantity::flop_rate:
            return "989 TFLOP/s";
        case Quantity::dimensionless:
            return "0.5";
    }
    return "0.5";
}

std::string si_unit(Quantity quantity) {
    switch (quantity) {
        case Quantity::time:
            return "s";
        case Quantity::bytes:
            return "B";
        case Quantity::bandwidth:
            return "B/s";
        case Quantity::flop_rate:
            return "FLOP/s";
        case Quantity::dimensionless:
            return "1";
    }
    return "1";
}

double parse_quantity(std::string_view text, Quantity quantity, bool allow_bare_number) {
    const std::string_view body = trim(text);
    std::string_view digits = body;
    if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
    double number = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
    if (ec != std::errc() || !std::isfinite(number)) {
        throw ConfigError(fmt::format("{}, got \"{}\"", expected(quantity), text));
    }
    const std::string_view unit_name =
        trim(digits.substr(static_cast<std::size_t>(end - digits.data())));

    if (unit_name.empty()) {
        if (quantity == Quantity::dimensionless || allow_bare_number) return number;
        throw ConfigError(
            fmt::format("{}, got \"{}\"; a bare number is not accepted here, give a unit",
                        expected(quantity), text));
    }
    const Unit* unit = find_unit(unit_name);
    if (unit == nullptr) {
        throw ConfigError(
            fmt::format("unknown unit '{}' in \"{}\"; {}", unit_name, text, expected(quantity)));
    }
    if (unit->quantity != quantity) {
        throw ConfigError(fmt::format("{}, got \"{}\"", expected(quantity), text));
    }
    return number * unit->to_si;
}

}  // namespace prism::io
