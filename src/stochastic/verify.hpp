#pragma once

// The analytic step-time distribution of one point against a Monte Carlo run of the same model
// (`[evaluation] verify = "montecarlo"`): where the analytic evaluator is known to be weak
// (interleaved schedules, ZeRO-3 with pipeline stages, docs/limitations.md), a sweep's
// Pareto front is worth checking by the reference evaluator.

#include <cstdint>
#include <functional>
#include <vector>

#include "src/common/error.hpp"
#include "src/model/spec.hpp"
#include "src/model/step_profile.hpp"

namespace prism::stochastic {

/// Kolmogorov-Smirnov distance between the empirical CDF of `sorted` (ascending) and a CDF
/// given at those samples (`cdf_at[k]` at sorted[k]).
double ks_to_samples(const std::vector<double>& sorted, const std::vector<double>& cdf_at);

struct Verification {
    int samples = 0;  ///< Monte Carlo samples
    double ks = 0;    ///< sup |F_analytic - F_mc| (at the Monte Carlo draws)
    /// mean, p50, p95, p99 of the step time: analytic (on the experiment's grid), Monte Carlo
    /// (sample mean; order statistic floor(p (n - 1)))
    double analytic_mean_s = 0, analytic_p50_s = 0, analytic_p95_s = 0, analytic_p99_s = 0;
    double mc_mean_s = 0, mc_p50_s = 0, mc_p95_s = 0, mc_p99_s = 0;
};

/// A verification given up because its caller asked it to stop (a signal, --time-limit).
class VerificationStopped : public Error {
  public:
    VerificationStopped() : Error("verification stopped") {}
};

/// Runs `evaluation.samples` Monte Carlo steps of the point (random streams keyed by
/// (seed, stream_index), as the sweep keys them) and compares them with the analytic
/// evaluator's distribution. `stop`, when set, is asked between the stages (draws, the
/// analytic CDF at the draws, the analytic quantiles); throws VerificationStopped when it
/// returns true. Throws as the evaluators do.
Verification verify_monte_carlo(const StepProfile& profile, const DesignPoint& point,
                                const HardwareSpec& hardware, const ClusterSpec& cluster,
                                const VariabilitySpec& variability,
                                const EvaluationSpec& evaluation, std::uint64_t seed,
                                std::uint64_t stream_index, const std::function<bool()>& stop = {});

}  // namespace prism::stochastic
