#pragma once

// The step-time distribution of one design point (DESIGN.md sections 2, 3 and 5): what the
// evaluator calls. Two methods with the same model (see detail/step_model.hpp for the model and
// its stated approximations): Monte Carlo, the reference, and the analytic fast path, chosen by
// EvaluationSpec::method.

#include <array>
#include <cstdint>
#include <vector>

#include "src/model/spec.hpp"
#include "src/model/step_profile.hpp"

namespace prism {

/// Number of simulated cluster realizations (draws of the persistent factors) a distribution
/// is conditioned on; 1 when the persistent factors are deterministic.
inline constexpr int kClusterRealizations = 32;

struct StepDistribution {
    double deterministic_s = 0;  ///< deterministic_step_time(profile)
    double mean_s = 0, std_s = 0;
    double p50_s = 0, p90_s = 0, p95_s = 0, p99_s = 0, p999_s = 0;
    std::vector<double> p_slow;    ///< P(step > (1 + delta) * deterministic), per slow_deltas
    std::vector<float> histogram;  ///< probability mass per bin, if requested
    double histogram_lo_s = 0, histogram_hi_s = 0;
    /// Conditional mean and variance of ONE step given the persistent factors, for K cluster
    /// realizations of equal weight (K = 1 and var = 0 without variability).
    std::vector<double> cluster_mean_s, cluster_var_s2;
    /// asked for the analytic evaluator, evaluated by Monte Carlo: the point is outside the
    /// analytic law's domain (stochastic::analytic_hands_over)
    bool monte_carlo_fallback = false;
};

/// The step-time distribution of `profile` laid out by `point.placement` on `cluster` under
/// `variability`. Random streams are keyed by (seed, point_index) only. Throws ConfigError for
/// invalid distributions, ModelError for an invalid profile.
StepDistribution step_distribution(const StepProfile& profile, const DesignPoint& point,
                                   const HardwareSpec& hardware, const ClusterSpec& cluster,
                                   const VariabilitySpec& variability,
                                   const EvaluationSpec& evaluation, std::uint64_t seed,
                                   std::uint64_t point_index);

/// Per kernel class: the drop in p95 step time (s) and in step-time variance (s^2) when that
/// class's transient factor is made deterministic (X = 1), all else equal (same seed).
/// The `routing` class (MoE with the routing law): the same drops when every routed op's load
/// factor is made deterministic at its mean (0 without the routing law). The `documents` class
/// (variable-length packing): the same when every microbatch's attention is at E[S] (W = 1; 0
/// without [variability.documents]).
struct Sensitivity {
    std::array<double, kKernelClassCount> p95_drop_s{};
    std::array<double, kKernelClassCount> variance_drop_s2{};
    double routing_p95_drop_s = 0;
    double routing_variance_drop_s2 = 0;
    double documents_p95_drop_s = 0;
    double documents_variance_drop_s2 = 0;
};

Sensitivity sensitivity(const StepProfile& profile, const DesignPoint& point,
                        const HardwareSpec& hardware, const ClusterSpec& cluster,
                        const VariabilitySpec& variability, const EvaluationSpec& evaluation,
                        std::uint64_t seed, std::uint64_t point_index);

/// The same, given the point's own step_distribution (same arguments), so that it is not
/// evaluated twice.
Sensitivity sensitivity(const StepProfile& profile, const DesignPoint& point,
                        const HardwareSpec& hardware, const ClusterSpec& cluster,
                        const VariabilitySpec& variability, const EvaluationSpec& evaluation,
                        std::uint64_t seed, std::uint64_t point_index,
                        const StepDistribution& base);

namespace stochastic {

/// The two evaluators with an explicit set of deterministic kernel classes (bit c = class c),
/// for sensitivity and tests. Without `cluster_strata` the per-realization moments are left
/// out (one stratum with the marginal moments); the marginal results are the same.
StepDistribution step_distribution_masked(const StepProfile& profile, const DesignPoint& point,
                                          const HardwareSpec& hardware, const ClusterSpec& cluster,
                                          const VariabilitySpec& variability,
                                          const EvaluationSpec& evaluation, std::uint64_t seed,
                                          std::uint64_t point_index,
                                          std::uint32_t deterministic_classes,
                                          bool cluster_strata = true);

/// Whether the analytic evaluator hands `profile` over to Monte Carlo (docs/model.md, "Where
/// the analytic evaluator hands over"): most groups holding a slow unit; a ZeRO-3 stage likely
/// to hold two or more slow units, with transient compute noise; a pipeline replica likely to
/// have slowed compute on two or more stages where their passes add (a chunk's slowed pass a
/// large share of the step: docs/model.md, (3)). step_distribution then samples it with
/// `samples` draws.
bool analytic_hands_over(const StepProfile& profile, const DesignPoint& point,
                         const HardwareSpec& hardware, const VariabilitySpec& variability);

/// `profile` with the kernels a slow GPU slows (the compute ops of the layers, the embedding and
/// the head; not the dataloader, the optimizer or communication) `k` times slower: what "every
/// unit slow by k" equals (DESIGN.md's invariants).
StepProfile with_slowed_compute(const StepProfile& profile, double k);

/// What a point's stalls ([variability] stall_fraction / stall_duration) add to its step, as
/// both evaluators take it (src/stochastic/detail/hiccup.hpp): W's shape, its mean and standard
/// deviation, and the share of steps with no stall. All zero (p_none 1) without stalls.
struct StallSummary {
    double syncs = 0, members = 0, nodes_per_member = 0;  ///< stall_shape
    double step_s = 0;  ///< the step they accrue over (the slowed one when every unit is slow)
    double mean_s = 0, sd_s = 0;
    double p_none = 1;
};
StallSummary stall_summary(const StepProfile& profile, const DesignPoint& point,
                           const HardwareSpec& hardware, const VariabilitySpec& variability);

/// What a point's hiccups ([variability] hiccup_*) and periodic events add to its step, as both
/// evaluators take them (src/stochastic/detail/hiccup.hpp): the job's nodes, the share of steps
/// a hiccup hits (1 - (1 - q)^nodes), the largest delay's mean over all steps, and the periodic
/// events' mean (each event's duration over its cadence). All zero without them.
struct HiccupSummary {
    double nodes = 0;
    double p_hit = 0;          ///< P(H > 0)
    double hiccup_mean_s = 0;  ///< E[H]
    double periodic_mean_s = 0;
};
HiccupSummary hiccup_summary(const DesignPoint& point, const HardwareSpec& hardware,
                             const VariabilitySpec& variability);

/// Monte Carlo draws of the step time, each on its own cluster realization (for tests).
std::vector<double> monte_carlo_samples(const StepProfile& profile, const DesignPoint& point,
                                        const HardwareSpec& hardware, const ClusterSpec& cluster,
                                        const VariabilitySpec& variability, int samples,
                                        std::uint64_t seed, std::uint64_t point_index);

/// The analytic evaluator's step-time CDF at times `t_s` (for accuracy tests), on its default
/// grid or on one of `grid_points` points (grid convergence tests).
std::vector<double> analytic_cdf(const StepProfile& profile, const DesignPoint& point,
                                 const HardwareSpec& hardware, const ClusterSpec& cluster,
                                 const VariabilitySpec& variability, const std::vector<double>& t_s,
                                 int grid_points = 0);

}  // namespace stochastic

}  // namespace prism
