#include "explorer/steps_command.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "explorer/cli.hpp"
#include "explorer/output_check.hpp"
#include "explorer/table.hpp"
#include "io/experiment_loader.hpp"
#include "io/runs_manifest.hpp"
#include "io/step_csv.hpp"
#include "io/trace_reader.hpp"
#include "io/units.hpp"
#include "io/variability_profile.hpp"
#include "io/work_limits.hpp"
#include "src/common/error.hpp"
#include "src/fit/detail/median.hpp"
#include "src/fit/hiccup_fit.hpp"
#include "src/fit/periodic_fit.hpp"
#include "src/fit/stall_fit.hpp"
#include "src/fit/step_fit.hpp"
#include "src/model/design_space.hpp"
#include "src/model/deterministic.hpp"
#include "src/stochastic/detail/step_model.hpp"
#include "src/stochastic/step_distribution.hpp"

namespace prism::explorer {

namespace {

namespace fs = std::filesystem;

std::string stem(const std::string& path) { return fs::path(path).filename().string(); }

bool is_trace(const std::string& path) {
    return path.ends_with(".json") || path.ends_with(".json.gz");
}

// The runs' selected steps; prints what was dropped.
std::vector<fit::MeasuredSteps> load_runs(const StepsCommand& cmd, std::ostream& out) {
    io::StepSelection selection;
    selection.warmup_steps = cmd.warmup_steps;
    selection.drop_first_after_eval = !cmd.keep_first_after_eval;
    std::vector<fit::MeasuredSteps> runs;
    for (const std::string& path : cmd.runs) {
        fit::MeasuredSteps r;
        r.name = stem(path);
        if (is_trace(path)) {
            for (const io::TraceStep& s : io::read_kineto_trace(path).steps) {
                r.step_time_s.push_back(s.duration_s);
            }
            out << fmt::format("{}: {} profiler steps (all kept)\n", r.name, r.step_time_s.size());
        } else {
            const io::StepRun run = io::read_step_csv(path, selection);
            r.step_time_s = run.step_time_s;
            r.step_index = run.step_index;
            out << fmt::format(
                "{}: {} of {} steps (dropped {} warm-up, {} first after an evaluation)\n", r.name,
                run.step_time_s.size(), run.rows, run.dropped_warmup, run.dropped_after_eval);
        }
        runs.push_back(std::move(r));
    }
    return runs;
}

// The experiment's first point (its [defaults] when it has no [space]) as the model sees it.
fit::StepModelInput model_input(const Experiment& e, std::ostream& out) {
    const DesignPoint p = decode_point(e, std::vector<std::size_t>(e.space.dimensions.size(), 0));
    if (auto why = filter_reason(e, p)) {
        throw ConfigError(
            fmt::format("{}: the point {} is filtered: {}", e.file, describe_point(e, p), *why));
    }
    const DeterministicResult det = evaluate_deterministic(e, p);
    std::uint64_t points = 1;
    for (const auto& d : e.space.dimensions) points *= d.values.size();
    out << fmt::format("model: {} ({} GPUs), deterministic step {:.4f} s\n", e.name, p.gpus(),
                       det.step_time_s);
    if (points > 1) {
        // the runs are compared with one point: say which, so that a wrong one is seen
        out << fmt::format("note: {} has {} points; the runs are taken to be its first: {}\n",
                           e.file, points, describe_point(e, p));
    }
    if (!det.feasible) {
        out << fmt::format(
            "note: the model finds the point infeasible ({}); the run did fit, so "
            "it is evaluated anyway\n",
            det.reason);
    }
    fit::StepModelInput m;
    m.profile = det.profile;
    m.point = p;
    m.hardware = e.hardware.at(static_cast<std::size_t>(p.hardware));
    m.cluster = e.cluster;
    m.seed = e.seed;
    return m;
}

void print_comparison(const fit::StepComparison& c, std::ostream& out) {
    const auto row = [](const char* what, const fit::StepSummary& s, double p50) {
        return std::vector<Cell>{
            what,          s.steps > 0 ? Cell(static_cast<std::uint64_t>(s.steps)) : Cell(),
            p50,           s.mean_s,
            s.cv,          s.p95_over_p50,
            s.p99_over_p50};
    };
    out << format_table({{"", ""},
                         {"steps", ""},
                         {"p50", "s", Align::automatic, 6},
                         {"mean", "s", Align::automatic, 6},
                         {"cv", "", Align::automatic, 3},
                         {"p95/p50", "", Align::automatic, 6},
                         {"p99/p50", "", Align::automatic, 6}},
                        {row("measured", c.measured, c.measured.p50_s),
                         row("model (one run)", c.model, c.model.p50_s)},
                        TableOptions{"  ", true, true, ""})
        << fmt::format(
               "deterministic step {:.4f} s: {:+.2f}% against the measured median; model median "
               "over clusters {:.4f} s ({:+.2f}%)\n",
               c.deterministic_s, 100 * (c.deterministic_s / c.measured.p50_s - 1),
               c.model_marginal_p50_s, 100 * (c.model_marginal_p50_s / c.measured.p50_s - 1))
        << fmt::format(
               "KS shape (each run and the model scaled by their medians) {:.3f}; KS of "
               "the steps as measured {:.3f}\n",
               c.ks_shape, c.ks_absolute)
        << fmt::format("spread of the run medians {:.3g} ({} runs); model, over clusters {:.3g}\n",
                       c.run_median_cv, c.runs, c.model_cluster_cv);
}

/// --monte-carlo within the samples limit of an experiment (io/work_limits.hpp).
void check_samples(const StepsCommand& cmd) {
    if (cmd.monte_carlo_samples < 0 || cmd.monte_carlo_samples > io::kMaxSamples) {
        throw ConfigError(fmt::format(
            "steps: --monte-carlo: {} is not a sample count from 1 to {} (0 or none: the "
            "analytic evaluator)",
            cmd.monte_carlo_samples, io::kMaxSamples));
    }
}

/// What the steps' resolution allows (src/fit/step_fit.hpp step_resolution): warnings on
/// stderr; for a fit, a refusal is bad input.
void check_resolution(const std::vector<fit::MeasuredSteps>& runs, bool fitting) {
    const fit::StepResolution r = fit::step_resolution(runs);
    for (const std::string& w : r.warnings) std::cerr << "prism: warning: " << w << "\n";
    if (r.refusal.empty()) return;
    if (fitting) throw ConfigError("steps fit: " + r.refusal);
    std::cerr << "prism: warning: " << r.refusal << "\n";
}

VariabilitySpec experiment_or_option(const StepsCommand& cmd, const Experiment& e) {
    return cmd.variability.empty() ? e.variability : io::load_variability(cmd.variability);
}

}  // namespace

std::string stalls_line(const StepProfile& profile, const DesignPoint& point,
                        const HardwareSpec& hardware, const VariabilitySpec& variability) {
    const stochastic::StallSummary st =
        stochastic::stall_summary(profile, point, hardware, variability);
    const auto plural = [](double n) { return n == 1 ? "" : "s"; };
    return fmt::format(
        "stalls ({:.3g} of a node's time, {:.4g} ms each): {:.0f} synchronization{} a step among "
        "{:.0f} member{} of {:.0f} node{}: +{:.4g} ms mean (sd {:.4g} ms; {:.1f}% of the {:.5g} s "
        "step), {:.1f}% of steps without one",
        variability.stalls.fraction, variability.stalls.duration_s * 1e3, st.syncs,
        plural(st.syncs), st.members, plural(st.members), st.nodes_per_member,
        plural(st.nodes_per_member), st.mean_s * 1e3, st.sd_s * 1e3, 100 * st.mean_s / st.step_s,
        st.step_s, 100 * st.p_none);
}

std::vector<std::string> hiccup_lines(const DesignPoint& point, const HardwareSpec& hardware,
                                      const VariabilitySpec& variability) {
    const stochastic::HiccupSummary h = stochastic::hiccup_summary(point, hardware, variability);
    std::vector<std::string> lines;
    if (variability.hiccup.probability > 0) {
        lines.push_back(fmt::format(
            "hiccups ({:.4g} per node and step, delay median {:.4g} ms): {:.0f} node{}: {:.3g}% "
            "of steps hit, +{:.4g} ms mean",
            variability.hiccup.probability, variability.hiccup.delay_median_s * 1e3, h.nodes,
            h.nodes == 1 ? "" : "s", 100 * h.p_hit, h.hiccup_mean_s * 1e3));
    }
    if (!variability.periodic.empty()) {
        std::string events;
        for (const PeriodicEvent& e : variability.periodic) {
            events += fmt::format("{}{} every {} steps +{:.4g} s", events.empty() ? "" : ", ",
                                  e.name, e.every, e.duration_s);
        }
        lines.push_back(
            fmt::format("periodic events ({}): +{:.4g} ms mean", events, h.periodic_mean_s * 1e3));
    }
    return lines;
}

namespace {

int compare(const StepsCommand& cmd) {
    check_samples(cmd);
    const Experiment e = io::load_experiment(cmd.experiment);
    const std::vector<fit::MeasuredSteps> runs = load_runs(cmd, std::cout);
    check_resolution(runs, false);
    fit::StepModelInput m = model_input(e, std::cout);
    m.monte_carlo_samples = cmd.monte_carlo_samples;
    const VariabilitySpec v = experiment_or_option(cmd, e);
    std::cout << fmt::format("variability: {}\n\n",
                             cmd.variability.empty() ? e.variability.source : cmd.variability);
    for (const std::string& line : hiccup_lines(m.point, m.hardware, v)) std::cout << line << "\n";
    if (v.stalls.active()) std::cout << stalls_line(m.profile, m.point, m.hardware, v) << "\n";
    if (v.stalls.active() || v.hiccup.probability > 0 || !v.periodic.empty()) std::cout << "\n";
    print_comparison(fit::compare_steps(m, v, runs), std::cout);
    return kExitOk;
}

fit::StepFitTarget parse_target(const std::string& t) {
    if (t == "transient") return fit::StepFitTarget::transient;
    if (t == "regime") return fit::StepFitTarget::regime;
    if (t == "both") return fit::StepFitTarget::both;
    throw ConfigError(
        fmt::format("steps fit: --fit: unknown value '{}' (transient, regime, both)", t));
}

// KS at the fit and around it: how sharply the steps pin each parameter.
void print_identifiability(const fit::StepModelInput& m, const VariabilitySpec& base,
                           const std::vector<fit::MeasuredSteps>& runs, const fit::StepFit& f,
                           std::ostream& out) {
    std::vector<std::vector<Cell>> rows;
    for (double k : {0.5, 0.8, 1.0, 1.25, 2.0}) {
        fit::StepFitParameters s = f.parameters, r = f.parameters;
        s.transient_scale *= k;
        r.regime_cv *= k;
        s.spatial_cv = r.spatial_cv = 0;
        rows.push_back({k, fit::shape_ks(m, fit::with_parameters(base, s), runs),
                        fit::shape_ks(m, fit::with_parameters(base, r), runs)});
    }
    out << "\nKS shape around the fit (one parameter times k, the other at its fit):\n"
        << format_table({{"k", ""}, {"transient scale x k", ""}, {"regime cv x k", ""}}, rows);
    // The ridge's ends: all of the spread from one source.
    for (const auto target : {fit::StepFitTarget::transient, fit::StepFitTarget::regime}) {
        fit::StepFitParameters start = f.parameters;
        (target == fit::StepFitTarget::transient ? start.regime_cv : start.transient_scale) = 0;
        const fit::StepFit end = fit::fit_steps(m, base, runs, target, start);
        out << fmt::format("all from the {}: transient scale {:.4g}, regime cv {:.4g}: KS {:.3f}\n",
                           target == fit::StepFitTarget::transient ? "transient noise" : "regime",
                           end.parameters.transient_scale, end.parameters.regime_cv, end.ks_shape);
    }
}

io::VariabilityProfile fitted_profile(const StepsCommand& cmd, const Experiment& e,
                                      const VariabilitySpec& base, const fit::StepFit& f,
                                      const std::vector<fit::MeasuredSteps>& runs) {
    io::VariabilityProfile p;
    p.spec = fit::with_parameters(base, f.parameters);
    p.spec.persistent.slow_probability = 0;
    p.name = cmd.name.empty() ? fs::path(cmd.output).stem().string() : cmd.name;
    std::string files;
    std::size_t steps = 0;
    for (const fit::MeasuredSteps& r : runs) {
        files += (files.empty() ? "" : ", ") + r.name;
        steps += r.step_time_s.size();
    }
    p.source = fmt::format(
        "prism steps fit of {} steps of {} run(s) of {} ({}); class ratios "
        "from {}",
        steps, runs.size(), e.name, files, cmd.base);
    p.description = "variability fitted from measured step times";
    p.header = {"Variability profile written by `prism steps fit` (src/fit/step_fit.hpp).",
                fmt::format("Runs: {}.", files),
                fmt::format("Configuration: {} ({}).", cmd.experiment, e.name),
                "Within-run shape fitted by minimum KS of the steps scaled by their run's median "
                "against",
                "the model's distribution (persistent factors at 1) scaled by its median."};
    p.header.insert(p.header.end(), cmd.notes.begin(), cmd.notes.end());
    for (int k = 0; k < kKernelClassCount; ++k) {
        const auto c = static_cast<std::size_t>(k);
        p.class_notes[c] = {fmt::format(
            "{} cv {:.4g} x fitted transient scale {:.4g} (KS shape {:.3f}); the class ratio is "
            "not identifiable from step times",
            cmd.base, base.transient[c].cv, f.parameters.transient_scale, f.ks_shape)};
    }
    p.regime_notes = {fmt::format("fitted with the transient scale (target '{}'); KS shape {:.3f}",
                                  cmd.target, f.ks_shape)};
    p.spatial_notes = {
        f.spatial_fitted
            ? fmt::format("from the spread of the {} runs' medians ({} degrees of freedom: a "
                          "factor of ~4 either way at 90%)",
                          runs.size(), runs.size() - 1)
            : "not identifiable from one run: 0"};
    const DesignPoint point =
        decode_point(e, std::vector<std::size_t>(e.space.dimensions.size(), 0));
    const double node_runs =
        static_cast<double>(runs.size()) *
        std::ceil(static_cast<double>(point.gpus()) /
                  e.hardware.at(static_cast<std::size_t>(point.hardware)).gpus_per_node);
    p.slow_notes = {fmt::format(
        "no run's median jumps by a slow factor: 0 slow nodes in {:.0f} node-runs, so below "
        "{:.2g} at 95% (rule of three); set to 0",
        node_runs, 3 / node_runs)};
    return p;
}

// What the hiccup fit found (src/fit/hiccup_fit.hpp), one line; `nodes` > 0 adds the share of
// steps hit at this scale.
std::string hiccup_line(const fit::HiccupFit& h, double nodes) {
    if (h.hits == 0) {
        return fmt::format(
            "hiccups: no step above the threshold in {} steps: probability 0 (below {:.2g} per "
            "node and step at 95%)",
            h.steps, h.probability_upper_95);
    }
    std::string law;
    if (h.hiccup.family == HiccupFamily::pareto) {
        law = fmt::format(
            "Pareto tail alpha {:.3g} (log-likelihood {:.2f} against the lognormal's "
            "{:.2f})",
            h.hiccup.delay_tail, h.pareto_log_likelihood, h.lognormal_log_likelihood);
    } else if (!h.sigma_fitted) {
        law = fmt::format("lognormal sigma {:.3g} (held: fewer than 5 hits; family not chosen)",
                          h.hiccup.delay_sigma);
    } else if (std::isnan(h.pareto_log_likelihood)) {
        law = fmt::format("lognormal sigma {:.3g}", h.hiccup.delay_sigma);
    } else {
        law = fmt::format(
            "lognormal sigma {:.3g} (log-likelihood {:.2f} against a Pareto tail's "
            "{:.2f})",
            h.hiccup.delay_sigma, h.lognormal_log_likelihood, h.pareto_log_likelihood);
    }
    std::string line = fmt::format(
        "hiccups: {} of {} steps above the threshold: probability {:.4g} per node and step, "
        "delay median {:.4g} s, {} (maximum likelihood, censored at 6 robust sd)",
        h.hits, h.steps, h.hiccup.probability, h.hiccup.delay_median_s, law);
    if (nodes > 0) {
        line += fmt::format("; {:.3g}% of steps hit on {:.0f} nodes",
                            100 * -std::expm1(nodes * std::log1p(-h.hiccup.probability)), nodes);
    }
    return line;
}

// One scale's runs, ready for the group fit: the model, the runs without their periodic steps,
// the nodes (hiccups are per node).
struct LoadedGroup {
    std::string label;
    fit::StepGroup group;
    std::vector<fit::MeasuredSteps> all_runs;
    double nodes = 1;
};

// The hiccups fitted on `groups` less the one at `skip` (none when skip >= size).
HiccupSpec group_hiccups(const std::vector<LoadedGroup>& groups, std::size_t skip,
                         fit::HiccupFit* out) {
    std::vector<fit::HiccupGroup> h;
    for (std::size_t k = 0; k < groups.size(); ++k) {
        if (k != skip) h.push_back({groups[k].group.runs, groups[k].nodes});
    }
    const fit::HiccupFit f = fit::fit_hiccups(h);
    if (out != nullptr) *out = f;
    return f.hiccup;
}

/// The link levels a fit starts from (and holds where it cannot fit them): the base profile's;
/// with --regime-levels and a base without levels, the regime on the fabric alone (NVLink 0).
RegimeLevels level_start(const StepsCommand& cmd, const VariabilitySpec& base) {
    RegimeLevels levels = base.regime_levels;
    if (cmd.regime_levels && !levels.active()) levels.nvlink = 0;
    return levels;
}

/// "0.81 / 0.05 / 0.14 / 0": each level's share of the collective time (local with nvlink).
std::string level_shares(const StepProfile& profile) {
    const auto s = collective_seconds_by_level(profile);
    double total = 0;
    for (const double x : s) total += x;
    if (!(total > 0)) return "(none)";
    return fmt::format("{:.3g} / {:.3g} / {:.3g} / {:.3g}", (s[0] + s[1]) / total, s[2] / total,
                       s[3] / total, s[4] / total);
}

/// The level fit's lines for the output and the profile.
std::vector<std::string> level_lines(const fit::LevelFit& lf) {
    const RegimeLevels& l = lf.fit.parameters.levels;
    if (!lf.levels_fitted) {
        return {
            fmt::format("regime levels held (one group: its KS depends on the regime cv times "
                        "the levels' mix alone): nvlink {:.3g}, nic {:.3g}, rack {:.3g}, pod "
                        "{:.3g}",
                        l.nvlink, l.nic, l.rack, l.pod)};
    }
    std::string tried;
    for (const auto& [f, ks] : lf.grid) {
        tried += fmt::format("{}{:.3g}: {:.3f}", tried.empty() ? "" : ", ", f, ks);
    }
    return {
        fmt::format("regime levels: nvlink multiplier {:.3g} fitted across the groups (worst "
                    "KS per multiplier: {}); nic {:.3g}, rack {:.3g}, pod {:.3g} held",
                    l.nvlink, tried, l.nic, l.rack, l.pod)};
}

/// --stalls' duration (s), 0 when not given. Throws ConfigError naming the option.
double stall_duration(const StepsCommand& cmd) {
    if (cmd.stalls.empty()) return 0;
    double d = 0;
    try {
        d = io::parse_quantity(cmd.stalls, io::Quantity::time);
    } catch (const ConfigError& e) {
        throw ConfigError(fmt::format("steps fit: --stalls '{}': {}", cmd.stalls, e.what()));
    }
    if (!(d > 0)) {
        throw ConfigError(fmt::format(
            "steps fit: --stalls '{}': one stall's duration must be positive (e.g. \"20 ms\")",
            cmd.stalls));
    }
    return d;
}

/// The groups' runs and models (each named by its label).
std::vector<fit::StepGroup> step_groups(const std::vector<LoadedGroup>& groups) {
    std::vector<fit::StepGroup> g;
    for (const LoadedGroup& lg : groups) g.push_back(lg.group);
    return g;
}

/// The stalls of `duration_s` fitted to the groups' pooled medians with the fitted within-run
/// profile `spec` (src/fit/stall_fit.hpp).
fit::StallFit fit_group_stalls(const std::vector<LoadedGroup>& groups, const VariabilitySpec& spec,
                               double duration_s) {
    return fit::fit_stalls(fit::stall_groups(step_groups(groups)), spec, duration_s);
}

/// What the stall fit prints and writes above its keys.
std::vector<std::string> stall_lines(const std::vector<LoadedGroup>& groups,
                                     const fit::StallFit& sf, const std::string& runs_from) {
    std::vector<std::string> lines;
    const double f = sf.stalls.fraction;
    lines.push_back(fmt::format(
        "stalls of {:.4g} ms (given): stalled fraction {:.4g} per node{} (prism steps fit "
        "--runs-from {} --stalls), from the median step's growth over {} groups beyond the "
        "model's, one level {:.4g} common to them",
        sf.stalls.duration_s * 1e3, f,
        f > 0 ? fmt::format(", a stall every {:.4g} s of a node's time", sf.stalls.duration_s / f)
              : "",
        runs_from, groups.size(), sf.level));
    if (!(f > 0)) {
        lines.push_back(
            "  the measured medians grow no faster than the model's: no stalls (fraction 0)");
    }
    if (sf.at_upper_bound) {
        lines.push_back(fmt::format(
            "  the fraction ends at its bound {}: the growth is more than these stalls give; "
            "try a longer duration",
            fit::kMaxStallFraction));
    }
    for (std::size_t k = 0; k < groups.size(); ++k) {
        lines.push_back(fmt::format(
            "  {}: {:.0f} nodes, measured median {:.5g} s; model {:.5g} s without stalls "
            "({:+.2f}%), {:.5g} s with them ({:+.2f}%)",
            groups[k].label, groups[k].nodes, sf.measured_s[k], sf.model_without_s[k],
            100 * (sf.measured_s[k] / sf.model_without_s[k] - 1), sf.model_with_s[k],
            100 * (sf.measured_s[k] / sf.model_with_s[k] - 1)));
    }
    lines.push_back(fmt::format(
        "  log(measured / model median) about its mean: rms {:.3g} without stalls, {:.3g} with "
        "them",
        sf.rms_without, sf.rms_with));
    return lines;
}

/// The stall fit along the within-run fit's ridge (fit::stall_ridge): lines for the output and
/// the profile, a warning on stderr where the fractions along it are apart.
std::vector<std::string> ridge_stall_lines(const std::vector<LoadedGroup>& groups,
                                           const VariabilitySpec& base, const fit::StepFit& all,
                                           double fraction, double duration_s) {
    const fit::StallRidge ridge =
        fit::stall_ridge(step_groups(groups), base, all, fraction, duration_s);
    std::vector<std::string> lines{fmt::format(
        "  the ridge of the within-run fit (the fit: transient scale {:.4g}, regime cv {:.4g}, "
        "worst KS shape {:.3f}):",
        all.parameters.transient_scale, all.parameters.regime_cv, all.ks_shape)};
    for (const fit::StallRidgeEnd& end : ridge.ends) {
        const bool regime = end.target == fit::StepFitTarget::regime;
        const std::string what =
            regime ? fmt::format("all from the regime (cv {:.4g})", end.fit.parameters.regime_cv)
                   : fmt::format("all from the transient noise (scale {:.4g})",
                                 end.fit.parameters.transient_scale);
        if (!end.as_good) {
            lines.push_back(fmt::format("    {}: worst KS shape {:.3f}, a worse shape", what,
                                        end.fit.ks_shape));
            continue;
        }
        std::string medians;
        for (std::size_t k = 0; k < groups.size(); ++k) {
            const double step = deterministic_step_time(groups[k].group.model.profile);
            medians += fmt::format("{}{:+.2f}%", k == 0 ? "" : " / ",
                                   100 * (end.stalls.model_without_s[k] / step - 1));
        }
        lines.push_back(
            fmt::format("    {}: worst KS shape {:.3f}, model medians without stalls {} of the "
                        "deterministic step, stalled fraction {:.4g}{}",
                        what, end.fit.ks_shape, medians, end.stalls.stalls.fraction,
                        end.stalls.stall_like() ? "" : " (not stall-like)"));
    }
    if (ridge.apart()) {
        const std::string why = fmt::format(
            "the step times do not tell transient noise from the regime, and the stalled "
            "fraction along that ridge runs from {:.4g} to {:.4g}: the transient noise raises "
            "the larger job's median more (docs/tails.md, \"Fitting stalls from two scales\")",
            ridge.lo, ridge.hi);
        std::cerr << "prism: warning: steps fit: --stalls: " << why << "\n";
        lines.push_back("  " + why);
    }
    return lines;
}

// `steps fit --runs-from RUNS.toml`: one profile for several scales of a platform; per group the
// in-sample KS and the KS when that group is left out of the fit (issue 35, item 5).
int fit_groups_command(const StepsCommand& cmd) {
    const double stall_d = stall_duration(cmd);  // a bad --stalls before any work
    const std::vector<io::RunsGroup> manifest = io::read_runs_manifest(cmd.runs_from);
    std::vector<std::string> inputs{cmd.runs_from, cmd.base};
    for (const io::RunsGroup& g : manifest) {
        inputs.push_back(g.experiment);
        inputs.insert(inputs.end(), g.runs.begin(), g.runs.end());
    }
    check_new_output(cmd.output, "steps fit: -o", inputs, cmd.overwrite);
    VariabilitySpec base = io::load_variability(cmd.base);
    base.persistent.slow_probability = 0;
    std::vector<LoadedGroup> groups;
    for (const io::RunsGroup& g : manifest) {
        const Experiment e = io::load_experiment(g.experiment);
        StepsCommand one = cmd;
        one.runs = g.runs;
        LoadedGroup lg;
        lg.label = fmt::format("{} ({})", stem(g.experiment), e.name);
        std::cout << fmt::format("group {}:\n", lg.label);
        lg.all_runs = load_runs(one, std::cout);
        check_resolution(lg.all_runs, true);
        lg.group.name = lg.label;
        lg.group.model = model_input(e, std::cout);
        lg.group.model.monte_carlo_samples = cmd.monte_carlo_samples;
        const DesignPoint point =
            decode_point(e, std::vector<std::size_t>(e.space.dimensions.size(), 0));
        lg.nodes = std::ceil(
            static_cast<double>(point.gpus()) /
            std::max(1, e.hardware.at(static_cast<std::size_t>(point.hardware)).gpus_per_node));
        lg.group.runs = lg.all_runs;
        if (cmd.hiccups) {
            const fit::PeriodicFit periodic = fit::fit_periodic(lg.all_runs);
            for (std::size_t k = 0; k < periodic.events.size(); ++k) {
                std::cout << fmt::format(
                    "periodic event {}: every {} steps, {:.4g} s ({}): left out of the fit\n",
                    periodic.events[k].name, periodic.events[k].every,
                    periodic.events[k].duration_s, periodic.evidence[k]);
            }
            lg.group.runs = fit::without_periodic(lg.all_runs, periodic);
        }
        groups.push_back(std::move(lg));
    }
    fit::StepFitParameters start;
    start.regime_cv = base.comm_regime.cv;
    start.levels = level_start(cmd, base);
    std::vector<std::string> level_notes;
    VariabilitySpec all_base = base;  // the base of the fit on every group (its hiccups)
    const auto fit_without = [&](std::size_t skip, fit::HiccupFit* hiccup_fit) {
        VariabilitySpec b = base;
        if (cmd.hiccups) b.hiccup = group_hiccups(groups, skip, hiccup_fit);
        if (skip == groups.size()) all_base = b;
        std::vector<fit::StepGroup> g;
        for (std::size_t k = 0; k < groups.size(); ++k) {
            if (k != skip) g.push_back(groups[k].group);
        }
        if (!cmd.regime_levels) {
            const fit::StepFit f = fit::fit_steps_groups(g, b, parse_target(cmd.target), start);
            return std::pair{fit::with_parameters(b, f.parameters), f};
        }
        const fit::LevelFit lf =
            fit::fit_steps_groups_levels(g, b, parse_target(cmd.target), start);
        if (skip == groups.size()) level_notes = level_lines(lf);
        return std::pair{fit::with_parameters(b, lf.fit.parameters), lf.fit};
    };
    fit::HiccupFit hiccups;
    const auto [spec, all] = fit_without(groups.size(), &hiccups);
    if (cmd.hiccups) std::cout << hiccup_line(hiccups, 0) << "\n";
    for (const std::string& line : level_notes) std::cout << line << "\n";
    std::cout << fmt::format(
        "\nfitted on all {} groups: transient scale {:.4g}, regime cv {:.4g}; worst group's KS "
        "shape {:.3f}\n",
        groups.size(), all.parameters.transient_scale, all.parameters.regime_cv, all.ks_shape);
    if (cmd.regime_levels) {
        for (std::size_t k = 0; k < groups.size(); ++k) {
            std::cout << fmt::format(
                "{}: collective time on nvlink / nic / rack / pod {}; job regime cv {:.4g}\n",
                groups[k].label, level_shares(groups[k].group.model.profile),
                all.parameters.regime_cv *
                    stochastic::detail::level_amplitude(
                        all.parameters.levels,
                        collective_seconds_by_level(groups[k].group.model.profile)));
        }
    }
    std::vector<std::vector<Cell>> rows;
    std::vector<std::string> notes;
    for (std::size_t k = 0; k < groups.size(); ++k) {
        const double in_sample = fit::shape_ks(groups[k].group.model, spec, groups[k].group.runs);
        Cell left_out;
        std::string left_text = "-";
        if (groups.size() > 1) {
            const double ks = fit::shape_ks(groups[k].group.model, fit_without(k, nullptr).first,
                                            groups[k].group.runs);
            left_out = ks;
            left_text = fmt::format("{:.3f}", ks);
        }
        rows.push_back({groups[k].label, groups[k].nodes, in_sample, left_out});
        notes.push_back(fmt::format("{}: {:.0f} nodes, KS shape in sample {:.3f}, left out {}",
                                    groups[k].label, groups[k].nodes, in_sample, left_text));
    }
    std::cout << "\nper group (KS shape of its runs, without their periodic steps):\n"
              << format_table({{"group", ""},
                               {"nodes", ""},
                               {"in sample", "", Align::automatic, 3},
                               {"group left out of the fit", "", Align::automatic, 3}},
                              rows);
    io::VariabilityProfile p;
    p.spec = spec;
    p.spec.persistent.slow_probability = 0;
    std::vector<std::string> stall_header;  // a stall fit not written: its lines, in the header
    if (!cmd.stalls.empty()) {
        const fit::StallFit sf = fit_group_stalls(groups, spec, stall_d);
        std::vector<std::string> lines = stall_lines(groups, sf, cmd.runs_from);
        if (parse_target(cmd.target) == fit::StepFitTarget::both) {
            for (const std::string& line :
                 ridge_stall_lines(groups, all_base, all, sf.stalls.fraction, stall_d)) {
                lines.push_back(line);
            }
        }
        std::cout << "\n";
        for (const std::string& line : lines) std::cout << line << "\n";
        if (sf.stalls.fraction > 0 && !sf.stall_like()) {
            const std::string why = fmt::format(
                "not written (stall_fraction 0): the fitted stalls add {:.1f}% to the least "
                "stalled group's median (more than {:.0f}%): they flatten the ratios by "
                "lengthening every step, not by the growth stalls of {} give; the growth is "
                "another term's (docs/tails.md, \"Fitting stalls from two scales\")",
                100 * sf.least_share, 100 * fit::kMaxLeastStallShare, cmd.stalls);
            std::cerr << "prism: warning: steps fit: --stalls: " << why << "\n";
            lines.push_back("  " + why);
            stall_header = lines;
        } else {
            p.spec.stalls = sf.stalls;
            p.stall_notes = lines;
        }
    }
    std::vector<fit::MeasuredSteps> every_run;
    for (const auto& g : groups) {
        every_run.insert(every_run.end(), g.group.runs.begin(), g.group.runs.end());
    }
    p.spec.step_autocorrelation = fit::lag1_autocorrelation(every_run);
    std::cout << fmt::format(
        "step autocorrelation (lag 1, pooled over every group's runs): {:.3f}\n",
        p.spec.step_autocorrelation);
    p.name = cmd.name.empty() ? fs::path(cmd.output).stem().string() : cmd.name;
    p.source = fmt::format("prism steps fit --runs-from {} ({} groups); class ratios from {}",
                           cmd.runs_from, groups.size(), cmd.base);
    p.description = "variability fitted from measured step times at several scales";
    p.header = {
        "Variability profile written by `prism steps fit --runs-from` (src/fit/step_fit.hpp):",
        "the within-run parameters minimize the worst group's KS shape."};
    for (const std::string& n : notes) p.header.push_back(n);
    p.header.insert(p.header.end(), stall_header.begin(), stall_header.end());
    p.header.insert(p.header.end(), cmd.notes.begin(), cmd.notes.end());
    p.regime_notes = {fmt::format("fitted on {} groups (target '{}'); worst KS shape {:.3f}",
                                  groups.size(), cmd.target, all.ks_shape)};
    p.spatial_notes = {"not fitted across scales: 0"};
    p.slow_notes = {"not fitted from step times: 0"};
    if (cmd.hiccups) p.hiccup_notes = {hiccup_line(hiccups, 0)};
    p.level_notes = level_notes;
    io::write_variability_profile(cmd.output, p);
    std::cout << fmt::format("wrote {}\n", cmd.output);
    return kExitOk;
}

int fit_command(const StepsCommand& cmd) {
    if (!cmd.runs_from.empty()) {
        if (cmd.output.empty()) throw ConfigError("steps fit: --output is required");
        if (!cmd.runs.empty() || !cmd.experiment.empty()) {
            throw ConfigError(
                "steps fit: --runs-from names the runs and their experiments: give no RUNS or "
                "--experiment with it");
        }
        check_samples(cmd);
        return fit_groups_command(cmd);
    }
    if (cmd.runs.empty() || cmd.experiment.empty()) {
        throw ConfigError(
            "steps fit: give the runs and --experiment EXP.toml, or --runs-from RUNS.toml");
    }
    if (!cmd.stalls.empty()) {
        throw ConfigError(
            "steps fit: --stalls needs --runs-from: stalls show only as the median step's growth "
            "from one scale to another, not within one configuration's runs");
    }
    if (cmd.output.empty()) throw ConfigError("steps fit: --output is required");
    check_samples(cmd);
    std::vector<std::string> inputs = cmd.runs;
    inputs.push_back(cmd.experiment);
    inputs.push_back(cmd.base);
    check_new_output(cmd.output, "steps fit: -o", inputs, cmd.overwrite);
    const Experiment e = io::load_experiment(cmd.experiment);
    for (const IncludedFile& f : e.included) {
        inputs.push_back((fs::path(e.file).parent_path() / f.name).string());
    }
    check_new_output(cmd.output, "steps fit: -o", inputs, cmd.overwrite);  // the profile it reads
    const std::vector<fit::MeasuredSteps> runs = load_runs(cmd, std::cout);
    check_resolution(runs, true);
    fit::StepModelInput m = model_input(e, std::cout);
    m.monte_carlo_samples = cmd.monte_carlo_samples;
    VariabilitySpec base = io::load_variability(cmd.base);
    base.persistent.slow_probability = 0;
    fit::HiccupFit hiccups;
    fit::PeriodicFit periodic;
    std::vector<fit::MeasuredSteps> fit_runs = runs;
    if (cmd.hiccups) {
        // recurring slow steps first (periodic_fit.hpp): they are not hiccups; the other fits
        // see the runs without them
        periodic = fit::fit_periodic(runs);
        for (std::size_t k = 0; k < periodic.events.size(); ++k) {
            const PeriodicEvent& ev = periodic.events[k];
            std::cout << fmt::format("periodic event {}: every {} steps, {:.4g} s ({})\n", ev.name,
                                     ev.every, ev.duration_s, periodic.evidence[k]);
        }
        fit_runs = fit::without_periodic(runs, periodic);
        // the steps far above their run's median first: the body is fitted with them modelled
        const DesignPoint point =
            decode_point(e, std::vector<std::size_t>(e.space.dimensions.size(), 0));
        const double nodes = std::ceil(
            static_cast<double>(point.gpus()) /
            std::max(1, e.hardware.at(static_cast<std::size_t>(point.hardware)).gpus_per_node));
        hiccups = fit::fit_hiccups({{fit_runs, nodes}});
        base.hiccup = hiccups.hiccup;
        std::cout << hiccup_line(hiccups, nodes) << "\n";
    }
    fit::StepFitParameters start;
    start.regime_cv = base.comm_regime.cv;
    start.levels = level_start(cmd, base);
    const fit::StepFit f = fit::fit_steps(m, base, fit_runs, parse_target(cmd.target), start);
    std::cout << fmt::format(
        "\nfitted: transient scale {:.4g} (x the {} class cvs), regime cv {:.4g}, spatial cv "
        "{:.4g}; KS shape {:.3f} ({} model evaluations)\n",
        f.parameters.transient_scale, cmd.base, f.parameters.regime_cv, f.parameters.spatial_cv,
        f.ks_shape, f.profile.size());
    if (fit::flat_objective(f)) {
        std::cerr << "prism: warning: steps fit: the KS distance changes by less than 0.02 over "
                     "every parameter value tried: the steps do not pin the fitted values\n";
    }
    print_identifiability(m, base, fit_runs, f, std::cout);
    io::VariabilityProfile profile = fitted_profile(cmd, e, base, f, runs);
    if (cmd.hiccups) {
        profile.hiccup_notes = {hiccup_line(hiccups, 0),
                                "per node and step: the chance a step is hit grows as 1 - (1 - "
                                "q)^nodes"};
        profile.spec.periodic = periodic.events;
        profile.periodic_notes = {
            "recurring slow steps of the fitted runs (src/fit/periodic_fit.hpp): a setting of "
            "their configuration",
            "(GC / logging / evaluation cadence), not of the platform: drop or restate them for "
            "another configuration"};
        for (const std::string& ev : periodic.evidence) profile.periodic_notes.push_back(ev);
    }
    profile.spec.step_autocorrelation = fit::lag1_autocorrelation(fit_runs);
    std::cout << fmt::format(
        "step autocorrelation (lag 1, pooled over the runs): {:.3f}: the run model's sums of "
        "steps\n",
        profile.spec.step_autocorrelation);
    std::cout << "\nwith the fitted profile:\n";
    print_comparison(fit::compare_steps(m, profile.spec, runs), std::cout);
    io::write_variability_profile(cmd.output, profile);
    std::cout << fmt::format("wrote {}\n", cmd.output);
    return kExitOk;
}

}  // namespace

CLI::App* add_steps_command(CLI::App& app, StepsCommand& command) {
    auto* steps = app.add_subcommand("steps", "measured step times against the model");
    steps->require_subcommand(1);
    for (const char* name : {"compare", "fit"}) {
        const bool fit = std::string(name) == "fit";
        auto* sub = steps->add_subcommand(
            name, fit ? "fit variability parameters to measured step times"
                      : "measured step times against the model's distribution");
        auto* runs =
            sub->add_option("runs", command.runs, "step CSVs (one per run) or Kineto traces");
        auto* experiment = sub->add_option("--experiment", command.experiment,
                                           "the runs' configuration (its first point)");
        if (!fit) {
            runs->required();
            experiment->required();
        }
        sub->add_option("--warmup", command.warmup_steps, "steps dropped at the start (5)");
        sub->add_flag("--keep-first-after-eval", command.keep_first_after_eval,
                      "keep the first step after each evaluation");
        sub->add_option(
            "--monte-carlo", command.monte_carlo_samples,
            "the model's distribution (and a stall fit's medians) from this many Monte Carlo "
            "steps (default: analytic)");
        if (fit) {
            sub->add_option("-o,--output", command.output, "variability profile to write")
                ->required();
            sub->add_option("--base", command.base,
                            "class ratios and unfitted values (preset or .toml; prism-paper)");
            sub->add_option("--fit", command.target, "transient, regime or both (both)");
            sub->add_option("--name", command.name, "the profile's name");
            sub->add_option("--note", command.notes, "a comment line for the profile's header");
            sub->add_flag("--overwrite", command.overwrite, "replace an existing --output");
            sub->add_option("--runs-from", command.runs_from,
                            "a manifest of groups of runs at several scales ([[group]] "
                            "experiment = ..., runs = [...]) instead of RUNS and --experiment");
            sub->add_flag("--hiccups", command.hiccups,
                          "also fit periodic events and rare hiccups per node and step (steps far "
                          "above the median)");
            sub->add_option("--stalls", command.stalls,
                            "with --runs-from: also the stalled fraction of stalls of this "
                            "duration (e.g. \"20 ms\"), from the median step's growth over the "
                            "groups beyond the model's");
            sub->add_flag("--regime-levels", command.regime_levels,
                          "the comm regime per link level: NVLink's multiplier fitted across "
                          "--runs-from groups (from 0: the regime on the fabric alone)");
        } else {
            sub->add_option("--variability", command.variability,
                            "preset or .toml profile (default: the experiment's)");
        }
    }
    return steps;
}

int run_steps_command(const CLI::App& steps, const StepsCommand& command) {
    if (steps.got_subcommand("fit")) return fit_command(command);
    return compare(command);
}

}  // namespace prism::explorer
