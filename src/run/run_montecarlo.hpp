#pragma once

// Monte Carlo of whole training runs: the reference the fast path (run_model.hpp) is tested
// against. It simulates events, not formulas: failure arrivals in wall-clock time (a merged
// Poisson stream for exponential causes; one renewal process per GPU or node for Weibull
// causes, each started in its stationary state), segments of whole steps whose compute time is
// drawn per attempt, blocking checkpoint writes, detection and restart, and failures during
// restart, rollback to the last committed checkpoint. Same convention as the fast path: no
// failure strikes during detection. Asynchronous checkpoints are simulated as they happen (the
// snapshot blocks, the storage write commits later, a failure loses a write in flight), which
// tests the fast path's one-write-time-per-failure rule rather than repeating it.

#include <cstdint>
#include <vector>

#include "src/run/run_model.hpp"

namespace prism {

/// One simulated run.
struct RunSample {
    double run_time_s = 0;           ///< wall time from start to the last checkpoint
    double work_s = 0;               ///< compute of the steps of the run (no lost work)
    std::int64_t interruptions = 0;  ///< failures that struck the job (not during detection)
    std::int64_t checkpoints = 0;    ///< checkpoints completed
};

/// Simulates `samples` runs. Sample i uses realization i mod K (equal weights, stratified) and
/// the random stream (seed, point_index, i): results do not depend on how samples are split.
/// The checkpoint interval is the fast path's (`plan_checkpoints`), rounded to whole steps of the
/// mean step time. Throws ModelError on invalid input.
std::vector<RunSample> simulate_runs(const RunInput& input, int samples, std::uint64_t seed,
                                     std::uint64_t point_index);

}  // namespace prism
