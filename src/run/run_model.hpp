#pragma once

// From steps to a training run (DESIGN.md section 4): the run-time distribution of a whole
// training run with interruptions, restarts and checkpoints.
//
// The model, in one place (docs/model.md, "From steps to a run", states the same):
// - Compute. Given one realization k of the persistent factors (a simulated cluster), the steps
//   of a run are independent with mean m_k and variance v_k (transient noise is drawn per step),
//   so the sum of n steps is normal(n m_k, n v_k) by the central limit theorem (n is 1e4..1e6).
//   The run over clusters is the equal-weight mixture over the K realizations; it is NOT a
//   normal with the step variance divided by the step count.
// - Failures arrive as a Poisson process of rate sum_c N_c / MTBF_c (N_c = GPUs or nodes of
//   the job). A Weibull cause is a superposition of N_c stationary renewal processes, which is
//   Poisson with the same rate as N_c grows (Palm-Khintchine); the fast path uses that limit,
//   the Monte Carlo (run_montecarlo.hpp) simulates the renewal processes themselves.
// - Checkpointing (Bougeret, Casanova, Rabie, Robert, Vivien, "Checkpointing strategies for
//   parallel jobs", SC'11): work is cut into segments of tau seconds of compute, each followed
//   by a blocking checkpoint write of C seconds; a failure during a segment or its checkpoint
//   loses the segment, costs a downtime D (detection; no failure can strike) and a recovery R
//   (restart; a failure during it starts D + R again), then the segment is redone. The
//   expected segment time is e^{lambda R} (1/lambda + D) (e^{lambda (tau + C)} - 1); the fast
//   path also has the segment's variance and third cumulant in closed form, sums them over
//   segments (cumulants of independent segments add) and approximates each realization's
//   run time by the Normal-Power approximation (three cumulants), keeping the runs that no
//   failure strikes apart as an atom (probability e^{-lambda * failure-free time}).
// - Checkpoint cost: synchronous, C = bytes / storage bandwidth. Asynchronous: the blocking
//   part is the snapshot to host memory, C = bytes / (gpus * host_copy_bytes_per_s) (the
//   checkpoint is sharded over all GPUs); the storage write overlaps compute but a failure
//   during it loses the checkpoint in flight, on average one write time of extra work per
//   failure, which is added to the downtime D; the interval is kept >= the write time so that
//   writes never queue.
// - Straggler draining ([failures] straggler_detection): a realization whose mean step m_k is
//   more than the threshold above the healthy cluster's m_h (the law without slow units) runs
//   n_1 = min(n, detection / m_k) steps at m_k, is then checkpointed and restarted without its
//   slow units (blocking checkpoint C + replacement), and runs the other n - n_1 steps at m_h:
//   its compute has mean n_1 m_k + (n - n_1) m_h and variance n_1 v_k + (n - n_1) v_h, and
//   failures strike it in proportion to that time. A drained realization runs at the healthy
//   clusters' mean m_h, not at its own spatial draw without the slow units (unknown here):
//   right on average when the drained realizations are the ones slow units made slow (a
//   threshold above the spatial spread). Slow units that appear later, and failures during
//   the replacement, are not modelled.
// - Step autocorrelation ([variability] step_autocorrelation = rho): within a realization the
//   steps' noise is a stationary AR(1), so the sum of n steps has variance v_k times
//   n (1 + rho) / (1 - rho) - 2 rho (1 - rho^n) / (1 - rho)^2 instead of n v_k (the mean and each
//   step's law are unchanged).

#include <cstdint>
#include <vector>

#include "src/model/spec.hpp"

namespace prism {

/// Everything `evaluate_run` needs. SI units throughout.
struct RunInput {
    std::int64_t steps = 0;              ///< optimizer steps of the run (tokens / tokens per step)
    double deterministic_step_s = 0;     ///< step time without variability
    std::vector<double> cluster_mean_s;  ///< per realization: conditional mean of ONE step
    std::vector<double> cluster_var_s2;  ///< per realization: conditional variance of one step
    std::int64_t gpus = 0;               ///< GPUs of the job
    int gpus_per_node = 8;
    double checkpoint_bytes = 0;  ///< bytes written per checkpoint (weights + optimizer)
    FailureSpec failures;         ///< causes, detection, restart, policy, deadlines
    double checkpoint_interval_override_s = 0;  ///< DesignPoint::checkpoint_interval_s; 0 = policy
    double host_copy_bytes_per_s = 25.0e9;      ///< per-GPU device-to-host copy (async snapshot)
    /// The healthy cluster (the law without slow units): what a drained realization runs at
    /// after replacement (FailureSpec::straggler_detection_s). 0 = unknown: no draining.
    double healthy_mean_s = 0;
    double healthy_var_s2 = 0;
    double step_autocorrelation = 0;  ///< lag-1, of the steps' noise within a realization
};

/// Var(sum of n steps) / Var(one step) for a stationary AR(1) with lag-1 autocorrelation rho:
/// n (1 + rho) / (1 - rho) - 2 rho (1 - rho^n) / (1 - rho)^2 (n for rho = 0).
double ar1_sum_variance_factor(double n, double rho);

/// What a run evaluation reports (the metric names the explorer exposes in brackets).
struct RunMetrics {
    double run_time_mean_s = 0;
    double run_time_p50_days = 0;           ///< [run_time_p50_days]
    double run_time_p95_days = 0;           ///< [run_time_p95_days]
    double run_time_p99_days = 0;           ///< [run_time_p99_days]
    double ettr = 0;                        ///< [ettr] E[failure-free compute] / E[run time]
    double interruptions_mean = 0;          ///< [interruptions_mean] failures striking the job
    double gpu_hours_mean = 0;              ///< [gpu_hours_mean] all GPUs held for the whole run
    double gpu_hours_p95 = 0;               ///< [gpu_hours_p95]
    std::vector<double> p_run_le_deadline;  ///< [p_run_le_<deadline>] one per FailureSpec deadline
    double checkpoint_interval_s = 0;       ///< [checkpoint_interval_s] compute between checkpoints
    double checkpoint_interval_opt_s = 0;   ///< [checkpoint_interval_opt_s] optimum of E[run time]
    double checkpoint_cost_s = 0;           ///< blocking time of one checkpoint
};

/// The three first cumulants of a random time (mean, variance, third central moment).
struct Cumulants {
    double k1 = 0;
    double k2 = 0;
    double k3 = 0;
};

/// Everything the fast path and the Monte Carlo share: rates, costs, the chosen interval.
struct CheckpointPlan {
    bool enabled = false;           ///< failures and checkpoints modelled at all
    double failure_rate_per_s = 0;  ///< lambda, all causes
    double blocking_s = 0;          ///< C: blocking time of one checkpoint
    double commit_s = 0;            ///< storage write time (async: hidden but at risk)
    double downtime_s = 0;          ///< D: detection (+ async commit loss); no failure strikes
    double recovery_s = 0;          ///< R: restart; failures may strike
    double interval_s = 0;          ///< tau used: compute seconds between checkpoints
    double interval_opt_s = 0;      ///< tau minimizing expected run time (full model)
};

/// Failure rate (1/s) of a job on `gpus` GPUs: sum over causes of N / MTBF, N = GPUs or nodes
/// (ceil(gpus / gpus_per_node)). Throws ModelError on a non-positive MTBF or Weibull shape.
double failure_rate_per_s(const FailureSpec& failures, std::int64_t gpus, int gpus_per_node);

/// Young (1974): tau = sqrt(2 C M), M = 1 / lambda the job's mean time between failures.
double young_daly_interval_s(double checkpoint_s, double mtbf_s);

/// Minimizer of the expected run time of the full (Bougeret et al.) model,
/// expm1(lambda (tau + C)) / tau, by Newton iteration on its stationarity condition
/// (x - 1) e^x + 1 = 1 - e^{-lambda C}, x = lambda tau. +inf when lambda = 0.
double optimal_interval_s(double checkpoint_s, double rate_per_s);

/// Cumulants of the wall time to complete one segment whose failure-free duration is
/// `window_s` (work + checkpoint), under failures of rate `rate_per_s`, downtime `downtime_s`
/// and recovery `recovery_s` (see the file comment).
Cumulants segment_time_cumulants(double window_s, double rate_per_s, double downtime_s,
                                 double recovery_s);

/// Rates, checkpoint costs and the interval from the policy (or the override), clamped to
/// [one mean step, the whole run] (async: also >= the storage write time). Throws ModelError on
/// an invalid input, naming the field.
CheckpointPlan plan_checkpoints(const RunInput& input);

/// The run-time distribution: a weighted mixture of Normal-Power components. Per realization
/// two components: the runs that no failure strikes (probability e^{-lambda * exposed time}:
/// an atom at the failure-free time, blurred only by the step noise) and the runs with at
/// least one failure (the remaining moments). Keeping the atom apart matters when a run sees
/// only a few failures; with many it has negligible weight and is dropped.
class RunTimeDistribution {
  public:
    struct Component {
        double weight = 1;  ///< normalized to sum 1 by the constructor
        double mean_s = 0;
        double sd_s = 0;
        double skew = 0;  ///< clamped to [-1, 1], where the NP approximation is monotone
    };

    RunTimeDistribution() = default;
    explicit RunTimeDistribution(std::vector<Component> components);

    double mean_s() const noexcept { return mean_s_; }
    /// P(run time <= t_s).
    double cdf(double t_s) const;
    /// The p-quantile (0 < p < 1): safeguarded Newton on the mixture CDF, from the mixture's
    /// own Normal-Power quantile.
    double quantile(double p) const;
    const std::vector<Component>& components() const noexcept { return components_; }

  private:
    std::vector<Component> components_;
    double mean_s_ = 0;
};

/// The full fast-path result: plan, distribution, expected interruptions and work.
struct RunAnalysis {
    CheckpointPlan plan;
    RunTimeDistribution run_time;
    double work_mean_s = 0;         ///< E[failure-free compute time] = steps * mean step
    double interruptions_mean = 0;  ///< E[number of failures striking the job]
    double drained_fraction = 0;    ///< share of the realizations whose straggler is drained
};

/// Fast path (closed forms, no sampling). Throws ModelError on invalid input.
RunAnalysis analyze_run(const RunInput& input);

/// The run metrics of one design point: fast (a few microseconds) and deterministic. The fast
/// path draws no random numbers, so `seed` and `point_index` do not change the result; they
/// are taken so that a future sampled refinement stays reproducible per (seed, index).
RunMetrics evaluate_run(const RunInput& input, std::uint64_t seed, std::uint64_t point_index);

}  // namespace prism
