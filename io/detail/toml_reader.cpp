#include "io/detail/toml_reader.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

namespace prism::io::detail {

ConfigError error_at(const toml::source_region& region, const std::string& message,
                     const std::string& fallback_file) {
    const std::string file = region.path ? *region.path : fallback_file;
    return ConfigError(file, static_cast<std::int64_t>(region.begin.line),
                       static_cast<std::int64_t>(region.begin.column), message);
}

toml::table parse_toml(std::string_view text, const std::string& source_name) {
    try {
        return toml::parse(text, source_name);
    } catch (const toml::parse_error& e) {
        std::string what(e.description());
        if (!what.empty())
            what[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(what[0])));
        throw error_at(e.source(), "invalid TOML: " + what, source_name);
    }
}

void fail_at(const toml::node& node, const std::string& message) {
    throw error_at(node.source(), message);
}

void fail_at(const toml::key& key, const std::string& message) {
    throw error_at(key.source(), message);
}

std::string type_phrase(toml::node_type type) {
    switch (type) {
        case toml::node_type::none:
            return "nothing";
        case toml::node_type::table:
            return "a table";
        case toml::node_type::array:
            return "an array";
        case toml::node_type::string:
            return "a string";
        case toml::node_type::integer:
            return "an integer";
        case toml::node_type::floating_point:
            return "a floating-point number";
        case toml::node_type::boolean:
            return "a boolean";
        case toml::node_type::date:
            return "a date";
        case toml::node_type::time:
            return "a time of day";
        case toml::node_type::date_time:
            return "a date-time";
    }
    return "an unknown type";
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
            diagonal = above;
        }
    }
    return row[b.size()];
}

namespace {

std::string lower(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

}  // namespace

std::string nearest(std::string_view word, const std::vector<std::string>& candidates) {
    std::string best;
    std::size_t best_distance = SIZE_MAX;
    for (const std::string& candidate : candidates) {
        // Case-only differences count as one edit: "TP" is as close to "tp" as "tpp".
        const std::size_t distance =
            lower(word) == lower(candidate) ? 1 : edit_distance(word, candidate);
        if (distance < best_distance) {
            best_distance = distance;
            best = candidate;
        }
    }
    // Close means a typo, not a different word: up to a third of the longer name, at most 3.
    const std::size_t longer = std::max(word.size(), best.size());
    const std::size_t limit = std::max<std::size_t>(1, std::min<std::size_t>(3, longer / 3));
    return best_distance <= limit ? best : std::string();
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
    const std::string best = nearest(word, candidates);
    return best.empty() ? std::string() : fmt::format("; did you mean '{}'?", best);
}

std::string join_key(std::string_view path, std::string_view key) {
    if (path.empty()) return std::string(key);
    return fmt::format("{}.{}", path, key);
}

std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(
    const toml::table& table) {
    std::vector<std::pair<const toml::key*, const toml::node*>> entries;
    for (auto&& [key, node] : table) entries.emplace_back(&key, &node);
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
        const auto& pa = a.first->source().begin;
        const auto& pb = b.first->source().begin;
        return pa.line != pb.line ? pa.line < pb.line : pa.column < pb.column;
    });
    return entries;
}

void check_keys(const toml::table& table, std::string_view path,
                const std::vector<std::string>& allowed) {
    for (const auto& [key, node] : in_file_order(table)) {
        if (std::find(allowed.begin(), allowed.end(), key->str()) != allowed.end()) continue;
        const std::string where =
            path.empty() ? std::string("at top level") : fmt::format("in [{}]", path);
        fail_at(*key, fmt::format("unknown key '{}' {}{}", key->str(), where,
                                  did_you_mean(key->str(), allowed)));
    }
}

namespace {

[[noreturn]] void wrong_type(const toml::node& node, std::string_view key,
                             std::string_view expected) {
    fail_at(node, fmt::format("{}: expected {}, got {}", key, expected, type_phrase(node.type())));
}

}  // namespace

std::int64_t as_integer(const toml::node& node, std::string_view key) {
    if (const auto* value = node.as_integer()) return value->get();
    wrong_type(node, key, "an integer");
}

double as_number(const toml::node& node, std::string_view key) {
    if (const auto* value = node.as_integer()) return static_cast<double>(value->get());
    if (const auto* value = node.as_floating_point()) {
        if (!std::isfinite(value->get())) {
            fail_at(node, fmt::format("{}: value {} is not finite", key, value->get()));
        }
        return value->get();
    }
    wrong_type(node, key, "a number");
}

const std::string& as_string(const toml::node& node, std::string_view key) {
    if (const auto* value = node.as_string()) return value->get();
    wrong_type(node, key, "a string");
}

bool as_bool(const toml::node& node, std::string_view key) {
    if (const auto* value = node.as_boolean()) return value->get();
    wrong_type(node, key, "a boolean");
}

const toml::table& as_table(const toml::node& node, std::string_view key) {
    if (const auto* value = node.as_table()) return *value;
    wrong_type(node, key, "a table");
}

const toml::array& as_array(const toml::node& node, std::string_view key) {
    if (const auto* value = node.as_array()) return *value;
    wrong_type(node, key, "an array");
}

std::int64_t as_integer_in(const toml::node& node, std::string_view key, std::int64_t min,
                           std::int64_t max) {
    const std::int64_t value = as_integer(node, key);
    if (value < min) fail_at(node, fmt::format("{}: value {} must be >= {}", key, value, min));
    if (value > max) fail_at(node, fmt::format("{}: value {} must be <= {}", key, value, max));
    return value;
}

std::string format_number(double value) { return fmt::format("{}", value); }

double as_positive(const toml::node& node, std::string_view key, bool allow_zero) {
    const double value = as_number(node, key);
    if (allow_zero ? value < 0 : value <= 0) {
        fail_at(node, fmt::format("{}: value {} must be {} 0", key, format_number(value),
                                  allow_zero ? ">=" : ">"));
    }
    return value;
}

double as_quantity(const toml::node& node, std::string_view key, Quantity quantity,
                   bool bare_number_in_si, bool allow_zero) {
    double value = 0;
    if (quantity == Quantity::dimensionless) {
        value = as_number(node, key);
    } else if (node.is_number()) {
        if (!bare_number_in_si) {
            fail_at(node, fmt::format("{}: expected {} with a unit (e.g. \"{}\"), got the bare "
                                      "number {}; bare numbers are not accepted here",
                                      key, quantity_phrase(quantity), quantity_example(quantity),
                                      format_number(as_number(node, key))));
        }
        value = as_number(node, key);
    } else if (const auto* text = node.as_string()) {
        try {
            value = parse_quantity(text->get(), quantity, bare_number_in_si);
        } catch (const ConfigError& e) {
            fail_at(node, fmt::format("{}: {}", key, e.what()));
        }
    } else {
        fail_at(node,
                fmt::format("{}: expected {} (e.g. \"{}\"), got {}", key, quantity_phrase(quantity),
                            quantity_example(quantity), type_phrase(node.type())));
    }
    if (allow_zero ? value < 0 : value <= 0) {
        fail_at(node, fmt::format("{}: value {} must be {} 0", key, format_number(value),
                                  allow_zero ? ">=" : ">"));
    }
    return value;
}

std::string as_choice(const toml::node& node, std::string_view key,
                      const std::vector<std::string>& choices) {
    const std::string& value = as_string(node, key);
    if (std::find(choices.begin(), choices.end(), value) != choices.end()) return value;
    std::string list;
    for (const std::string& choice : choices) {
        list += list.empty() ? "" : ", ";
        list += fmt::format("\"{}\"", choice);
    }
    fail_at(node, fmt::format("{}: unknown value '{}'; expected one of {}", key, value, list));
}

}  // namespace prism::io::detail
