#pragma once

// The slow-unit patterns of a layout (DESIGN.md section 2, persistent factors): which groups one
// slow unit (a node, or a GPU) touches, over the job's units with their frequencies.

#include <utility>
#include <vector>

#include "src/stochastic/detail/persistent.hpp"
#include "src/stochastic/detail/step_model.hpp"

namespace prism::stochastic::detail::ssta {

/// What one slow unit (node or GPU) of the job does under an ordered layout, over the job's
/// units with their frequencies: `replicas`, the per-stage slow members of each replica it
/// touches; `lockstep`, the (stage, slow members) of each group it touches. A pure function
/// of the layout, computed once per thread for each distinct layout (a sweep has a handful).
struct UnitPatterns {
    std::vector<std::pair<double, std::vector<std::vector<int>>>> replicas;
    std::vector<std::pair<double, std::vector<std::pair<int, int>>>> lockstep;
};

const UnitPatterns& unit_patterns(const StepModel& m, const PersistentLayout& l);

}  // namespace prism::stochastic::detail::ssta
