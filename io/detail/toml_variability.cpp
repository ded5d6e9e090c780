#include "io/detail/toml_variability.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "io/detail/toml_reader.hpp"

namespace prism::io::detail {

namespace {

const std::vector<std::string> kDistKinds{"constant", "normal",    "lognormal",
                                          "gamma",    "empirical", "mixture"};

// Mean and cv of a mixture from its components' first two moments.
void mixture_moments(DistributionSpec& spec) {
    double mean = 0;
    double second = 0;
    for (const MixtureComponent& c : spec.components) {
        const double sd = c.dist.cv * c.dist.mean;
        mean += c.weight * c.dist.mean;
        second += c.weight * (sd * sd + c.dist.mean * c.dist.mean);
    }
    spec.mean = mean;
    spec.cv = mean > 0 ? std::sqrt(std::max(0.0, second - mean * mean)) / mean : 0;
}

DistributionSpec parse_distribution_table(const toml::table& table, const std::string& key,
                                          bool is_component) {
    const toml::node* dist_node = table.get("dist");
    if (dist_node == nullptr) {
        throw error_at(table.source(),
                       fmt::format("{}: missing 'dist' (one of \"constant\", \"normal\", "
                                   "\"lognormal\", \"gamma\", \"empirical\", \"mixture\")",
                                   key));
    }
    const std::string kind = as_choice(*dist_node, join_key(key, "dist"), kDistKinds);

    std::vector<std::string> allowed{"dist"};
    if (is_component) allowed.emplace_back("weight");
    if (kind == "constant") allowed.insert(allowed.end(), {"mean"});
    if (kind == "normal" || kind == "lognormal") allowed.insert(allowed.end(), {"mean", "cv"});
    if (kind == "gamma") allowed.insert(allowed.end(), {"mean", "cv", "shape", "scale"});
    if (kind == "empirical") allowed.insert(allowed.end(), {"samples", "normalize"});
    if (kind == "mixture") allowed.insert(allowed.end(), {"components"});
    check_keys(table, key, allowed);

    DistributionSpec spec;
    if (const toml::node* mean = table.get("mean")) {
        spec.mean = as_positive(*mean, join_key(key, "mean"));
    }
    const auto require = [&](std::string_view name) -> const toml::node& {
        const toml::node* node = table.get(name);
        if (node == nullptr) {
            throw error_at(table.source(),
                           fmt::format("{}: missing '{}' for dist = \"{}\"", key, name, kind));
        }
        return *node;
    };

    if (kind == "constant") {
        spec.kind = DistKind::constant;
    } else if (kind == "normal" || kind == "lognormal") {
        spec.kind = kind == "normal" ? DistKind::normal : DistKind::lognormal;
        spec.cv = as_positive(require("cv"), join_key(key, "cv"), true);
    } else if (kind == "gamma") {
        spec.kind = DistKind::gamma;
        const toml::node* cv = table.get("cv");
        const toml::node* shape = table.get("shape");
        const toml::node* scale = table.get("scale");
        if (cv != nullptr && shape != nullptr) {
            fail_at(*shape, fmt::format("{}: give either cv or shape, not both", key));
        }
        if (scale != nullptr && shape == nullptr) {
            fail_at(*scale, fmt::format("{}: scale needs shape", key));
        }
        if (scale != nullptr && table.get("mean") != nullptr) {
            fail_at(*scale, fmt::format("{}: give either mean or scale, not both", key));
        }
        if (cv != nullptr) {
            spec.cv = as_positive(*cv, join_key(key, "cv"), true);
        } else if (shape != nullptr) {
            // Gamma(k, theta): mean k*theta, cv 1/sqrt(k).
            const double k = as_positive(*shape, join_key(key, "shape"));
            spec.cv = 1.0 / std::sqrt(k);
            if (scale != nullptr) spec.mean = k * as_positive(*scale, join_key(key, "scale"));
        } else {
            throw error_at(table.source(),
                           fmt::format("{}: missing 'cv' or 'shape' for dist = \"gamma\"", key));
        }
    } else if (kind == "empirical") {
        spec.kind = DistKind::empirical;
        const std::string samples_key = join_key(key, "samples");
        const toml::array& samples = as_array(require("samples"), samples_key);
        if (samples.empty()) {
            fail_at(samples, fmt::format("{}: empty list; give at least one sample", samples_key));
        }
        for (const toml::node& sample : samples) {
            spec.samples.push_back(as_positive(sample, samples_key));
        }
        double mean = 0;
        for (double x : spec.samples) mean += x;
        mean /= static_cast<double>(spec.samples.size());
        bool normalize = false;
        if (const toml::node* node = table.get("normalize")) {
            normalize = as_bool(*node, join_key(key, "normalize"));
        }
        if (normalize) {
            for (double& x : spec.samples) x /= mean;
        }
        double mean_after = normalize ? 1.0 : mean;
        double var = 0;
        for (double x : spec.samples) var += (x - mean_after) * (x - mean_after);
        var /= static_cast<double>(spec.samples.size());
        spec.mean = mean_after;
        spec.cv = std::sqrt(var) / mean_after;
    } else {
        spec.kind = DistKind::mixture;
        const std::string components_key = join_key(key, "components");
        const toml::array& components = as_array(require("components"), components_key);
        if (components.empty()) {
            fail_at(components,
                    fmt::format("{}: empty list; give at least one component", components_key));
        }
        double total = 0;
        for (std::size_t i = 0; i < components.size(); ++i) {
            const std::string component_key = fmt::format("{}[{}]", components_key, i);
            const toml::table& component = as_table(components[i], component_key);
            const toml::node* weight = component.get("weight");
            if (weight == nullptr) {
                throw error_at(component.source(),
                               fmt::format("{}: missing 'weight'", component_key));
            }
            MixtureComponent c;
            c.weight = as_positive(*weight, join_key(component_key, "weight"));
            c.dist = parse_distribution_table(component, component_key, true);
            total += c.weight;
            spec.components.push_back(std::move(c));
        }
        if (std::abs(total - 1.0) > 1e-9) {
            fail_at(components, fmt::format("{}: weights sum to {}, expected 1 (within 1e-9)",
                                            components_key, format_number(total)));
        }
        mixture_moments(spec);
    }
    return spec;
}

/// A router's balancing as the skew of its persistent expert popularity (docs/moe.md): the
/// lognormal sigma whose 64 quantile-spaced experts (skewed_popularity) have the MaxVio_global
/// (max load / mean load - 1) Wang et al. 2024 measured with 64 routed experts, top 6
/// ("Auxiliary-Loss-Free Load Balancing Strategy for Mixture-of-Experts", arXiv:2408.15664,
/// Table 2): loss-free balancing 0.04 (1B and 3B models), auxiliary loss (alpha = 0.001) 0.52
/// (3B; 0.72 at 1B). Drift: no published per-step figure (0).
struct RoutingBalance {
    const char* name;
    double skew;
    const char* source;
};
constexpr RoutingBalance kRoutingBalances[] = {
    {"loss-free", 0.0163,
     "loss-free balancing: MaxVio_global 0.04 (Wang et al. 2024, arXiv:2408.15664, Table 2)"},
    {"aux-loss", 0.180,
     "auxiliary-loss balancing (alpha 0.001): MaxVio_global 0.52 at 3B (Wang et al. 2024, "
     "arXiv:2408.15664, Table 2)"},
    {"none", 0.0, "uniform popularity: multinomial noise only"},
};

void apply_routing_table(const toml::table& table, const std::string& path, VariabilitySpec& spec) {
    check_keys(table, path, {"balance", "skew", "drift"});
    // the balance first: explicit skew / drift amend it, whatever the order in the file
    if (const toml::node* b = table.get("balance")) {
        const std::string full = join_key(path, "balance");
        const std::string choice = as_choice(*b, full, {"loss-free", "aux-loss", "none"});
        for (const auto& r : kRoutingBalances) {
            if (choice == r.name) {
                spec.routing_skew = r.skew;
                spec.routing_source = r.source;
            }
        }
    }
    if (const toml::node* n = table.get("skew")) {
        spec.routing_skew = as_positive(*n, join_key(path, "skew"), true);
        spec.routing_source = "skew given";
    }
    if (const toml::node* n = table.get("drift")) {
        const std::string full = join_key(path, "drift");
        const double drift = as_positive(*n, full, true);
        if (drift > 2) {
            fail_at(*n, fmt::format("{}: value {} must be <= 2 (the log-space sd of an expert's "
                                    "popularity from step to step)",
                                    full, format_number(drift)));
        }
        spec.routing_drift = drift;
    }
}

/// [variability.documents] (docs/document_lengths.md): packing = "concat" (documents packed
/// into the sequences, the fused attention masked per document) with a lognormal length law,
/// or "causal" (full causal attention over the sequence: no term, as when unset).
void apply_documents_table(const toml::table& table, const std::string& path,
                           VariabilitySpec& spec) {
    check_keys(table, path, {"packing", "family", "median_tokens", "sigma", "source"});
    DocumentLengths d;
    d.concat = true;
    if (const toml::node* n = table.get("packing")) {
        d.concat = as_choice(*n, join_key(path, "packing"), {"concat", "causal"}) == "concat";
    }
    if (const toml::node* n = table.get("family")) {
        as_choice(*n, join_key(path, "family"), {"lognormal"});
    }
    if (const toml::node* n = table.get("median_tokens")) {
        d.median_tokens = as_positive(*n, join_key(path, "median_tokens"));
    }
    if (const toml::node* n = table.get("sigma")) {
        const std::string full = join_key(path, "sigma");
        d.sigma = as_positive(*n, full, true);
        if (d.sigma > 4) {
            fail_at(*n, fmt::format("{}: value {} must be <= 4 (the log-space sd of a document's "
                                    "length)",
                                    full, format_number(d.sigma)));
        }
    }
    if (const toml::node* n = table.get("source")) {
        d.source = as_string(*n, join_key(path, "source"));
    }
    if (d.concat && !(d.median_tokens > 0)) {
        fail_at(table, fmt::format("{}: packing = \"concat\" needs median_tokens (the documents' "
                                   "median length in tokens)",
                                   path));
    }
    if (!d.concat) d = DocumentLengths{};
    spec.documents = d;
}

}  // namespace

DistributionSpec parse_distribution(const toml::node& node, const std::string& key) {
    return parse_distribution_table(as_table(node, key), key, false);
}

void apply_variability_table(const toml::table& table, const std::string& path, bool is_preset,
                             VariabilitySpec& spec) {
    std::vector<std::string> allowed{kKernelClassNames.begin(), kKernelClassNames.end()};
    allowed.insert(allowed.end(),
                   {"comm_regime", "persistent", "hiccup_probability", "hiccup_delay_median",
                    "hiccup_delay_sigma", "hiccup_delay_family", "hiccup_delay_tail", "periodic",
                    "stall_fraction", "stall_duration", "routing_skew", "routing", "documents",
                    "step_autocorrelation", "regime_levels"});
    // Preset files may say where their numbers come from.
    if (is_preset) allowed.insert(allowed.end(), {"source", "description", "name"});
    if (!is_preset) allowed.emplace_back("preset");
    check_keys(table, path, allowed);

    for (const auto& [key, node] : in_file_order(table)) {
        const std::string name(key->str());
        const std::string full = join_key(path, name);
        if (name == "preset" || name == "description" || name == "name") {
            as_string(*node, full);
        } else if (name == "source") {
            spec.source = as_string(*node, full);
        } else if (name == "hiccup_probability") {
            const double p = as_positive(*node, full, true);
            if (p > 1) {
                fail_at(*node, fmt::format("{}: value {} must be <= 1 (a probability per node and "
                                           "step)",
                                           full, format_number(p)));
            }
            spec.hiccup.probability = p;
        } else if (name == "stall_fraction") {
            const double f = as_positive(*node, full, true);
            if (f > 0.5) {
                fail_at(*node, fmt::format("{}: value {} must be <= 0.5 (the fraction of a node's "
                                           "time it is stalled)",
                                           full, format_number(f)));
            }
            spec.stalls.fraction = f;
        } else if (name == "stall_duration") {
            spec.stalls.duration_s = as_quantity(*node, full, Quantity::time, true);
        } else if (name == "hiccup_delay_median") {
            spec.hiccup.delay_median_s = as_quantity(*node, full, Quantity::time, true);
        } else if (name == "hiccup_delay_sigma") {
            spec.hiccup.delay_sigma = as_positive(*node, full, true);
        } else if (name == "hiccup_delay_family") {
            spec.hiccup.family = as_choice(*node, full, {"lognormal", "pareto"}) == "pareto"
                                     ? HiccupFamily::pareto
                                     : HiccupFamily::lognormal;
        } else if (name == "hiccup_delay_tail") {
            const double alpha = as_positive(*node, full, false);
            if (!(alpha > 2)) {
                fail_at(*node, fmt::format("{}: value {} must be > 2 (the Pareto tail's shape: at "
                                           "2 or below a step's variance is infinite)",
                                           full, format_number(alpha)));
            }
            spec.hiccup.delay_tail = alpha;
        } else if (name == "periodic") {
            // name = {every = N, duration = "0.8 s"}; an entry replaces a preset's of that name
            for (const auto& [ekey, enode] : in_file_order(as_table(*node, full))) {
                const std::string efull = join_key(full, std::string(ekey->str()));
                const toml::table& entry = as_table(*enode, efull);
                check_keys(entry, efull, {"every", "duration"});
                PeriodicEvent event;
                event.name = std::string(ekey->str());
                for (const char* required : {"every", "duration"}) {
                    if (entry.get(required) == nullptr) {
                        throw error_at(entry.source(),
                                       fmt::format("{}: missing '{}' (e.g. {{every = 100, "
                                                   "duration = \"0.8 s\"}})",
                                                   efull, required));
                    }
                }
                event.every =
                    as_integer_in(*entry.get("every"), join_key(efull, "every"), 1, INT32_MAX);
                event.duration_s = as_quantity(*entry.get("duration"), join_key(efull, "duration"),
                                               Quantity::time, true, true);
                auto same =
                    std::find_if(spec.periodic.begin(), spec.periodic.end(),
                                 [&](const PeriodicEvent& e) { return e.name == event.name; });
                if (same != spec.periodic.end()) {
                    *same = event;
                } else {
                    spec.periodic.push_back(event);
                }
            }
        } else if (name == "regime_levels") {
            // {nvlink = 0.2, nic = 1, rack = 1, pod = 1}: multipliers of comm_regime's cv per
            // link level; levels not named keep theirs (1, or the preset's)
            const toml::table& levels = as_table(*node, full);
            check_keys(levels, full, {"nvlink", "nic", "rack", "pod"});
            for (const auto& [lkey, lnode] : in_file_order(levels)) {
                const std::string level(lkey->str());
                const double x = as_positive(*lnode, join_key(full, level), true);
                if (level == "nvlink") spec.regime_levels.nvlink = x;
                if (level == "nic") spec.regime_levels.nic = x;
                if (level == "rack") spec.regime_levels.rack = x;
                if (level == "pod") spec.regime_levels.pod = x;
            }
        } else if (name == "comm_regime") {
            spec.comm_regime = parse_distribution(*node, full);
        } else if (name == "routing_skew") {
            spec.routing_skew = as_positive(*node, full, true);
        } else if (name == "routing") {
            apply_routing_table(as_table(*node, full), full, spec);
        } else if (name == "documents") {
            apply_documents_table(as_table(*node, full), full, spec);
        } else if (name == "step_autocorrelation") {
            const double rho = as_positive(*node, full, true);
            if (!(rho < 1)) {
                fail_at(*node, fmt::format("{}: value {} must be < 1 (the lag-1 autocorrelation of "
                                           "consecutive steps)",
                                           full, format_number(rho)));
            }
            spec.step_autocorrelation = rho;
        } else if (name == "persistent") {
            const toml::table& persistent = as_table(*node, full);
            check_keys(persistent, full,
                       {"spatial", "slow_probability", "slow_factor", "slow_scope"});
            for (const auto& [pkey, pnode] : in_file_order(persistent)) {
                const std::string pfull = join_key(full, std::string(pkey->str()));
                if (std::string(pkey->str()) == "spatial") {
                    spec.persistent.spatial = parse_distribution(*pnode, pfull);
                } else if (std::string(pkey->str()) == "slow_probability") {
                    const double p = as_positive(*pnode, pfull, true);
                    if (p > 1) {
                        fail_at(*pnode,
                                fmt::format("{}: value {} must be <= 1", pfull, format_number(p)));
                    }
                    spec.persistent.slow_probability = p;
                } else if (std::string(pkey->str()) == "slow_factor") {
                    const double f = as_positive(*pnode, pfull);
                    if (f < 1) {
                        fail_at(*pnode, fmt::format("{}: value {} must be >= 1 (a slowdown)", pfull,
                                                    format_number(f)));
                    }
                    spec.persistent.slow_factor = f;
                } else {
                    spec.persistent.slow_per_node =
                        as_choice(*pnode, pfull, {"node", "gpu"}) == "node";
                }
            }
        } else {
            for (int k = 0; k < kKernelClassCount; ++k) {
                if (name == kKernelClassNames[static_cast<std::size_t>(k)]) {
                    spec.transient[static_cast<std::size_t>(k)] = parse_distribution(*node, full);
                }
            }
        }
    }
    // a Pareto delay needs its tail, a lognormal one has none (here or in the preset)
    if (const toml::node* family = table.get("hiccup_delay_family");
        family != nullptr && spec.hiccup.family == HiccupFamily::pareto &&
        !(spec.hiccup.delay_tail > 0)) {
        fail_at(*family, fmt::format("{}: hiccup_delay_family = \"pareto\" needs "
                                     "hiccup_delay_tail (the tail's shape alpha, > 2)",
                                     path));
    }
    if (const toml::node* tail = table.get("hiccup_delay_tail");
        tail != nullptr && spec.hiccup.family != HiccupFamily::pareto) {
        fail_at(*tail, fmt::format("{}: hiccup_delay_tail is the Pareto delay's; set "
                                   "hiccup_delay_family = \"pareto\" (the lognormal delay takes "
                                   "hiccup_delay_sigma)",
                                   path));
    }
    if (const toml::node* sigma = table.get("hiccup_delay_sigma");
        sigma != nullptr && spec.hiccup.family == HiccupFamily::pareto) {
        fail_at(*sigma, fmt::format("{}: hiccup_delay_sigma is the lognormal delay's; the Pareto "
                                    "delay takes hiccup_delay_tail",
                                    path));
    }
    // link levels scale the regime's cv: a parametric regime (here or in the preset)
    const DistKind rk = spec.comm_regime.kind;
    if (spec.regime_levels.active() && (rk == DistKind::empirical || rk == DistKind::mixture)) {
        const std::string message = fmt::format(
            "{}: regime_levels needs a normal, lognormal or gamma comm_regime (its cv is scaled "
            "per link level), not {}",
            path, rk == DistKind::empirical ? "an empirical one" : "a mixture");
        if (const toml::node* p = table.get("regime_levels")) fail_at(*p, message);
        if (const toml::node* p = table.get("comm_regime")) fail_at(*p, message);
        throw error_at(table.source(), message);
    }
    // stalls need their duration (here or in the preset this table amends)
    if (spec.stalls.fraction > 0 && !(spec.stalls.duration_s > 0)) {
        const std::string message = fmt::format(
            "{}: stall_fraction {} needs stall_duration (one stall's duration, e.g. \"20 ms\")",
            path, format_number(spec.stalls.fraction));
        if (const toml::node* p = table.get("stall_fraction")) fail_at(*p, message);
        throw error_at(table.source(), message);
    }
    // a hiccup needs its delay (here or in the preset this table amends)
    if (spec.hiccup.probability > 0 && !(spec.hiccup.delay_median_s > 0)) {
        const std::string message = fmt::format(
            "{}: hiccup_probability {} needs hiccup_delay_median (the delay's median, e.g. "
            "\"0.2 s\")",
            path, format_number(spec.hiccup.probability));
        if (const toml::node* p = table.get("hiccup_probability")) fail_at(*p, message);
        throw error_at(table.source(), message);
    }
}

void apply_variability_file(const toml::table& file, const std::string& name,
                            VariabilitySpec& spec) {
    spec.source = name;
    const toml::table* body = &file;
    if (const auto* inner = file.get_as<toml::table>("variability")) {
        check_keys(file, "", {"variability", "source", "description", "name"});
        if (const toml::node* source = file.get("source")) {
            spec.source = as_string(*source, "source");
        }
        body = inner;
    }
    apply_variability_table(*body, "variability", true, spec);
    if (spec.source != name) spec.source = fmt::format("{}: {}", name, spec.source);
}

}  // namespace prism::io::detail
