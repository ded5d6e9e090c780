#pragma once

// Measured loss curves for `prism fit-lr`: a CSV file with a header naming the columns
// `learning_rate`, `step` and `loss` (any order; other named columns are ignored), one row per
// measurement, any number of learning rates in one file, `#` comment lines and blank lines
// skipped:
//
//   # lr sweep, 200 steps each
//   learning_rate,step,loss
//   1e-4,0,10.93
//   1e-4,10,9.87
//   3e-4,0,10.95
//
// Within one learning rate the steps must increase (rows of different learning rates may
// interleave).

#include <string>
#include <vector>

namespace prism::io {

struct LossCurve {
    double learning_rate = 0;
    std::vector<double> steps;
    std::vector<double> losses;
    std::size_t first_line = 0;  ///< line of its first row (for messages)
};

/// The curves of `path`, in order of first appearance. Throws ConfigError "PATH: cannot open
/// ..." when the file cannot be read, "PATH:LINE: ..." on malformed content (a missing column, a
/// field that is not a finite number, a learning rate <= 0, a step not after the previous one of
/// its learning rate) and "PATH: learning_rate X: N points; a fit needs at least 5".
std::vector<LossCurve> read_loss_curves(const std::string& path);

/// The same from text, `path` naming it in messages.
std::vector<LossCurve> parse_loss_curves(const std::string& text, const std::string& path);

}  // namespace prism::io
