#pragma once

// Rare hiccups (HiccupSpec, src/model/spec.hpp) fitted from measured step times: a body of
// steps near the run's median and a few steps well above it. A step whose excess over its
// run's median is above a threshold (a multiple of the body's robust spread) is a hiccup step,
// its excess the largest delay over the job's nodes; below the threshold a hiccup is not told
// from the body (censored). Maximum likelihood over (q, delay median, delay sigma) -- and, with
// 5 hits or more, over (q, median, Pareto shape alpha > 2), the likelier family kept -- with
//   P(excess <= c) = G(c) = (1 - q + q F_D(c))^n,  density g(e) = n q f_D(e) (1 - q S_D(e))^(n-1)
// per group of runs with its node count n, so that runs at several scales pin q per node (the
// chance a step is hit grows as 1 - (1 - q)^n) rather than a per-scale constant.

#include <limits>
#include <string>
#include <vector>

#include "src/fit/step_fit.hpp"
#include "src/model/spec.hpp"

namespace prism::fit {

/// Runs of one configuration and the nodes its job spans.
struct HiccupGroup {
    std::vector<MeasuredSteps> runs;
    double nodes = 1;
};

struct HiccupFit {
    HiccupSpec hiccup;      ///< probability 0 when no step is above the threshold
    std::size_t steps = 0;  ///< steps seen
    std::size_t hits = 0;   ///< steps above the threshold (hiccup steps)
    double log_likelihood = 0;
    /// With no hit: the 95% upper bound on q (rule of three over node-steps).
    double probability_upper_95 = 0;
    /// false with fewer than 5 hits: the delay's sigma is then held (at the hits' log spread,
    /// at least 0.5), not fitted
    bool sigma_fitted = false;
    /// With 5 hits or more both delay families are fitted and the likelier one is kept in
    /// `hiccup` (Pareto: family pareto, delay_tail; its pareto_log_likelihood stays NaN below).
    double lognormal_log_likelihood = 0;
    double pareto_log_likelihood = std::numeric_limits<double>::quiet_NaN();
};

/// Threshold of a hiccup step: `threshold_sd` robust standard deviations (1.4826 MAD) of the
/// run's steps above its median. Throws ModelError when a run has fewer than 2 steps.
HiccupFit fit_hiccups(const std::vector<HiccupGroup>& groups, double threshold_sd = 6.0);

}  // namespace prism::fit
