#pragma once

// What the deterministic model says of a point's stochastic metrics before its step-time
// distribution is computed: bounds that let a sweep skip the distribution of a point that is
// dominated anyway (the exact Pareto front without evaluating the dominated).
//
// For a metric to be minimized a lower bound L (value >= L), for one to be maximized an upper
// bound U (value <= U), from the point's deterministic row:
//  * the deterministic metrics themselves (step_time_s, memory_per_gpu_gib, gpus, tokens_per_s,
//    mfu, ...) and steps_total: exact;
//  * step_time_mean_s >= step_time_s. In the model (DESIGN.md section 2) every op's duration
//    is its deterministic time times factors of mean 1, and a TP group's op waits for its
//    slowest member, whose mean factor is >= 1 (E max >= max E); the makespan is a longest
//    path, convex and non-decreasing in the durations, so by Jensen E[makespan] >= the
//    makespan of the mean durations >= the deterministic makespan; the DP sync and the
//    optimizer add max(0, .) and sums of the same kind; the step is a max over replicas, each
//    one >= it. The analytic evaluator approximates this law: its mean is checked against the
//    bound over the quickstart and the GPT-3 175B / 1024-A100 space (tests, bench/bound_check);
//  * step_time_{p90,p95,p99,p999}_s >= step_time_s: not a theorem (a rare slow mode can put
//    a quantile of one op below its mean), but the step sums thousands of ops along its
//    critical path, each at least its deterministic time on average, and takes a max over
//    replicas: its upper quantiles sit above the deterministic step by the variability's
//    spread. Checked like the mean (bench/bound_check, analytic: p90 >= 1.047, p95 >= 1.050
//    times the deterministic step on the GPT-3 175B / 1024-A100 space's 9,083 feasible points,
//    >= 1.12 / 1.14 on the quickstart); a sweep also checks every point it evaluates and stops
//    pruning if one falls below (sweep_command.cpp). Not the median: it falls below the
//    deterministic step on 325 points of that space (down to 0.9993 of it), where the
//    variability is small and skewed (a lognormal's median is below its mean);
//  * tokens_per_s_{mean,p95} <= tokens_per_s and mfu_{mean,p95} <= mfu (the same bounds,
//    inverted), tail_ratio_p99 >= 1;
//  * gpu_hours_mean >= gpus x steps_total x step_time_s / 3600: the run's mean time is its
//    steps at the mean step time (>= the deterministic step) plus checkpoints and failures
//    (>= 0), run_model.cpp;
//  * run_time_{p50,p95,p99}_days >= steps_total x step_time_s / 86400 and gpu_hours_p95 >=
//    gpus x steps_total x step_time_s / 3600: not a theorem for a quantile, but the run sums
//    steps_total (10^5 and more) steps whose mean is >= the deterministic step, and adds
//    checkpoints and failures (>= 0): checked as the step quantiles are (every evaluated
//    point; a violation stops pruning);
// and none for the others (std, probabilities, sensitivities, [cotune]): an objective without a
// bound turns pruning off.

#include <string>
#include <vector>

#include "src/model/metrics.hpp"
#include "src/model/spec.hpp"

namespace prism {

enum class BoundKind {
    exact,  ///< known from the deterministic model
    lower,  ///< value >= bound
    upper,  ///< value <= bound
    none,   ///< no bound
};

/// The kind of bound metric `name` has (see above).
BoundKind metric_bound_kind(const std::string& name);

/// Bound of metric `name` from a row (schema order) whose deterministic metrics are filled;
/// NaN for BoundKind::none or when the row lacks what the bound needs.
double metric_bound(const MetricSchema& schema, const std::vector<double>& row,
                    const std::string& name);

/// Whether every objective of the experiment has a bound in its direction (a lower or exact
/// bound for a minimized metric, an upper or exact one for a maximized): pruning is exact only
/// then. `why` names the first objective without one.
bool objectives_bounded(const Experiment& experiment, std::string* why = nullptr);

}  // namespace prism
