#pragma once

#include <cstdint>
#include <set>

#include "explorer/design_space.hpp"
#include "explorer/messages.hpp"
#include "explorer/pareto.hpp"
#include "explorer/pruning.hpp"
#include "src/model/evaluate.hpp"

namespace prism::explorer {

/// Decodes, filters and evaluates the indices of one work order. A point whose evaluation
/// throws becomes a `failed` row carrying the message; it never escapes. Points keep their
/// random streams at DesignSpace::stream_index, and the step-time distributions of the last
/// few thousand stream indices are reused (StepCache): one per worker, not thread-safe.
class ChunkEvaluator {
  public:
    /// With `pruning`, work orders that ask to prune skip the points their front dominates.
    ChunkEvaluator(const DesignSpace& space, const Evaluator& evaluator,
                   const Pruning* pruning = nullptr);

    ChunkResult operator()(const WorkOrder& order) const;

    const StepCache& step_cache() const noexcept { return cache_; }

  private:
    /// One point's row: in full, or screened first when `front` may prune it.
    PointResult row(const DesignPoint& point, std::uint64_t index,
                    const ParetoArchive* front) const;

    const DesignSpace* space_;
    const Evaluator* evaluator_;
    const Pruning* pruning_;
    mutable StepCache cache_;
    /// Fault injection for tests of the failure policy: indices listed in the environment
    /// variable PRISM_FAULT_INJECT_INDICES ("3,17,...") throw as if the model had failed.
    std::set<std::uint64_t> inject_failures_;
    /// For tests of interruptions: PRISM_TEST_POINT_DELAY_MS adds this much wall time to every
    /// evaluated point, so that a test's signal lands mid-sweep whatever the model's speed.
    double delay_ms_ = 0;
};

}  // namespace prism::explorer
