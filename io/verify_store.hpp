#pragma once

// The /verify group of a result file (`[evaluation] verify = "montecarlo"`): the Pareto front's
// points re-evaluated by Monte Carlo after an analytic sweep (stochastic/verify.hpp). Layout:
//
//   /verify                 group; attributes method ("montecarlo"), samples, description
//   /verify/index           uint64   design-space index of a front point, increasing
//   /verify/ks              float64  sup |F_analytic - F_montecarlo| at the Monte Carlo draws
//   /verify/<q>_analytic_s  float64  q in mean, p50, p95, p99: the analytic evaluator's value
//   /verify/<q>_mc_s        float64  the Monte Carlo sample's (mean; order statistic
//                                    floor(p (n - 1)) of the sorted draws)
//   /verify/<q>_diff_s      float64  analytic minus Monte Carlo
//
// Every dataset has attributes `unit` and `description`. Written once, whole, after the sweep
// has closed the file (complete): a run stopped while verifying leaves no /verify group, and a
// second verification replaces the first.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/stochastic/verify.hpp"

namespace prism::io {

/// One front point's verification.
struct VerifiedPoint {
    std::uint64_t index = 0;
    stochastic::Verification verification;
};

/// Writes (or replaces) /verify in the result file at `path`, rows sorted by index. Throws
/// IoError naming the file when it is not a prism result file or cannot be written.
void write_verification(const std::string& path, int samples, std::vector<VerifiedPoint> rows);

/// Whether the experiment text stored in a result file (its root attribute experiment_toml)
/// asks for the front's verification (`[evaluation] verify = "montecarlo"`); false when the
/// text does not parse (format-1 files, damaged attributes: other checks name those).
bool verification_requested(const std::string& experiment_toml);

/// The /verify rows of the result file at `path` (samples filled from the group attribute), or
/// nothing when the file has no /verify group. Throws IoError naming the file and dataset.
std::optional<std::vector<VerifiedPoint>> read_verification(const std::string& path);

}  // namespace prism::io
