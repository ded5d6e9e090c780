#pragma once

// `prism fit-lr CURVES.csv --tau STEP`: fits y = a e^(b x) + c to each learning rate's measured
// loss curve (src/cotune/loss_fit.hpp), predicts the loss at step tau and names the learning
// rate whose prediction is lowest (AutoLRS, Jin et al. ICLR'21).

#include <iosfwd>
#include <string>

namespace prism::explorer {

struct FitLrOptions {
    std::string curves_path;
    double tau_step = 0;  ///< step at which the predictions are compared (> 0)
};

/// Prints one row per learning rate (fit, quality, prediction) to `out` and the choice; a
/// rejected curve (its loss does not decrease) is reported on `err` as
/// "prism: warning: FILE: learning_rate X: ...; curve rejected" and left out of the choice.
/// Returns kExitOk. Throws ConfigError on a malformed file (FILE:LINE: ...) and when every
/// curve is rejected.
int fit_lr_command(const FitLrOptions& options, std::ostream& out, std::ostream& err);

}  // namespace prism::explorer
