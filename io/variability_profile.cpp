#include "io/variability_profile.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "io/detail/bounded_read.hpp"
#include "io/detail/toml_reader.hpp"
#include "io/detail/toml_variability.hpp"
#include "io/presets.hpp"
#include "io/work_limits.hpp"
#include "src/common/error.hpp"

namespace prism::io {

namespace {

// Shortest round-tripping form that TOML reads as a number.
std::string number(double v) { return fmt::format("{:.6g}", v); }

// A TOML basic string: quotes, backslashes and control characters escaped (a raw carriage
// return or newline in --name made the profile unloadable, issue 33).
std::string toml_string(std::string_view s) {
    std::string out = "\"";
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (u < 0x20 || u == 0x7f) {
            out += fmt::format("\\u{:04X}", u);
        } else {
            out.push_back(c);
        }
    }
    return out + "\"";
}

// Comment lines: a line break inside one (a --note, a run's file name) starts another comment
// line, and other control characters, which TOML does not allow in comments, become '?'.
void comments(std::ostringstream& out, const std::vector<std::string>& lines) {
    for (const std::string& line : lines) {
        out << "# ";
        for (std::size_t k = 0; k < line.size(); ++k) {
            const char c = line[k];
            const auto u = static_cast<unsigned char>(c);
            if (c == '\r' || c == '\n') {
                if (c == '\r' && k + 1 < line.size() && line[k + 1] == '\n') ++k;
                out << "\n# ";
            } else if ((u < 0x20 && c != '\t') || u == 0x7f) {
                out << '?';
            } else {
                out << c;
            }
        }
        out << "\n";
    }
}

}  // namespace

std::string read_profile_text(const std::filesystem::path& path) {
    std::string text = detail::read_bounded(path, kMaxProfileFileBytes, "variability profile");
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
        throw ConfigError(fmt::format(
            "{}: empty variability profile (a profile sets at least one kernel class; for no "
            "variability use the preset 'none')",
            path.string()));
    }
    return text;
}

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
    if (p.spec.regime_levels.active()) {
        const RegimeLevels& l = p.spec.regime_levels;
        comments(out, p.level_notes);
        out << "regime_levels = {nvlink = " << number(l.nvlink) << ", nic = " << number(l.nic)
            << ", rack = " << number(l.rack) << ", pod = " << number(l.pod) << "}\n";
    }
    if (p.spec.step_autocorrelation > 0) {
        out << "# lag-1 autocorrelation of consecutive steps (prism steps fit): the run model\n";
        out << "step_autocorrelation = " << number(p.spec.step_autocorrelation) << "\n";
    }
    if (p.spec.hiccup.probability > 0) {
        out << "\n";
        comments(out, p.hiccup_notes);
        out << "hiccup_probability = " << number(p.spec.hiccup.probability) << "\n";
        out << "hiccup_delay_median = " << number(p.spec.hiccup.delay_median_s) << "  # s\n";
        if (p.spec.hiccup.family == HiccupFamily::pareto) {
            out << "hiccup_delay_family = \"pareto\"\n";
            out << "hiccup_delay_tail = " << number(p.spec.hiccup.delay_tail) << "\n";
        } else {
            out << "hiccup_delay_sigma = " << number(p.spec.hiccup.delay_sigma) << "\n";
        }
    }
    // workload terms a base profile may carry (MoE routing, document packing): kept as given
    if (p.spec.routing_skew > 0 || p.spec.routing_drift > 0) {
        out << "routing = {skew = " << number(p.spec.routing_skew)
            << ", drift = " << number(p.spec.routing_drift) << "}\n";
    }
    if (p.spec.documents.active()) {
        const DocumentLengths& d = p.spec.documents;
        out << "documents = {packing = \"concat\", median_tokens = " << number(d.median_tokens)
            << ", sigma = " << number(d.sigma);
        if (!d.source.empty()) out << ", source = " << toml_string(d.source);
        out << "}\n";
    }
    if (p.spec.stalls.active()) {
        out << "\n";
        comments(out, p.stall_notes);
        out << "stall_fraction = " << number(p.spec.stalls.fraction) << "\n";
        out << "stall_duration = " << number(p.spec.stalls.duration_s) << "  # s\n";
    }
    if (!p.spec.periodic.empty()) {
        out << "\n";
        comments(out, p.periodic_notes);
        out << "[periodic]\n";
        for (const PeriodicEvent& e : p.spec.periodic) {
            out << e.name << " = {every = " << e.every << ", duration = " << number(e.duration_s)
                << "}  # s\n";
        }
    }
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
        text = read_profile_text(name);
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
