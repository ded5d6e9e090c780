#pragma once

// Loss-curve extrapolation in the spirit of AutoLRS (Jin et al., "AutoLRS: automatic
// learning-rate schedule by Bayesian optimization on the fly", ICLR'21, section 4.2): fit
// y = a e^(b x) + c, b < 0, to a short measured loss curve per candidate learning rate,
// predict the loss after tau steps and pick the learning rate whose prediction is lowest.
//
// Robustness: loss curves carry spikes (bad batches, restarts). The fit is iteratively
// reweighted least squares with Huber weights (Huber 1964; k = 1.345 sigma, 95% efficiency under
// Gaussian noise), sigma re-estimated each pass as 1.4826 x the median absolute residual. Each
// pass is a variable projection (Golub & Pereyra 1973): for a fixed b the model is linear in
// (a, c), solved in closed form, so only b is searched (a log-spaced scan of 97 rates over
// 1e-3..50 decays across the curve, refined by golden section). A point far out gets weight
// k sigma / |r|, so its pull on the fit stays bounded whatever its size.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace prism::cotune {

/// y = a e^(b x) + c with x = step - the curve's first step.
struct ExponentialFit {
    double a = 0;             ///< loss above the plateau at the first step
    double b = 0;             ///< rate per step (< 0)
    double c = 0;             ///< plateau
    double first_step = 0;    ///< x = 0 there
    double rmse = 0;          ///< root mean square residual over all points
    double robust_sigma = 0;  ///< 1.4826 x median |residual|
    double r_squared = 0;     ///< 1 - SS_res / SS_tot (all points, unweighted)
    std::size_t points = 0;
    std::size_t downweighted = 0;  ///< points the Huber weights took below 1/2 (outliers)
    /// the fraction of the decay e^(b X) the curve has seen, 1 - e^(b X) over its span X: small
    /// means the plateau c is an extrapolation
    double decay_seen = 0;
    bool rate_at_bound = false;  ///< b at the edge of the searched range

    double predict(double step) const;
};

/// A fit, or why a curve is rejected.
struct FitOutcome {
    std::optional<ExponentialFit> fit;
    std::string rejected;  ///< non-empty when rejected: "the loss does not decrease (...)"
};

/// Fits one curve (steps strictly increasing, at least 5 points: ModelError otherwise). A curve
/// whose loss does not decrease (the median of its last quarter not below that of its first,
/// or a fitted a <= 0) comes back rejected.
FitOutcome fit_exponential(std::span<const double> steps, std::span<const double> losses);

/// Index of the smallest predicted loss at `tau_step` among the fitted outcomes, or nullopt
/// when none is fitted.
std::optional<std::size_t> best_learning_rate(std::span<const FitOutcome> outcomes,
                                              double tau_step);

}  // namespace prism::cotune
