#pragma once

// `prism steps compare RUNS... --experiment EXP.toml`: measured step times (MLPerf-style CSVs,
// or the ProfilerStep spans of PyTorch profiler traces) against the model's step-time
// distribution for the run's configuration; `prism steps fit RUNS... --experiment EXP.toml -o
// profile.toml`: the variability parameters fitted to them (src/fit/step_fit.hpp), written as a
// variability profile with their provenance.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "src/model/spec.hpp"
#include "src/model/step_profile.hpp"

namespace prism::explorer {

struct StepsCommand {
    std::vector<std::string> runs;  ///< .csv step files or .json[.gz] traces
    std::string experiment;
    std::string variability;           ///< compare: preset or profile (default: the experiment's)
    std::string output;                ///< fit: the profile to write
    std::string base = "prism-paper";  ///< fit: class ratios and what steps cannot give
    std::string target = "both";       ///< fit: transient, regime or both
    std::string name;
    std::vector<std::string> notes;  ///< fit: extra comment lines for the profile's header
    int monte_carlo_samples = 0;     ///< 0: the analytic evaluator for the within-run shape
    int warmup_steps = 5;
    bool keep_first_after_eval = false;
    bool overwrite = false;      ///< fit: replace an existing --output
    bool hiccups = false;        ///< fit: also fit rare hiccups (src/fit/hiccup_fit.hpp)
    bool regime_levels = false;  ///< steps fit: the regime per link level (NVLink fitted)
    std::string runs_from;       ///< fit: a manifest of groups of runs (io/runs_manifest.hpp)
    /// fit --runs-from: also the stalled fraction of stalls of this duration ("20 ms"), from
    /// the medians' growth over the groups (src/fit/stall_fit.hpp); empty: not fitted
    std::string stalls;
};

/// What a point's stalls add to its step, one line (`prism eval`, `steps compare`): "stalls (f
/// of a node's time, d ms each): S synchronizations a step among G members of N nodes: +X ms
/// mean (sd, share of the step), share of steps without one" (stochastic::stall_summary).
std::string stalls_line(const StepProfile& profile, const DesignPoint& point,
                        const HardwareSpec& hardware, const VariabilitySpec& variability);

/// What a point's hiccups and periodic events add, one line each (empty without them):
/// "hiccups (q per node and step, delay median m): N nodes: X% of steps hit, +Y ms mean" and
/// "periodic events (name every k steps + d s, ...): +Z ms mean" (stochastic::hiccup_summary).
std::vector<std::string> hiccup_lines(const DesignPoint& point, const HardwareSpec& hardware,
                                      const VariabilitySpec& variability);

/// Registers `steps compare` and `steps fit`; returns the `steps` subcommand.
CLI::App* add_steps_command(CLI::App& app, StepsCommand& command);

/// Runs the chosen one. Throws ConfigError (bad experiment, option or run file, an existing
/// output, steps that pin no spread) or IoError (the profile cannot be written).
int run_steps_command(const CLI::App& steps, const StepsCommand& command);

}  // namespace prism::explorer
