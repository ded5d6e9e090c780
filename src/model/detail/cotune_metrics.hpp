#pragma once

// The [cotune] metrics of one design point: the steps and tokens to the target
// (src/cotune) times the point's stochastic step time, through the run model (src/run) so that
// failures and checkpoints count where [failures] is on.

#include <optional>
#include <string>
#include <vector>

#include "src/cotune/cotune.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/spec.hpp"
#include "src/run/run_model.hpp"

namespace prism::detail {

struct CotuneMetrics {
    double steps = 0;
    double tokens = 0;
    double time_mean_s = 0;
    double time_p50_s = 0;
    double time_p95_s = 0;
    double gpu_hours = 0;  ///< GPUs x mean time to target
    double goodput_tokens_per_s = 0;
    double statistical_efficiency = 0;
    double learning_rate_opt = 0;
};

/// The global batch of `point` in tokens.
double batch_tokens(const Experiment& experiment, const DesignPoint& point);

/// The step time of each batch-ramp phase `point` runs through, over its own step time `det`
/// (the deterministic model at the phase's batch), into `ratios`. Returns why the point cannot
/// run the ramp (a phase's batch does not split into its dp x microbatch), or nullopt.
std::optional<std::string> ramp_step_time_ratios(const Experiment& experiment,
                                                 const cotune::Model& model,
                                                 const DesignPoint& point,
                                                 const DeterministicResult& det,
                                                 std::vector<double>& ratios);

/// The metrics, `run` being the point's run input (step-time clusters, GPUs, failures,
/// checkpoint interval) whose `steps` this sets to the equivalent steps to the target, and
/// `step_time_mean_s` its mean step time (for the goodput).
CotuneMetrics evaluate_cotune(const Experiment& experiment, const cotune::Model& model,
                              const DesignPoint& point, std::vector<double> ramp_ratios,
                              RunInput run, double step_time_mean_s);

}  // namespace prism::detail
