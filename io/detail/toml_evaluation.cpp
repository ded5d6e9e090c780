#include "io/detail/toml_evaluation.hpp"

#include <cstdint>

#include <fmt/format.h>

#include "io/detail/toml_reader.hpp"

namespace prism::io::detail {

void parse_constraints(const toml::table& table, Constraints& constraints) {
    check_keys(table, "constraints", {"min_gpus", "max_gpus", "gpus_in", "max_memory_fraction"});
    if (const toml::node* n = table.get("min_gpus")) {
        constraints.min_gpus = as_integer_in(*n, "constraints.min_gpus", 0, INT64_MAX);
    }
    if (const toml::node* n = table.get("max_gpus")) {
        constraints.max_gpus = as_integer_in(*n, "constraints.max_gpus", 0, INT64_MAX);
        if (constraints.max_gpus > 0 && constraints.max_gpus < constraints.min_gpus) {
            fail_at(*n, fmt::format("constraints.max_gpus: {} is below min_gpus = {}",
                                    constraints.max_gpus, constraints.min_gpus));
        }
    }
    if (const toml::node* n = table.get("gpus_in")) {
        const toml::array& values = as_array(*n, "constraints.gpus_in");
        if (values.empty()) fail_at(*n, "constraints.gpus_in: empty list; give at least one value");
        for (const toml::node& v : values) {
            constraints.gpus_in.push_back(as_integer_in(v, "constraints.gpus_in", 1, INT64_MAX));
        }
    }
    if (const toml::node* n = table.get("max_memory_fraction")) {
        const double value = as_positive(*n, "constraints.max_memory_fraction");
        if (value > 1) {
            fail_at(*n, fmt::format("constraints.max_memory_fraction: value {} must be <= 1",
                                    format_number(value)));
        }
        constraints.max_memory_fraction = value;
    }
}

void parse_memory(const toml::table& table, MemoryReserveSpec& reserve) {
    check_keys(table, "memory", {"cuda_context", "workspace", "nccl_per_communicator"});
    const auto read = [&](const char* key, double& bytes) {
        if (const toml::node* n = table.get(key)) {
            bytes = as_quantity(*n, join_key("memory", key), Quantity::bytes, false, true);
        }
    };
    read("cuda_context", reserve.cuda_context_bytes);
    read("workspace", reserve.workspace_bytes);
    read("nccl_per_communicator", reserve.nccl_bytes_per_communicator);
}

void parse_evaluation(const toml::table& table, EvaluationSpec& evaluation) {
    check_keys(table, "evaluation",
               {"method", "samples", "slow_deltas", "histogram", "histogram_bins", "sensitivity",
                "routing_share", "grid_points", "prune", "verify"});
    if (const toml::node* n = table.get("method")) {
        evaluation.method =
            as_choice(*n, "evaluation.method", {"analytic", "montecarlo"}) == "analytic"
                ? Method::analytic
                : Method::montecarlo;
    }
    if (const toml::node* n = table.get("samples")) {
        evaluation.samples = static_cast<int>(as_integer_in(*n, "evaluation.samples", 1));
    }
    if (const toml::node* n = table.get("slow_deltas")) {
        evaluation.slow_deltas.clear();
        for (const toml::node& v : as_array(*n, "evaluation.slow_deltas")) {
            evaluation.slow_deltas.push_back(as_positive(v, "evaluation.slow_deltas"));
        }
    }
    if (const toml::node* n = table.get("histogram")) {
        evaluation.histogram = as_bool(*n, "evaluation.histogram");
    }
    if (const toml::node* n = table.get("histogram_bins")) {
        evaluation.histogram_bins =
            static_cast<int>(as_integer_in(*n, "evaluation.histogram_bins", 1));
    }
    if (const toml::node* n = table.get("sensitivity")) {
        evaluation.sensitivity = as_bool(*n, "evaluation.sensitivity");
    }
    if (const toml::node* n = table.get("routing_share")) {
        evaluation.routing_share = as_bool(*n, "evaluation.routing_share");
    }
    if (const toml::node* n = table.get("grid_points")) {
        const std::int64_t points = as_integer_in(*n, "evaluation.grid_points", 33);
        if (points > 4097) {
            fail_at(*n, fmt::format("evaluation.grid_points: value {} must be <= 4097", points));
        }
        evaluation.grid_points = static_cast<int>(points);
    }
    if (const toml::node* n = table.get("prune")) {
        evaluation.prune = as_bool(*n, "evaluation.prune");
    }
    if (const toml::node* n = table.get("verify")) {
        evaluation.verify_montecarlo =
            as_choice(*n, "evaluation.verify", {"none", "montecarlo"}) == "montecarlo";
        if (evaluation.verify_montecarlo && evaluation.method == Method::montecarlo) {
            fail_at(*n,
                    "evaluation.verify: \"montecarlo\" re-evaluates an analytic sweep's "
                    "front; the method is already montecarlo");
        }
    }
}

}  // namespace prism::io::detail
