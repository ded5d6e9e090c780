#pragma once

// Stalls (StallSpec, src/model/spec.hpp; docs/tails.md, "Stalls that every synchronization waits
// for") fitted from measured step times at several scales of one platform.
//
// What step times can and cannot pin down: a stall adds to the steps of every run of a scale
// alike, so within a run it is a level, not a shape; it shows only as the measured median
// growing with the job faster than the model's does. Each group's ratio of its measured median
// to the model's median is therefore compared across the groups with one level left free (the
// calibration's error, common to the scales): the stalled fraction f is the one that makes the
// ratios flattest, the least squares of log(measured / model(f)) about their mean; where several
// fractions flatten them (the medians of a discrete law move by steps, FSDP's largest job
// saturates once each synchronization has a stall) the least one within 0.1% of the best fit.
// It needs two scales whose stalls reach the step differently (their job's nodes); with two
// groups the fit is exact where some fraction reaches the measured growth, with more it averages.
// The stall's duration d is given, not fitted: medians tell f and d apart only where the stalls are
// rarer than the synchronizations (docs/calibration.md, "Gaps"); the fit prints the fraction for
// the duration it is given. A group's model median is the analytic evaluator's p50 over clusters
// (the persistent factors drawn: the runs come from separate allocations) with the base profile
// plus the stalls, or with StepModelInput::monte_carlo_samples (steps fit --monte-carlo) the
// median of that many Monte Carlo steps, each on its own cluster, from the group's seed at every
// fraction tried.

#include <string>
#include <vector>

#include "src/fit/step_fit.hpp"
#include "src/model/spec.hpp"

namespace prism::fit {

/// One scale: its model and the median of its runs' steps pooled (s).
struct StallGroup {
    std::string name;
    StepModelInput model;
    double measured_median_s = 0;
};

struct StallFit {
    StallSpec stalls;  ///< the fitted fraction (0 when the medians do not grow) and the duration
    /// exp(mean of log(measured / model)) at the fit: the calibration's common level
    double level = 1;
    std::vector<double> measured_s;       ///< each group's measured median (as given)
    std::vector<double> model_without_s;  ///< each group's model median without stalls
    std::vector<double> model_with_s;     ///< and with the fitted ones
    /// Root mean square of log(measured / model) about its mean, without stalls and at the fit
    /// (0 when the fit flattens the ratios: two groups whose growth some fraction reaches)
    double rms_without = 0, rms_with = 0;
    bool at_upper_bound = false;  ///< the fraction ended at kMaxStallFraction
    /// The least share the fitted stalls add to a group's model median (model_with / _without
    /// - 1, the smallest over the groups: the least stalled scale)
    double least_share = 0;
    /// Whether the fit explains growth rather than moving every scale's level: the stalls add at
    /// most kMaxLeastStallShare to the least stalled group's median. Past it the fraction is
    /// the one that flattens the ratios by lengthening every step (a level the calibration's
    /// own error bound would not allow), and the measured growth is not stall-like.
    bool stall_like() const;
};

/// The most the fitted stalls may add to the least stalled group's median for the fit to count
/// as explaining growth: the calibration's error bound (issue 34: sources within 10% of their
/// measured steps), so that the common level the fit leaves free stays within it.
inline constexpr double kMaxLeastStallShare = 0.10;

/// The largest stalled fraction the fit tries (the loader's bound on stall_fraction).
inline constexpr double kMaxStallFraction = 0.5;

/// The stalled fraction of `duration_s` stalls that flattens the groups' measured / model
/// medians, with `base`'s other terms (its stalls replaced). Throws ConfigError with fewer than
/// two groups, a duration that is not a positive finite time, or groups whose stalls all reach
/// the step alike (the same job shape: nothing to compare), and ModelError for a median that is
/// not a positive finite time.
StallFit fit_stalls(const std::vector<StallGroup>& groups, const VariabilitySpec& base,
                    double duration_s);

/// Each group's measured median (its runs' steps pooled) with its model: the stall fit's input.
std::vector<StallGroup> stall_groups(const std::vector<StepGroup>& groups);

/// How much a stall fit rests on the within-run split it was handed. The shape (each run over
/// its median) tells transient noise from the regime only as far as their shapes differ, while a
/// collective waiting for the largest of its GPUs' transient draws raises the median, the more
/// the more GPUs: which the stall fit reads as growth. The ridge's two ends (all of the
/// within-run spread from the regime, or all from the transient noise: fit_steps_groups with
/// that target, the other parameter at 0) are fitted again over every group, and where an end's
/// worst KS shape is within kRidgeKs of the fit's (as good a shape) the stalls with it.
struct StallRidgeEnd {
    StepFitTarget target = StepFitTarget::regime;  ///< regime or transient
    StepFit fit;                                   ///< the end's within-run fit
    bool as_good = false;                          ///< its worst KS within kRidgeKs of the fit's
    StallFit stalls;                               ///< with it (as_good only)
};
struct StallRidge {
    std::vector<StallRidgeEnd> ends;  ///< regime end, transient end
    /// The least and largest stalled fraction along the ridge (the fit's and its good ends')
    double lo = 0, hi = 0;
    /// The fractions differ by more than kRidgeApart (or one is 0 and another is not): the
    /// step times do not pin the stalls.
    bool apart() const;
};
/// KS shapes within this of each other: as good a fit (below what a few hundred steps resolve).
inline constexpr double kRidgeKs = 0.02;
/// Fractions along the ridge more than this factor apart are not pinned by the step times.
inline constexpr double kRidgeApart = 1.25;

/// The stall fit along the ridge of `fit` (fit_steps_groups on `groups` with `base`), whose
/// stall fit gave `fraction` for stalls of `duration_s`.
StallRidge stall_ridge(const std::vector<StepGroup>& groups, const VariabilitySpec& base,
                       const StepFit& fit, double fraction, double duration_s);

}  // namespace prism::fit
