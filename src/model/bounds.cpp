#include "src/model/bounds.hpp"

#include <array>
#include <string_view>

namespace prism {

namespace {

/// Metrics the deterministic model fills (build_row in evaluate.cpp).
constexpr std::array<std::string_view, 19> kExact = {"gpus",
                                                     "step_time_s",
                                                     "tokens_per_s",
                                                     "model_tflops_per_gpu",
                                                     "hardware_tflops_per_gpu",
                                                     "megatron_tflops_per_gpu",
                                                     "mfu",
                                                     "memory_per_gpu_gib",
                                                     "memory_fraction",
                                                     "bubble_fraction",
                                                     "exposed_comm_s",
                                                     "speedup_vs_baseline",
                                                     "step_speedup_vs_baseline",
                                                     "steps_total",
                                                     "moe_router_s",
                                                     "moe_dispatch_s",
                                                     "moe_expert_compute_s",
                                                     "moe_combine_s",
                                                     "moe_a2a_exposed_s"};

// (not the median: it can fall below the deterministic step where the variability is small and
// skewed, seen down to 0.9993 of it on the GPT-3 175B / 1024-A100 space)
constexpr std::array<std::string_view, 5> kStepQuantities = {"step_time_mean_s", "step_time_p90_s",
                                                             "step_time_p95_s", "step_time_p99_s",
                                                             "step_time_p999_s"};

// the run's time: its steps (>= the deterministic step on average) plus checkpoints and
// failures (>= 0); a sum of 10^5-10^6 steps concentrates at its mean, so its quantiles sit
// above steps x step_time_s, checked like the step quantiles
constexpr std::array<std::string_view, 3> kRunQuantities = {
    "run_time_p50_days", "run_time_p95_days", "run_time_p99_days"};

bool in(std::string_view name, const auto& list) {
    for (const auto& x : list) {
        if (x == name) return true;
    }
    return false;
}

double value(const MetricSchema& schema, const std::vector<double>& row, const char* name) {
    const int k = find_metric(schema, name);
    return k >= 0 && static_cast<std::size_t>(k) < row.size() ? row[k] : kNaN;
}

}  // namespace

BoundKind metric_bound_kind(const std::string& name) {
    if (in(name, kExact)) return BoundKind::exact;
    if (in(name, kStepQuantities) || in(name, kRunQuantities) || name == "tail_ratio_p99" ||
        name == "gpu_hours_mean" || name == "gpu_hours_p95") {
        return BoundKind::lower;
    }
    if (name == "tokens_per_s_mean" || name == "tokens_per_s_p95" || name == "mfu_mean" ||
        name == "mfu_p95") {
        return BoundKind::upper;
    }
    return BoundKind::none;
}

double metric_bound(const MetricSchema& schema, const std::vector<double>& row,
                    const std::string& name) {
    switch (metric_bound_kind(name)) {
        case BoundKind::exact: {
            const int k = find_metric(schema, name);
            return k >= 0 && static_cast<std::size_t>(k) < row.size() ? row[k] : kNaN;
        }
        case BoundKind::none:
            return kNaN;
        default:
            break;
    }
    if (in(name, kStepQuantities)) return value(schema, row, "step_time_s");
    if (name == "tail_ratio_p99") return 1.0;
    if (name == "tokens_per_s_mean" || name == "tokens_per_s_p95") {
        return value(schema, row, "tokens_per_s");
    }
    if (name == "mfu_mean" || name == "mfu_p95") return value(schema, row, "mfu");
    const double compute_s = value(schema, row, "steps_total") * value(schema, row, "step_time_s");
    if (name == "gpu_hours_mean" || name == "gpu_hours_p95") {
        return value(schema, row, "gpus") * compute_s / 3600.0;
    }
    if (in(name, kRunQuantities)) return compute_s / 86400.0;
    return kNaN;
}

bool objectives_bounded(const Experiment& experiment, std::string* why) {
    for (const auto& o : experiment.objectives) {
        const BoundKind k = metric_bound_kind(o.metric);
        const bool ok =
            k == BoundKind::exact || (o.maximize ? k == BoundKind::upper : k == BoundKind::lower);
        if (!ok) {
            if (why != nullptr) {
                *why = "objective " + std::string(o.maximize ? "maximize " : "minimize ") +
                       o.metric + " has no " + (o.maximize ? "upper" : "lower") +
                       " bound from the deterministic model";
            }
            return false;
        }
    }
    return !experiment.objectives.empty();
}

}  // namespace prism
