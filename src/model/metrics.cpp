#include "src/model/metrics.hpp"

#include <utility>

namespace prism {

int find_metric(const MetricSchema& schema, const std::string& name) {
    for (std::size_t i = 0; i < schema.size(); ++i) {
        if (schema[i].name == name) return static_cast<int>(i);
    }
    return -1;
}

std::string renamed_metric(const std::string& name) {
    static const std::pair<const char*, const char*> kRenamed[] = {
        {"tflops_per_gpu", "megatron_tflops_per_gpu"},
        {"time_to_target_mean_s", "time_to_target_mean_days"},
        {"time_to_target_p50_s", "time_to_target_p50_days"},
        {"time_to_target_p95_s", "time_to_target_p95_days"},
    };
    for (const auto& [old_name, new_name] : kRenamed) {
        if (name == old_name) return new_name;
    }
    return {};
}

}  // namespace prism
