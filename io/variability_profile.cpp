#include "io/variability_profile.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "io/detail/toml_reader.hpp"
#include "io/detail/toml_variability.hpp"
#include "io/presets.hpp"
#include "src/common/error.hpp"

namespace prism::io {

namespace {

// Shortest round-tripping form that TOML reads as a number.
std::string number(double v) { return fmt::format("{:.6g}", v); }

std::string toml_string(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out.push_back('\\');
        out.push_back(c == '\n' ? ' ' : c);
    }
    return out + "\"";
}

void comments(std::ostringstream& out, const std::vector<std::string>& lines) {
    for (const std::string& line : lines) out << "# " << line << "\n";
}

}  // namespace

std::string format_distribution(const DistributionSpec& spec) {
    const std::string mean = spec.mean != 1.0 ? ", mean = " + number(spec.mean) : "";
    switch (spec.kind) {
        case DistKind::constant:
            return fmt::format("{{dist = \"constant\", mean = {}}}", number(spec.mean));
        case DistKind::normal:
            return fmt::format("{{dist = \"normal\"{}, cv = {}}}", mean, number(spec.cv));
        case DistKind::lognormal:
            return fmt::format("{{dist = \"lognormal\"{}, cv = {}}}", mean, number(spec.cv));
        case DistKind::gamma:
            return fmt::format("{{dist = \"gamma\"{}, cv = {}}}", mean, number(spec.cv));
        case DistKind::empirical: {
            std::string samples;
            for (double x : spec.samples) samples += (samples.empty() ? "" : ", ") + number(x);
            return fmt::format("{{dist = \"empirical\", samples = [{}]}}", samples);
        }
        case DistKind::mixture: {
            std::string parts;
            for (const MixtureComponent& c : spec.components) {
                std::string inner = format_distribution(c.dist);
                // Weights must sum to 1 within 1e-9 when read back: full precision.
                inner = fmt::format("{{weight = {:.15g}, {}", c.weight, inner.substr(1));
                parts += (parts.empty() ? "" : ", ") + inner;
            }
            return fmt::format("{{dist = \"mixture\", components = [{}]}}", parts);
        }
    }
    return "{dist = \"constant\", mean = 1.0}";
}

std::string format_variability_profile(const VariabilityProfile& p) {
    std::ostringstream out;
    comments(out, p.header);
    out << "name = " << toml_string(p.name) << "\n";
    out << "source = " << toml_string(p.source) << "\n";
    if (!p.description.empty()) out << "description = " << toml_string(p.description) << "\n";
    for (int k = 0; k < kKernelClassCount; ++k) {
        const auto c = static_cast<std::size_t>(k);
        out << "\n";
        comments(out, p.class_notes[c]);
        out << kKernelClassNames[c] << " = " << format_distribution(p.spec.transient[c]) << "\n";
    }
    out << "\n";
    comments(out, p.regime_notes);
    out << "comm_regime = " << format_distribution(p.spec.comm_regime) << "\n";
    out << "\n[persistent]\n";
    comments(out, p.spatial_notes);
    out << "spatial = " << format_distribution(p.spec.persistent.spatial) << "\n";
    comments(out, p.slow_notes);
    out << "slow_probability = " << number(p.spec.persistent.slow_probability) << "\n";
    out << "slow_factor = " << number(p.spec.persistent.slow_factor) << "\n";
    out << "slow_scope = " << (p.spec.persistent.slow_per_node ? "\"node\"" : "\"gpu\"") << "\n";
    return out.str();
}

void write_variability_profile(const std::filesystem::path& path, const VariabilityProfile& p) {
    const std::string text = format_variability_profile(p);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw IoError(fmt::format("{}: cannot write the variability profile", path.string()));
}

VariabilitySpec load_variability(std::string_view preset_or_path) {
    const std::string name(preset_or_path);
    std::string text;
    std::string source_name;
    if (name.ends_with(".toml")) {
        std::ifstream in(name, std::ios::binary);
        std::ostringstream buffer;
        buffer << in.rdbuf();
        if (!in) throw ConfigError(fmt::format("{}: cannot read the variability profile", name));
        text = buffer.str();
        source_name = name;
    } else {
        const std::optional<std::string_view> preset = preset_text("variability", name);
        if (!preset) {
            std::string known;
            for (const std::string& n : preset_names("variability")) {
                known += (known.empty() ? "" : ", ") + n;
            }
            throw ConfigError(fmt::format(
                "unknown variability preset '{}' (known: {}; or a profile file ending in .toml)",
                name, known));
        }
        text = std::string(*preset);
        source_name = fmt::format("configs/presets/variability/{}.toml", name);
    }
    VariabilitySpec spec;
    detail::apply_variability_file(detail::parse_toml(text, source_name), name, spec);
    return spec;
}

}  // namespace prism::io
