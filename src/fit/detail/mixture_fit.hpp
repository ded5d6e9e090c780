#pragma once

// A lognormal body with a rare slow mode, fitted around each group's own location: the form
// the PRISM-paper preset gives collectives, and what kernels that now and then share the GPU
// with a concurrent kernel (a collective on another stream) look like in real traces.

#include <vector>

namespace prism::fit::detail {

/// log x = mu_g + e, e ~ (1 - p) N(0, body_sigma^2) + p N(shift, slow_sigma^2).
struct SlowModeMixture {
    double slow_weight = 0;  ///< p
    double shift = 0;        ///< log of the slow mode's factor over the body
    double body_sigma = 0;
    double slow_sigma = 0;
    bool converged = false;
};

/// Log durations of one kernel and the kernel's weight (its median duration).
struct LogGroup {
    std::vector<double> y;
    double weight = 0;
    double noise_var = 0;  ///< variance of the timer's rounding on the log scale
};

/// EM (Dempster, Laird and Rubin 1977) for the mixture with a location per group, started from
/// each group's median; the body variance is divided by its degrees of freedom (n - 1 per
/// group, shared by the components in proportion to their responsibilities) so that groups of
/// 3 to 6 do not shrink it. The timer's rounding adds each group's noise_var to the body's
/// variance (durations of whole microseconds would otherwise let the body collapse onto
/// repeated values). `locations` receives the fitted mu_g.
SlowModeMixture fit_slow_mode(const std::vector<LogGroup>& groups, std::vector<double>* locations);

/// The mixture's CDF of a residual e = log x - mu_g for a group of n (the body's spread
/// deflated by sqrt((n - 1) / n), as a residual around an estimated location; noise_var the
/// group's rounding variance).
double slow_mode_cdf(const SlowModeMixture& m, double e, double n, double noise_var);

}  // namespace prism::fit::detail
