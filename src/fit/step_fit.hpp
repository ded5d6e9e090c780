#pragma once

// Variability fitted from measured step times (DESIGN.md section 2 against real runs): the
// model's step-time distribution for a run's configuration compared with the steps a run
// logged, and the variability parameters moved until they match.
//
// What step times can and cannot pin down (identifiability):
//   - Within one run the persistent factors G (spatial spread, slow nodes) are fixed, so the
//     step-to-step spread is the transient noise and the per-step comm regime. Steps are
//     compared by their shape relative to their run's median (the median is the deterministic
//     model's job, and a 1% error there would swamp a 0.04% spread): the model's distribution
//     with the persistent factors at 1, scaled by its median, against each run's steps scaled
//     by theirs, by the KS distance of the pooled probability-integral transforms.
//   - A step sums thousands of kernels: their transient noise reaches the step only as its
//     total (the classes' split is invisible: one scale on the base profile's class cvs is
//     fitted, the ratios kept from traces or literature), and it looks normal; the regime
//     multiplies every collective of a step at once and keeps its own (lognormal) skew. The two
//     are told apart only by the shape's skew: the step variance fixes a ridge
//     a s^2 + b r^2 = var, along which the KS changes little (fit_steps reports the profile).
//   - Between runs (new allocation, same system) the persistent factors change: the spread of
//     the runs' medians identifies the spatial cv, from as many runs as there are (3 here:
//     2 degrees of freedom, a factor of 4 either way at 90%). Slow nodes show up only as a run
//     whose median jumps by the slow factor: none in N node-runs bounds their probability by
//     3 / N (95%, the rule of three), nothing more.

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "src/model/spec.hpp"
#include "src/model/step_profile.hpp"

namespace prism::fit {

/// One run's selected step times (s).
struct MeasuredSteps {
    std::string name;
    std::vector<double> step_time_s;
    /// each step's index in its run (the same length, or empty: 1, 2, ... in order)
    std::vector<std::int64_t> step_index{};
};

/// The run's configuration as the model evaluates it.
struct StepModelInput {
    StepProfile profile;
    DesignPoint point;
    HardwareSpec hardware;
    ClusterSpec cluster;
    std::uint64_t seed = 0;
    /// 0: the analytic evaluator; else the model's within-run distribution is this many Monte
    /// Carlo steps (slower; the reference, e.g. where the analytic one is coarse:
    /// docs/limitations.md).
    int monte_carlo_samples = 0;
};

/// The parameters a step fit moves on a base profile.
struct StepFitParameters {
    double transient_scale = 1;  ///< every class's transient cv times this (lognormal)
    double regime_cv = 0;        ///< per-step comm regime (lognormal)
    double spatial_cv = 0;       ///< persistent per-GPU spread (normal)
    /// the regime's multipliers per link level (spec.hpp RegimeLevels): regime_cv is then the
    /// cv of a level at multiplier 1
    RegimeLevels levels{};
};

/// The base profile with `p` applied: each transient factor lognormal with the base's cv times
/// transient_scale, the regime lognormal with regime_cv and p's link-level multipliers, the
/// spatial spread normal with spatial_cv; slow nodes as in the base.
VariabilitySpec with_parameters(const VariabilitySpec& base, const StepFitParameters& p);

/// Quantiles and moments of a step-time distribution, absolute and relative to its median.
struct StepSummary {
    std::size_t steps = 0;  ///< 0 for the model
    double mean_s = 0, p50_s = 0, std_s = 0;
    double p95_over_p50 = 0, p99_over_p50 = 0;
    double cv = 0;  ///< std / mean
};

struct StepComparison {
    StepSummary measured;  ///< pooled over runs, each run's steps scaled to the pooled median
    StepSummary model;     ///< within one run: the persistent factors at 1
    double deterministic_s = 0;
    double model_marginal_p50_s = 0;  ///< over clusters (the persistent factors drawn)
    double ks_shape = 0;              ///< each run / its median against the model / its median
    double ks_absolute = 0;           ///< the steps as measured against the model over clusters
    /// Relative spread of the runs' medians (n - 1), and the model's over cluster strata.
    double run_median_cv = 0;
    double model_cluster_cv = 0;
    std::size_t runs = 0;
};

/// The measured steps against the model's distribution for `variability`.
StepComparison compare_steps(const StepModelInput& model, const VariabilitySpec& variability,
                             const std::vector<MeasuredSteps>& runs);

/// The KS distance of the runs' shapes to the model's (see the header comment).
double shape_ks(const StepModelInput& model, const VariabilitySpec& variability,
                const std::vector<MeasuredSteps>& runs);

enum class StepFitTarget { transient, regime, both };

struct StepFit {
    StepFitParameters parameters;
    double ks_shape = 1;
    /// (transient scale, regime cv, KS) at the points tried: the KS profile around the fit.
    std::vector<std::array<double, 3>> profile;
    bool spatial_fitted = false;  ///< false with fewer than 2 runs
};

/// What the steps' values let a fit pin down: constant steps pin no spread, and steps rounded to
/// a coarse timer resolution fit the rounding, not the run (10-ms rounding of the MLPerf runs,
/// whose spread is ~7 ms, doubled the fitted cv).
struct StepResolution {
    /// Why no spread can be fitted (constant steps, a resolution above half the spread, fewer
    /// than 10 distinct values in a run), empty when one can.
    std::string refusal;
    /// Weaker doubts (a resolution above a quarter of the spread).
    std::vector<std::string> warnings;
};

/// Per run: the resolution, as the smallest gap between its distinct step times, against the
/// steps' standard deviation. Rounding to h adds h^2 / 12 to the variance (Sheppard) but, for
/// a KS fit, turns the empirical CDF into a staircase of a few steps once h nears the spread.
StepResolution step_resolution(const std::vector<MeasuredSteps>& runs);

/// Whether a fit's KS profile is flat: over every point tried the KS changes by less than
/// `tolerance`, so the steps do not pin the parameters.
bool flat_objective(const StepFit& fit, double tolerance = 0.02);

/// Minimum-KS fit of the within-run parameters named by `target` (the others from `start`),
/// by a log-spaced grid refined by golden-section search; then, with 2 or more runs, the
/// spatial cv whose spread of cluster means equals the runs' median spread (less the part a
/// median of n steps owes to the steps' own spread). Throws ModelError
/// when a run has fewer than 2 steps.
StepFit fit_steps(const StepModelInput& model, const VariabilitySpec& base,
                  const std::vector<MeasuredSteps>& runs, StepFitTarget target,
                  const StepFitParameters& start);

/// The steps' lag-1 autocorrelation, pooled over runs: sum over runs and t of (x_t - m)(x_{t+1}
/// - m) over sum of (x_t - m)^2, x the log step times, m each run's mean, with steps more than
/// 5 median absolute deviations from their run's median left out (with their neighbours' pairs:
/// periodic events and hiccups are other terms). Clamped to [0, 0.99]: what
/// `[variability] step_autocorrelation` takes. 0 when no pair is left.
double lag1_autocorrelation(const std::vector<MeasuredSteps>& runs);

/// Runs of one configuration (a scale of a platform) with the model of that configuration.
struct StepGroup {
    std::string name;
    StepModelInput model;
    std::vector<MeasuredSteps> runs;
};

/// The within-run parameters that minimize the worst group's KS shape (fit_steps' search on
/// max over groups); the spatial cv is left at 0 (its runs' medians belong to one scale each).
/// Throws ModelError without groups or with a run of fewer than 2 steps.
StepFit fit_steps_groups(const std::vector<StepGroup>& groups, const VariabilitySpec& base,
                         StepFitTarget target, const StepFitParameters& start);

/// The NVLink level's regime multiplier (kNvlinkLevelGrid; the other levels held at start's)
/// fitted jointly with fit_steps_groups' parameters: the fit of least worst-group KS over the
/// grid (ties: the smaller multiplier). Only groups whose collective time splits differently
/// over the levels tell the multiplier from the regime cv (one group's KS depends on their
/// product alone): with fewer than 2 groups it is held at start's (`levels_fitted` false).
struct LevelFit {
    StepFit fit;
    bool levels_fitted = false;
    std::vector<std::pair<double, double>> grid;  ///< (multiplier, worst KS) tried
};
LevelFit fit_steps_groups_levels(const std::vector<StepGroup>& groups, const VariabilitySpec& base,
                                 StepFitTarget target, const StepFitParameters& start);

inline constexpr std::array<double, 8> kNvlinkLevelGrid{0, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1};

}  // namespace prism::fit
