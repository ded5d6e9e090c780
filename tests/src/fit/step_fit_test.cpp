#include "src/fit/step_fit.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "src/common/error.hpp"
#include "src/stochastic/detail/step_model.hpp"
#include "src/stochastic/step_distribution.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace prism::fit {
namespace {

using prism::testing::ProfileShape;

// A 4-stage pipeline of 4 replicas (tp 8, 8 microbatches): 128 GPUs, every class on the path.
StepModelInput small_model() {
    ProfileShape shape;
    shape.stages = 4;
    shape.microbatches = 8;
    shape.dp = 4;
    StepModelInput m;
    m.profile = prism::testing::make_profile(shape);
    m.point = prism::testing::design_point(shape);
    m.hardware = prism::testing::test_hardware();
    m.seed = 3;
    return m;
}

VariabilitySpec base_profile() {
    VariabilitySpec v = prism::testing::prism_like();
    v.persistent.spatial = DistributionSpec{};
    return v;
}

// `runs` runs of `steps` Monte Carlo steps of the truth (the reference evaluator, not the
// analytic one that the fit uses).
std::vector<MeasuredSteps> draw_runs(const StepModelInput& m, const VariabilitySpec& truth,
                                     int runs, int steps, std::uint64_t seed) {
    const std::vector<double> draws = stochastic::monte_carlo_samples(
        m.profile, m.point, m.hardware, m.cluster, truth, runs * steps, seed, 0);
    std::vector<MeasuredSteps> out(static_cast<std::size_t>(runs));
    for (int i = 0; i < runs * steps; ++i) {
        out[static_cast<std::size_t>(i / steps)].step_time_s.push_back(draws[std::size_t(i)]);
    }
    return out;
}

// 3 runs of 300 steps drawn by Monte Carlo at a known transient scale (x the PRISM-like class
// cvs) and regime cv, and each parameter fitted with the other at its true value, where it
// carries most of the step's variance (a parameter that adds a fifth of it is pinned down five
// times more loosely: see the header). The minimum-KS estimate of a spread from 900 draws has
// a standard error of ~3-4% (the MLE's 1 / sqrt(2n) = 2.4%, KS being less efficient); the
// analytic evaluator the fit uses matches Monte Carlo's std here to 0.5%. Over seeds 11-20 the
// ratios were 0.93-1.06 (regime) and 0.91-1.07 (transient). Tolerance 12%.
TEST(StepFit, RecoversKnownParametersFromMonteCarloSteps) {
    const StepModelInput m = small_model();
    const VariabilitySpec base = base_profile();
    StepFitParameters regime_truth;  // the regime: ~70% of the step variance
    regime_truth.transient_scale = 0.4;
    regime_truth.regime_cv = 0.03;
    StepFitParameters transient_truth;  // the transient noise: ~90%
    transient_truth.transient_scale = 0.4;
    transient_truth.regime_cv = 0.005;

    for (std::uint64_t seed : {11, 12}) {
        const std::vector<MeasuredSteps> regime_runs =
            draw_runs(m, with_parameters(base, regime_truth), 3, 300, seed);
        const std::vector<MeasuredSteps> transient_runs =
            draw_runs(m, with_parameters(base, transient_truth), 3, 300, seed + 100);

        const StepFit regime = fit_steps(m, base, regime_runs, StepFitTarget::regime, regime_truth);
        const StepFit transient =
            fit_steps(m, base, transient_runs, StepFitTarget::transient, transient_truth);

        EXPECT_NEAR(regime.parameters.regime_cv / regime_truth.regime_cv, 1.0, 0.12) << seed;
        EXPECT_NEAR(transient.parameters.transient_scale / transient_truth.transient_scale, 1.0,
                    0.12)
            << seed;
        EXPECT_LT(regime.ks_shape, 0.06) << seed;
        EXPECT_LT(transient.ks_shape, 0.06) << seed;
        // No persistent factor in the truth: the runs' medians differ by sampling only, which
        // the spatial fit must not turn into a large spread.
        EXPECT_LT(regime.parameters.spatial_cv, 0.002) << seed;
    }
}

// Issue 35, item 5: on the Eos-dfw 512 runs the joint fit reported KS 0.157 while the "all from
// the regime" end it printed reached 0.110: the alternating descent from the base profile's
// start stopped short. Steps from the regime end (a regime carrying nearly all of the spread,
// lognormal-skewed), fitted from a start at the other end: the reported KS is the least of every
// point the fit visited, of both ends of the ridge as `steps fit` prints them, and of the
// neighbours it prints around its optimum (each parameter x 0.5, 0.8, 1.25, 2).
TEST(StepFit, ReportedOptimumIsNeverWorseThanAPointItVisitsOrPrints) {
    const StepModelInput m = small_model();
    const VariabilitySpec base = base_profile();
    StepFitParameters truth;
    truth.transient_scale = 0.02;
    truth.regime_cv = 0.05;
    const std::vector<MeasuredSteps> runs = draw_runs(m, with_parameters(base, truth), 3, 200, 31);
    StepFitParameters start;
    start.transient_scale = 1.0;
    start.regime_cv = 1e-4;

    const StepFit fit = fit_steps(m, base, runs, StepFitTarget::both, start);

    for (const auto& visited : fit.profile) EXPECT_LE(fit.ks_shape, visited[2]);
    for (const bool transient_end : {true, false}) {
        StepFitParameters end_start = fit.parameters;
        (transient_end ? end_start.regime_cv : end_start.transient_scale) = 0;
        const StepFit end =
            fit_steps(m, base, runs,
                      transient_end ? StepFitTarget::transient : StepFitTarget::regime, end_start);
        EXPECT_LE(fit.ks_shape, end.ks_shape) << transient_end;
    }
    for (const double k : {0.5, 0.8, 1.25, 2.0}) {
        StepFitParameters s = fit.parameters, r = fit.parameters;
        s.transient_scale *= k;
        r.regime_cv *= k;
        EXPECT_LE(fit.ks_shape, shape_ks(m, with_parameters(base, s), runs)) << k;
        EXPECT_LE(fit.ks_shape, shape_ks(m, with_parameters(base, r), runs)) << k;
    }
    EXPECT_DOUBLE_EQ(fit.ks_shape, shape_ks(m, with_parameters(base, fit.parameters), runs));
}

// Issue 35, item 5: groups of runs at two scales (dp 4 and dp 16 of the same 4-stage pipeline)
// drawn by Monte Carlo from one regime cv: the group fit minimizes the worst group's KS, returns
// the regime within 12% (as the single-group recovery above) and reports that worst KS.
TEST(StepFit, GroupsAtTwoScalesRecoverOneRegimeAndReportTheWorstGroup) {
    const StepModelInput small = small_model();
    StepModelInput large = small;
    ProfileShape shape;
    shape.stages = 4;
    shape.microbatches = 8;
    shape.dp = 16;
    large.profile = prism::testing::make_profile(shape);
    large.point = prism::testing::design_point(shape);
    const VariabilitySpec base = base_profile();
    StepFitParameters truth;
    truth.transient_scale = 0.4;
    truth.regime_cv = 0.03;
    const VariabilitySpec v = with_parameters(base, truth);
    const std::vector<StepGroup> groups{{"dp 4", small, draw_runs(small, v, 3, 300, 51)},
                                        {"dp 16", large, draw_runs(large, v, 3, 300, 52)}};

    const StepFit fit = fit_steps_groups(groups, base, StepFitTarget::regime, truth);

    EXPECT_NEAR(fit.parameters.regime_cv / truth.regime_cv, 1.0, 0.12);
    const VariabilitySpec fitted = with_parameters(base, fit.parameters);
    const double ks_small = shape_ks(small, fitted, groups[0].runs);
    const double ks_large = shape_ks(large, fitted, groups[1].runs);
    EXPECT_DOUBLE_EQ(fit.ks_shape, std::max(ks_small, ks_large));
    EXPECT_LT(fit.ks_shape, 0.06);
}

// Issue 35, item 3: runs at two scales drawn by Monte Carlo from one regime per link level
// (the NVLink level at 0.2 of the fabric's cv 0.05): dp 4 with its DP sync under one leaf
// switch, dp 16 with a DP sync 4x longer across pods, so the two split their collective time
// differently over the levels (nvlink 58% / 42% fabric against 22% / 78%). The level fit
// returns the NVLink multiplier on its grid within one step of 0.2 (0.1-0.35) and each group's
// job regime cv (what one group's KS sees) within 15% (the single-parameter recovery's 12%,
// widened for the joint grid); a single group holds the multiplier (not identifiable).
TEST(StepFit, RegimeLevelsAtTwoScalesAreRecoveredFromMonteCarloSteps) {
    StepModelInput small = small_model();
    StepModelInput large = small;
    ProfileShape shape;
    shape.stages = 4;
    shape.microbatches = 8;
    shape.dp = 16;
    large.profile = prism::testing::make_profile(shape);
    large.profile.dp_sync.front().ops.front().link = LinkLevel::pod;
    large.profile.dp_sync.front().ops.front().time_s *= 4;
    large.point = prism::testing::design_point(shape);
    const VariabilitySpec base = base_profile();
    StepFitParameters truth;
    truth.transient_scale = 0.2;
    truth.regime_cv = 0.05;
    truth.levels.nvlink = 0.2;
    const VariabilitySpec v = with_parameters(base, truth);
    const std::vector<StepGroup> groups{{"dp 4", small, draw_runs(small, v, 3, 400, 61)},
                                        {"dp 16", large, draw_runs(large, v, 3, 400, 62)}};
    StepFitParameters start = truth;
    start.levels.nvlink = 1;
    start.regime_cv = 0.02;

    const LevelFit fit = fit_steps_groups_levels(groups, base, StepFitTarget::regime, start);

    ASSERT_TRUE(fit.levels_fitted);
    EXPECT_EQ(fit.grid.size(), kNvlinkLevelGrid.size());
    EXPECT_GE(fit.fit.parameters.levels.nvlink, 0.1);
    EXPECT_LE(fit.fit.parameters.levels.nvlink, 0.35);
    for (const StepGroup& g : groups) {
        const auto seconds = collective_seconds_by_level(g.model.profile);
        const double fitted =
            fit.fit.parameters.regime_cv *
            stochastic::detail::level_amplitude(fit.fit.parameters.levels, seconds);
        const double true_cv =
            truth.regime_cv * stochastic::detail::level_amplitude(truth.levels, seconds);
        EXPECT_NEAR(fitted / true_cv, 1.0, 0.15) << g.name;
    }
    const LevelFit one = fit_steps_groups_levels({groups[0]}, base, StepFitTarget::regime, start);
    EXPECT_FALSE(one.levels_fitted);
    EXPECT_EQ(one.fit.parameters.levels.nvlink, 1.0);
}

// The truth of the comparisons below: transient scale 0.4, regime cv 0.03.
VariabilitySpec comparison_truth() {
    StepFitParameters truth;
    truth.transient_scale = 0.4;
    truth.regime_cv = 0.03;
    return with_parameters(base_profile(), truth);
}

// 2 runs of 300 steps of the truth, 10% slower than the model (a deterministic model 10% too
// fast).
std::vector<MeasuredSteps> slower_runs(const StepModelInput& m, const VariabilitySpec& v) {
    std::vector<MeasuredSteps> runs = draw_runs(m, v, 2, 300, 21);
    for (MeasuredSteps& r : runs) {
        for (double& t : r.step_time_s) t *= 1.10;
    }
    return runs;
}

TEST(StepFit, TheShapeIgnoresTheMedianButTheAbsoluteKsDoesNot) {
    const StepModelInput m = small_model();
    const VariabilitySpec v = comparison_truth();
    const std::vector<MeasuredSteps> runs = slower_runs(m, v);

    const StepComparison c = compare_steps(m, v, runs);

    EXPECT_LT(c.ks_shape, 0.06);
    EXPECT_GT(c.ks_absolute, 0.9);
    EXPECT_NEAR(c.measured.p50_s / c.model.p50_s, 1.10, 0.01);
}

// steps compare --monte-carlo: every model figure from Monte Carlo steps (the within-run ones
// from the persistent factors at 1, the marginal median over a cluster drawn per step), which
// on this small model agree with the analytic evaluator's; the same verdicts as above.
TEST(StepFit, WithMonteCarloSamplesTheComparisonsModelIsMonteCarlos) {
    StepModelInput m = small_model();
    const VariabilitySpec v = comparison_truth();
    const std::vector<MeasuredSteps> runs = slower_runs(m, v);
    const StepComparison analytic = compare_steps(m, v, runs);
    m.monte_carlo_samples = 4000;
    const StepComparison mc = compare_steps(m, v, runs);

    VariabilitySpec inside = v;
    inside.persistent.spatial = DistributionSpec{};
    inside.persistent.slow_probability = 0;
    std::vector<double> draws = stochastic::monte_carlo_samples(m.profile, m.point, m.hardware,
                                                                m.cluster, inside, 4000, m.seed, 0);
    std::sort(draws.begin(), draws.end());
    EXPECT_DOUBLE_EQ(mc.model.p50_s, 0.5 * (draws[1999] + draws[2000]));
    EXPECT_EQ(mc.model.steps, 0u);
    EXPECT_NEAR(mc.model.p50_s / analytic.model.p50_s, 1.0, 0.005);
    EXPECT_NEAR(mc.model.cv / analytic.model.cv, 1.0, 0.08);
    EXPECT_NEAR(mc.model.p99_over_p50 / analytic.model.p99_over_p50, 1.0, 0.01);
    EXPECT_NEAR(mc.model_marginal_p50_s / analytic.model_marginal_p50_s, 1.0, 0.005);
    EXPECT_DOUBLE_EQ(mc.model_cluster_cv, analytic.model_cluster_cv);
    EXPECT_LT(mc.ks_shape, 0.06);
    EXPECT_GT(mc.ks_absolute, 0.9);
    EXPECT_NEAR(mc.measured.p50_s / mc.model.p50_s, 1.10, 0.01);
}

TEST(StepFit, NeedsTwoStepsPerRun) {
    std::vector<MeasuredSteps> runs{{"run.csv", {1.0}}};

    EXPECT_THROW(
        {
            try {
                shape_ks(small_model(), base_profile(), runs);
            } catch (const ModelError& e) {
                EXPECT_STREQ(e.what(), "step fit: run.csv: 1 steps; need at least 2");
                throw;
            }
        },
        ModelError);
}

// Issue 33, item 1: a run whose median is not a finite positive time (an inf step from a CSV, a
// trace's steps of dur 0) crashed compare_steps and fit_steps (exit 139). The library refuses
// such runs itself, naming the run and the step, whatever reader made them.
TEST(StepFit, RefusesStepsThatAreNotFinitePositiveTimes) {
    const StepModelInput m = small_model();
    const VariabilitySpec v = base_profile();
    std::vector<MeasuredSteps> inf_run(1), zero_run(1);
    inf_run[0].name = "inf.csv";
    inf_run[0].step_time_s = {1.0, std::numeric_limits<double>::infinity(), 1.1};
    zero_run[0].name = "zero.json";
    zero_run[0].step_time_s = {0.0, 0.0, 0.0};

    EXPECT_THROW(
        {
            try {
                compare_steps(m, v, inf_run);
            } catch (const ConfigError& e) {
                EXPECT_STREQ(e.what(),
                             "step fit: inf.csv: step 2 of 3: inf s is not a finite positive time");
                throw;
            }
        },
        ConfigError);
    EXPECT_THROW(fit_steps(m, v, zero_run, StepFitTarget::transient, StepFitParameters{}),
                 ConfigError);
}

// Issue 33, item 9: constant or coarsely rounded steps identify no spread; the resolution check
// says so. The MLPerf-like spread here: normal steps of sd 7 ms around 18.37 s (the eos runs').
TEST(StepFit, ResolutionRefusesConstantAndCoarselyRoundedSteps) {
    std::vector<MeasuredSteps> constant(1), rounded(1), fine(1), rough(1);
    constant[0].name = "constant";
    constant[0].step_time_s.assign(50, 18.37);
    // a deterministic normal sample: quantiles of N(18.37, 0.007^2) at (k + 0.5) / 200
    for (int k = 0; k < 200; ++k) {
        const double p = (k + 0.5) / 200.0;
        // Acklam-free inverse: the probit by bisection on erfc
        double lo = -10, hi = 10;
        for (int i = 0; i < 100; ++i) {
            const double mid = 0.5 * (lo + hi);
            (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
        }
        const double t = 18.37 + 0.007 * lo;
        fine[0].step_time_s.push_back(t);
        rounded[0].step_time_s.push_back(std::round(t * 100) / 100);  // 10 ms: 1.4 sd
        rough[0].step_time_s.push_back(std::round(t * 500) / 500);    // 2 ms: 0.29 sd
    }
    rounded[0].name = "rounded";
    fine[0].name = "fine";
    rough[0].name = "rough";

    EXPECT_EQ(step_resolution(constant).refusal,
              "constant: all 50 steps take 18.37 s: constant steps pin no spread (a timer this "
              "coarse hides it)");
    EXPECT_EQ(step_resolution(rounded).refusal.rfind(
                  "rounded: the step times come in steps of 0.01 s", 0),
              0u)
        << step_resolution(rounded).refusal;
    EXPECT_EQ(step_resolution(fine).refusal, "");
    EXPECT_TRUE(step_resolution(fine).warnings.empty());
    EXPECT_EQ(step_resolution(rough).refusal, "");
    ASSERT_EQ(step_resolution(rough).warnings.size(), 1u);
    EXPECT_EQ(step_resolution(rough).warnings[0].rfind(
                  "rough: the step times come in steps of 0.002 s", 0),
              0u)
        << step_resolution(rough).warnings[0];
}

// Issue 33, item 9: constant steps gave KS 0.5 at every parameter value and an arbitrary
// profile without a word; a flat KS profile is reported (`steps fit` warns).
TEST(StepFit, FlatObjectiveIsTheKsProfileThatDoesNotMove) {
    StepFit flat, pinned;
    flat.profile = {{0.1, 0.01, 0.5}, {1.0, 0.01, 0.5}, {10.0, 0.01, 0.505}};
    pinned.profile = {{0.1, 0.01, 0.30}, {1.0, 0.01, 0.05}, {10.0, 0.01, 0.40}};

    EXPECT_TRUE(flat_objective(flat));
    EXPECT_FALSE(flat_objective(pinned));
    EXPECT_FALSE(flat_objective(StepFit{}));
}

}  // namespace
}  // namespace prism::fit

namespace prism::fit {
namespace {

TEST(StepAutocorrelation, RecoversTheLagOneCoefficientOfSimulatedRuns) {
    // truth: three runs of 300 steps whose log step times are an AR(1) of known rho around
    // log 10 s (cv 0.5%), with two slow steps per run that the estimator must leave out
    std::mt19937_64 rng(3);
    std::normal_distribution<double> z(0.0, 1.0);
    for (const double rho : {0.0, 0.3, 0.6}) {
        std::vector<MeasuredSteps> runs;
        for (int r = 0; r < 3; ++r) {
            MeasuredSteps run;
            double x = z(rng);
            for (int t = 0; t < 300; ++t) {
                if (t > 0) x = rho * x + std::sqrt(1 - rho * rho) * z(rng);
                run.step_time_s.push_back(10.0 * std::exp(0.005 * x));
            }
            run.step_time_s[50] *= 1.3;  // a periodic event, a hiccup
            run.step_time_s[200] *= 2.0;
            runs.push_back(run);
        }
        // the estimator's sd is about (1 - rho^2) / sqrt(900): within 0.1 at 3 sd
        EXPECT_NEAR(lag1_autocorrelation(runs), rho, 0.1) << rho;
    }
    EXPECT_EQ(lag1_autocorrelation({}), 0.0);
}

}  // namespace
}  // namespace prism::fit
