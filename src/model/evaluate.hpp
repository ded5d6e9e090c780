#pragma once

// The model's one entry point for the explorer: a design point in, a row of metrics out.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>

#include "src/cotune/cotune.hpp"
#include "src/model/metrics.hpp"
#include "src/model/spec.hpp"
#include "src/stochastic/step_distribution.hpp"
#include "src/stochastic/verify.hpp"

namespace prism {

/// The version of the evaluators' numerics and random streams, stored in every result file:
/// the same experiment and seed give the same results only under the same model version, so
/// `--resume` refuses a file made under another. Bump it whenever an evaluator's output for a
/// given point changes (grids, approximations, random streams).
inline constexpr const char* kModelVersion = "2026.11.30.1";

/// The metrics `Evaluator::evaluate` fills for this experiment, in order (depends on the
/// evaluation settings: slow-step deltas, run deadlines, sensitivity on/off).
MetricSchema metric_schema(const Experiment& experiment);

/// The step-time distributions (and sensitivities) of recently evaluated points, by stream
/// index. Points that differ only in `learning_rate`, `checkpoint_interval` or `b_noise` run the
/// same steps and share a stream index (explorer::DesignSpace::stream_index): the first one's
/// distribution serves the others, bit for bit what they would compute themselves. Not
/// thread-safe: one per worker thread, for one Evaluator.
class StepCache {
  public:
    explicit StepCache(std::size_t capacity = 4096) : capacity_(capacity) {}

    std::size_t hits() const noexcept { return hits_; }
    std::size_t misses() const noexcept { return misses_; }

  private:
    friend class Evaluator;
    struct Entry {
        DesignPoint
            point;  ///< checked: the same steps (all but learning_rate, checkpoint, b_noise)
        StepDistribution dist;
        Sensitivity sens;
        bool have_sensitivity = false;
        double healthy_mean_s = 0;  ///< the law without slow units (straggler draining)
        double healthy_var_s2 = 0;
        double balanced_p50_s = 0;  ///< the quantiles with moe_force_balance (MoE experiments)
        double balanced_p95_s = 0;
    };
    std::size_t capacity_;
    std::size_t hits_ = 0, misses_ = 0;
    std::unordered_map<std::uint64_t, Entry> entries_;
};

/// The baseline point's deterministic figures behind the speedup metrics.
struct BaselineFigures {
    double step_s = 0;        ///< step time
    double tokens_per_s = 0;  ///< tokens per step / step time
};

/// Evaluates design points of one experiment. Construction evaluates the baseline point (if
/// any) once, for the speedup metric, and sets up the [cotune] study (throws ConfigError
/// naming the cotune key at fault). Thread-compatible: `evaluate` is const.
class Evaluator {
  public:
    explicit Evaluator(const Experiment& experiment);

    const MetricSchema& schema() const noexcept { return schema_; }

    /// Evaluates `point` (design-space index `index`, which keys its random streams).
    /// Infeasible points come back with status infeasible and a reason; a point the model cannot
    /// evaluate throws ModelError. Deterministic for a given (experiment seed, index).
    PointResult evaluate(const DesignPoint& point, std::uint64_t index) const {
        return evaluate(point, index, index, nullptr);
    }

    /// As above, the random streams keyed by `stream_index` instead (the sweep passes
    /// DesignSpace::stream_index(index)); with a cache, a point whose stream index is there
    /// takes its step-time distribution from it. The result does not depend on the cache.
    PointResult evaluate(const DesignPoint& point, std::uint64_t index, std::uint64_t stream_index,
                         StepCache* cache) const;

    /// The deterministic part of evaluate(): for a point that does not fit, its final
    /// (infeasible) row; otherwise the row of a `dominated` point (deterministic metrics, the
    /// stochastic ones NaN), from which the objectives' bounds follow (bounds.hpp) and which a
    /// sweep keeps when they are dominated. Throws as evaluate() does.
    PointResult screen(const DesignPoint& point, std::uint64_t index,
                       std::uint64_t stream_index) const;

  private:
    const Experiment* experiment_;
    MetricSchema schema_;
    BaselineFigures baseline_;             ///< zeros = no baseline
    std::optional<cotune::Model> cotune_;  ///< with a [cotune] table
    /// An MoE experiment with a routing law (moe_force_balance = false): the same experiment
    /// with the router forced to balance, for the routing share of p50 and p95
    std::shared_ptr<const Experiment> balanced_;
};

/// `[evaluation] verify = "montecarlo"`: the analytic step-time distribution of `point` against
/// `experiment.evaluation.samples` Monte Carlo steps (stochastic/verify.hpp), the random streams
/// keyed by `stream_index` as a sweep keys them (explorer::DesignSpace::stream_index). Throws
/// ModelError for a point that does not fit, and as the evaluators do; VerificationStopped when
/// `stop` returns true between its stages.
stochastic::Verification verify_point(const Experiment& experiment, const DesignPoint& point,
                                      std::uint64_t stream_index,
                                      const std::function<bool()>& stop = {});

}  // namespace prism
