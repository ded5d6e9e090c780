#include "io/experiment_fingerprint.hpp"

#include <cstdio>
#include <sstream>

#include <toml++/toml.h>

#include "io/sha256.hpp"

namespace prism::io {

namespace {

std::string quoted(std::string_view text) {
    std::string out = "\"";
    for (const char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char escape[8];
            std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
            out += escape;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

void write_value(const toml::node& node, std::ostream& out);

void write_array(const toml::array& array, std::ostream& out) {
    out << '[';
    for (std::size_t i = 0; i < array.size(); ++i) {
        if (i > 0) out << ", ";
        write_value(array[i], out);
    }
    out << ']';
}

void write_table_inline(const toml::table& table, std::ostream& out) {
    out << '{';
    bool first = true;
    for (const auto& [key, node] : table) {  // toml::table iterates in key order
        out << (first ? "" : ", ") << quoted(key.str()) << " = ";
        write_value(node, out);
        first = false;
    }
    out << '}';
}

void write_value(const toml::node& node, std::ostream& out) {
    if (const auto* t = node.as_table()) {
        write_table_inline(*t, out);
    } else if (const auto* a = node.as_array()) {
        write_array(*a, out);
    } else if (const auto* s = node.as_string()) {
        out << quoted(s->get());
    } else if (const auto* i = node.as_integer()) {
        out << i->get();
    } else if (const auto* f = node.as_floating_point()) {
        char text[40];
        std::snprintf(text, sizeof text, "%.17g", f->get());
        out << "float:" << text;
    } else if (const auto* b = node.as_boolean()) {
        out << (b->get() ? "true" : "false");
    } else {
        std::ostringstream other;  // dates and times, in TOML's own spelling
        node.visit([&](const auto& value) { other << value; });
        out << "time:" << other.str();
    }
}

void write_table(const toml::table& table, const std::string& prefix, std::ostream& out) {
    for (const auto& [key, node] : table) {
        const std::string path =
            prefix.empty() ? quoted(key.str()) : prefix + "." + quoted(key.str());
        if (const auto* t = node.as_table()) {
            write_table(*t, path, out);
        } else {
            out << path << " = ";
            write_value(node, out);
            out << '\n';
        }
    }
}

}  // namespace

std::string canonical_experiment(std::string_view toml_text) {
    try {
        const toml::table root = toml::parse(toml_text);
        std::ostringstream out;
        write_table(root, "", out);
        return out.str();
    } catch (const toml::parse_error&) {
        return std::string(toml_text);
    }
}

std::string experiment_fingerprint(std::string_view toml_text) {
    return sha256_hex(canonical_experiment(toml_text));
}

std::string experiment_fingerprint(std::string_view toml_text,
                                   const std::vector<IncludedFile>& included) {
    if (included.empty()) return experiment_fingerprint(toml_text);
    std::string canonical = canonical_experiment(toml_text);
    for (const IncludedFile& file : included) {
        canonical += "\n# included file " + file.name + "\n" + canonical_experiment(file.text);
    }
    return sha256_hex(canonical);
}

}  // namespace prism::io
