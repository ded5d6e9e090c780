#pragma once

// Periodic host events (PeriodicEvent, src/model/spec.hpp) found in measured step times: steps
// far above their run's median (the hiccup threshold, hiccup_fit.hpp) that recur
//   - at the same step index in every run of a configuration (within `index_window` steps:
//     the Eos-dfw 512-GPU runs' slow step sits at index 56-59 in all three), or
//   - at a fixed period inside a run (three or more hits whose gaps agree within one step).
// A same-index event seen once per run does not show its period: it is given the share of the
// runs' steps it took (every = the steps per run), which is what the measured window pins.
// The duration is the median excess of its steps over their run's median.

#include <string>
#include <vector>

#include "src/fit/step_fit.hpp"
#include "src/model/spec.hpp"

namespace prism::fit {

struct PeriodicFit {
    std::vector<PeriodicEvent> events;
    /// per event: the step indices it was found at, as text ("run a: 57, run b: 59, ...")
    std::vector<std::string> evidence;
    /// per run, the step indices attributed to an event (for without_periodic)
    std::vector<std::vector<std::int64_t>> event_steps;
};

/// Finds recurring slow steps (see above). Needs each run's step indices (or takes 1, 2, ...).
PeriodicFit fit_periodic(const std::vector<MeasuredSteps>& runs, double threshold_sd = 6.0,
                         std::int64_t index_window = 3);

/// `runs` without the steps `fit` attributed to an event (for the hiccup and body fits).
std::vector<MeasuredSteps> without_periodic(const std::vector<MeasuredSteps>& runs,
                                            const PeriodicFit& fit);

}  // namespace prism::fit
