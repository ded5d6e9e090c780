#include "src/model/metrics.hpp"

namespace prism {

int find_metric(const MetricSchema& schema, const std::string& name) {
    for (std::size_t i = 0; i < schema.size(); ++i) {
        if (schema[i].name == name) return static_cast<int>(i);
    }
    return -1;
}

}  // namespace prism
