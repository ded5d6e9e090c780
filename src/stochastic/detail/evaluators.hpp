#pragma once

#include <cstdint>
#include <vector>

#include "src/model/spec.hpp"
#include "src/stochastic/detail/persistent.hpp"
#include "src/stochastic/detail/step_model.hpp"

namespace prism {
struct StepDistribution;
}

namespace prism::stochastic::detail {

/// Which Monte Carlo sampler draws the steps (montecarlo.cpp): the sparse one wherever it
/// applies, or the dense one, which draws every group factor (draw_group_factors; for tests,
/// which compare the two samplers of the same law).
enum class McSampler { automatic, dense };

/// How Monte Carlo runs a replica's drawn schedule (montecarlo.cpp): on the rounds of
/// PeriodicPipeline's program (the default: small buffers, whatever the microbatches), or op
/// by op over the flat DAG (the earlier path, kept for tests that compare the two: the same
/// law, other draws).
enum class McPath { rounds, ops };

/// Monte Carlo: `samples` step times, each on its own cluster realization (the marginal law).
std::vector<double> monte_carlo(const StepModel& model, const PersistentLayout& layout, int samples,
                                std::uint64_t seed, std::uint64_t point_index,
                                McSampler sampler = McSampler::automatic,
                                McPath path = McPath::rounds);

/// Replica pruning audit (tests, bench/mc_breakdown): over `samples` Monte Carlo steps, how
/// many replicas were skipped as unable to be the slowest, and how many of those, drawn anyway,
/// were slower than the slowest drawn one (each should happen with probability < 1e-12); and
/// where the sampler's work went, before the audit's extra draws: `drawn` replicas drawn,
/// `bounded` replicas whose mean-duration makespan was computed exactly for their bound,
/// `dag_runs` mean-duration passes over the schedule for those (one per 8 replicas on the
/// sparse path, one per replica on the dense one), `extends` rounds that revealed more healthy
/// group factors (sparse path).
struct PruningCheck {
    std::int64_t replicas = 0, skipped = 0, violations = 0;
    std::int64_t drawn = 0, bounded = 0, dag_runs = 0, extends = 0;
};
PruningCheck check_monte_carlo_pruning(const StepModel& model, const PersistentLayout& layout,
                                       int samples, std::uint64_t seed, std::uint64_t point_index);

/// Monte Carlo estimates of the conditional mean and variance of one step for `clusters`
/// cluster realizations, `per_cluster` steps each.
void monte_carlo_clusters(const StepModel& model, const PersistentLayout& layout, int clusters,
                          int per_cluster, std::uint64_t seed, std::uint64_t point_index,
                          std::vector<double>& mean_s, std::vector<double>& var_s2);

/// Summary statistics of Monte Carlo samples into `out` (all but deterministic_s and clusters).
void summarize_samples(std::vector<double> samples, const EvaluationSpec& eval,
                       double deterministic_s, StepDistribution& out);

/// Points of the analytic evaluator's grid for one replica's Delta (the step's CDF lattice
/// shares its spacing). 257 is within the Monte Carlo noise of 1025 and 2049 on the accuracy
/// matrix (tests/src/stochastic/accuracy_test.cpp checks the convergence).
inline constexpr int kAnalyticGridPoints = 257;
static_assert(kAnalyticGridPoints == EvaluationSpec{}.grid_points,
              "the analytic grid's default is EvaluationSpec's");

class HiccupLaw;

/// A step of fixed time `t_s` plus hiccups (hiccup.hpp): the analytic law in closed form, or
/// `eval.samples` Monte Carlo draws; `deterministic_s` for the slow-step probabilities.
StepDistribution point_with_hiccups(double t_s, double deterministic_s, const HiccupLaw& hiccup,
                                    const EvaluationSpec& eval, std::uint64_t seed,
                                    std::uint64_t point_index);

/// The analytic evaluator; if `query` is given, also its CDF at those times into `cdf_out`;
/// with an active `hiccup`, the step plus the largest hiccup delay over the nodes (hiccup.hpp).
void analytic(const StepModel& model, const PersistentLayout& layout, const EvaluationSpec& eval,
              int clusters, StepDistribution& out, const std::vector<double>* query = nullptr,
              std::vector<double>* cdf_out = nullptr, int grid_points = kAnalyticGridPoints,
              const HiccupLaw* hiccup = nullptr);

}  // namespace prism::stochastic::detail
