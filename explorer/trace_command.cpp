#include "explorer/trace_command.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>

#include <fmt/format.h>

#include "explorer/cli.hpp"
#include "explorer/output_check.hpp"
#include "explorer/table.hpp"
#include "io/trace_reader.hpp"
#include "io/variability_profile.hpp"
#include "src/common/error.hpp"
#include "src/fit/trace_fit.hpp"

namespace prism::explorer {

namespace {

// DistKind's names, the mixture being the fit's slow mode.
const char* family_name(DistKind kind) {
    constexpr std::array<const char*, 6> kNames{"constant", "normal",    "lognormal",
                                                "gamma",    "empirical", "slow mode"};
    return kNames[static_cast<std::size_t>(kind)];
}

std::string fs_name(const std::string& path) {
    return std::filesystem::path(path).filename().string();
}

std::string file_list(const std::vector<io::KinetoTrace>& traces) {
    std::string out;
    for (const io::KinetoTrace& t : traces) {
        out += (out.empty() ? "" : ", ") + std::filesystem::path(t.path).filename().string();
    }
    return out;
}

void print_traces(const std::vector<io::KinetoTrace>& traces, std::ostream& out) {
    std::vector<std::vector<Cell>> rows;
    for (const io::KinetoTrace& t : traces) {
        double mean = 0;
        for (const io::TraceStep& s : t.steps) mean += s.duration_s;
        mean /= static_cast<double>(t.steps.size());
        rows.push_back({std::filesystem::path(t.path).filename().string(),
                        t.rank >= 0 ? fmt::format("{}/{}", t.rank, t.world_size) : "-",
                        t.device.empty() ? "-" : t.device,
                        static_cast<std::int64_t>(t.steps.size()), mean * 1e3,
                        static_cast<std::int64_t>(t.kernels.size()), t.resolution_s * 1e6});
    }
    out << format_table({{"trace", ""},
                         {"rank", ""},
                         {"device", ""},
                         {"steps", ""},
                         {"step mean", "ms"},
                         {"kernels", ""},
                         {"resolution", "us"}},
                        rows)
        << "\n";
}

// "2.1% x1.35, body cv 0.004" for the slow-mode candidate, or empty.
Cell slow_mode_cell(const fit::TransientFit& f) {
    if (f.slow_mode_fit.ks >= 1) return Cell();
    return fmt::format("{:.2g}% x{:.3g}, body {:.2g}", 100 * f.slow_mode.weight, f.slow_mode.factor,
                       f.slow_mode.body_cv);
}

void print_fit(const fit::TraceFit& fit, std::ostream& out) {
    double total = 0;
    for (const fit::ClassFit& c : fit.classes) total += c.time_s;
    std::vector<std::vector<Cell>> rows;
    for (const fit::ClassFit& c : fit.classes) {
        const auto& f = c.fit.families;
        rows.push_back({kKernelClassNames[static_cast<std::size_t>(c.cls)],
                        static_cast<std::uint64_t>(c.fit.samples),
                        static_cast<std::uint64_t>(c.fit.groups), c.used_time_s / total, f[0].cv,
                        f[0].ks, f[1].cv, f[1].ks, f[2].cv, f[2].ks, slow_mode_cell(c.fit),
                        c.fit.slow_mode_fit.ks < 1 ? Cell(c.fit.slow_mode_fit.ks) : Cell(),
                        family_name(c.fit.best.kind), c.fit.ks_critical_5pct});
    }
    out << format_table({{"class", ""},
                         {"invocations", ""},
                         {"kernels", ""},
                         {"time share", ""},
                         {"normal cv", ""},
                         {"KS", ""},
                         {"lognormal cv", ""},
                         {"KS", ""},
                         {"gamma cv", ""},
                         {"KS", ""},
                         {"slow mode", ""},
                         {"KS", ""},
                         {"chosen", ""},
                         {"KS 5%", ""}},
                        rows, TableOptions{"  ", false, true, ""});
}

// Per job: the measured step-to-step spread against what the fitted variability predicts.
void print_explained(const std::vector<fit::TracedJob>& jobs, const fit::TraceFit& fit,
                     std::ostream& out) {
    std::vector<std::vector<Cell>> rows;
    for (const fit::TracedJob& job : jobs) {
        const fit::StepVariation v = fit::explain_steps(job, fit);
        if (v.steps < 2) continue;
        rows.push_back({fs_name(job.name), static_cast<std::int64_t>(v.steps), v.step_mean_s * 1e3,
                        v.step_sd_s * 1e3, v.kernel_mean_s * 1e3, v.kernel_sd_s * 1e3,
                        v.compute_sd_s * 1e3, v.comm_sd_s * 1e3,
                        v.compute_sd_s * v.compute_sd_s / (v.step_sd_s * v.step_sd_s),
                        v.predicted_sd_s * v.predicted_sd_s / (v.step_sd_s * v.step_sd_s)});
    }
    out << "\nstep-to-step variation: measured, and predicted by the fitted variability with the "
           "first rank's kernels in series\n"
        << format_table({{"job", ""},
                         {"steps", ""},
                         {"step mean", "ms"},
                         {"step sd", "ms"},
                         {"kernel sum", "ms"},
                         {"kernel sd", "ms"},
                         {"compute sd", "ms"},
                         {"comm sd", "ms"},
                         {"compute / step var", ""},
                         {"all / step var", ""}},
                        rows);
}

std::vector<std::string> class_notes(const fit::ClassFit& c,
                                     const std::vector<fit::TracedJob>& jobs, double total_time_s) {
    const auto& f = c.fit.families;
    std::string files;
    for (int j : c.jobs) {
        files += (files.empty() ? "" : "; ") +
                 std::filesystem::path(jobs[static_cast<std::size_t>(j)].name).filename().string();
    }
    std::vector<std::string> notes{
        fmt::format("fitted from {} invocations of {} kernels in {}: {:.1f}% of the traced "
                    "kernel time ({:.1f}% of it in kernels of 2+ invocations above the minimum "
                    "duration)",
                    c.fit.samples, c.fit.groups, files, 100 * c.time_s / total_time_s,
                    100 * c.used_time_s / c.time_s),
        fmt::format("MLE around each kernel's own location: normal cv {:.4g} (KS {:.3f}), "
                    "lognormal cv {:.4g} (KS {:.3f}), gamma cv {:.4g} (KS {:.3f})",
                    f[0].cv, f[0].ks, f[1].cv, f[1].ks, f[2].cv, f[2].ks),
    };
    if (c.fit.slow_mode_fit.ks < 1) {
        notes.push_back(fmt::format(
            "lognormal body with a rare slow mode (EM): {:.3g}% of invocations x{:.3g} slower, "
            "body cv {:.3g}, slow cv {:.3g}, total cv {:.4g} (KS {:.3f})",
            100 * c.fit.slow_mode.weight, c.fit.slow_mode.factor, c.fit.slow_mode.body_cv,
            c.fit.slow_mode.slow_cv, c.fit.slow_mode_fit.cv, c.fit.slow_mode_fit.ks));
    }
    notes.push_back(
        fmt::format("chosen: {} (KS {:.3f}; the slow mode only when it beats the best "
                    "single family by more than the 5% KS scale)",
                    family_name(c.fit.best.kind), c.fit.best.ks));
    notes.push_back(fmt::format(
        "KS 5% scale at {:.0f} effective invocations: {:.3f}; timer resolution explains {:.1f}% "
        "of the raw variance (removed)",
        c.fit.effective_samples, c.fit.ks_critical_5pct, 100 * c.fit.resolution_share));
    if (is_communication(c.cls)) {
        notes.push_back(
            "a collective's kernel time on one rank includes its wait for the slowest peer: an "
            "upper bound on the transfer's own spread");
    }
    return notes;
}

io::VariabilityProfile build_profile(const TraceCommand& cmd, const fit::TraceFit& fit,
                                     const std::vector<io::KinetoTrace>& traces,
                                     const std::vector<fit::TracedJob>& jobs) {
    io::VariabilityProfile p;
    p.spec = io::load_variability(cmd.base);
    p.name = cmd.name.empty() ? std::filesystem::path(cmd.output).stem().string() : cmd.name;
    const std::string files = file_list(traces);
    p.source = fmt::format("prism trace fit of {} (min kernel {:g} us); other values from {}",
                           files, cmd.min_kernel_us, cmd.base);
    p.description = "variability fitted from PyTorch profiler traces";
    p.header = {"Variability profile written by `prism trace fit` (DESIGN.md section 2).",
                fmt::format("Traces: {}.", files),
                "Transient factors: per class, MLE of normal / lognormal / gamma around each "
                "kernel's own",
                "location (name, launch shape, call order in the step), time-weighted, chosen by "
                "KS.",
                "Use it with [variability] preset = \"<this file>.toml\" in an experiment."};
    double total = 0;
    for (const fit::ClassFit& c : fit.classes) total += c.time_s;
    for (int k = 0; k < kKernelClassCount; ++k) {
        p.class_notes[static_cast<std::size_t>(k)] = {
            fmt::format("not in the traces: kept from {}", cmd.base)};
    }
    for (const fit::ClassFit& c : fit.classes) {
        const auto k = static_cast<std::size_t>(c.cls);
        p.spec.transient[k] = c.fit.best.spec;
        p.class_notes[k] = class_notes(c, jobs, total);
    }
    if (fit.regime) {
        const fit::ComponentFit& r = *fit.regime;
        p.spec.comm_regime = DistributionSpec{
            r.cv > 0 ? DistKind::lognormal : DistKind::constant, 1.0, r.cv, {}, {}};
        p.regime_notes = {fmt::format(
            "per-step effect of the collectives (log x = site + step + noise) over {} steps of {} "
            "job(s): between-step variance {:.3g}, of which noise {:.3g} (log scale); few steps: "
            "a rough estimate",
            r.levels, r.jobs, r.raw_var, r.noise_var)};
    } else {
        p.regime_notes = {fmt::format(
            "not identifiable from the traces (no collectives in 2+ steps): kept from {}",
            cmd.base)};
    }
    if (fit.spatial) {
        const fit::ComponentFit& s = *fit.spatial;
        p.spec.persistent.spatial = DistributionSpec{DistKind::normal, 1.0, s.cv, {}, {}};
        p.spatial_notes = {fmt::format(
            "per-rank effect of the compute kernels across {} ranks of {} job(s): between-rank "
            "variance {:.3g}, of which noise {:.3g} (log scale)",
            s.levels, s.jobs, s.raw_var, s.noise_var)};
    } else {
        p.spatial_notes = {fmt::format(
            "not identifiable from the traces (one rank per job): kept from {}", cmd.base)};
    }
    p.slow_notes = {fmt::format(
        "slow nodes: not identifiable from a few ranks' traces: kept from {}", cmd.base)};
    return p;
}

// The same trace given twice (by two paths, or a copy) would count as two jobs, or two ranks,
// and give a spread between them: refuse the last one read when it repeats an earlier one.
void check_distinct(const std::vector<io::KinetoTrace>& traces) {
    const io::KinetoTrace& t = traces.back();
    for (std::size_t i = 0; i + 1 < traces.size(); ++i) {
        const io::KinetoTrace& u = traces[i];
        const bool same_steps = u.steps.size() == t.steps.size() &&
                                std::equal(u.steps.begin(), u.steps.end(), t.steps.begin(),
                                           [](const io::TraceStep& a, const io::TraceStep& b) {
                                               return a.number == b.number &&
                                                      a.start_s == b.start_s &&
                                                      a.duration_s == b.duration_s;
                                           });
        if (same_steps && u.rank == t.rank && u.kernels.size() == t.kernels.size()) {
            throw ConfigError(fmt::format(
                "trace fit: {} is the same trace as {} (rank {}, the same {} profiler steps at "
                "the same times): give each rank's trace once",
                t.path, u.path, t.rank, t.steps.size()));
        }
    }
}

void write_qq(const std::string& path, const fit::TraceFit& fit) {
    std::ofstream out(path, std::ios::trunc);
    out << "class,family,cv,ks,p,fitted,empirical\n";
    for (const fit::ClassFit& c : fit.classes) {
        const std::size_t n = c.fit.qq.size();
        for (std::size_t i = 0; i < n; ++i) {
            out << fmt::format("{},{},{:.6g},{:.6g},{:.6g},{:.8g},{:.8g}\n",
                               kKernelClassNames[static_cast<std::size_t>(c.cls)],
                               family_name(c.fit.best.kind), c.fit.best.cv, c.fit.best.ks,
                               (static_cast<double>(i) + 0.5) / static_cast<double>(n),
                               c.fit.qq[i][0], c.fit.qq[i][1]);
        }
    }
    out.close();
    if (!out) throw IoError(fmt::format("{}: cannot write the QQ table", path));
}

}  // namespace

CLI::App* add_trace_command(CLI::App& app, TraceCommand& command) {
    auto* trace = app.add_subcommand("trace", "fit variability from PyTorch profiler traces");
    trace->require_subcommand(1);
    auto* fit = trace->add_subcommand(
        "fit", "fit per-class transient spread, spatial spread and comm regime from traces");
    fit->add_option("traces", command.traces, "Kineto trace files (.json or .json.gz)")->required();
    fit->add_option("-o,--output", command.output, "variability profile to write (TOML)")
        ->required();
    fit->add_option("--qq", command.qq_output, "also write QQ pairs per class (CSV)");
    fit->add_option("--base", command.base,
                    "preset or profile for what the traces do not give (default prism-paper)");
    fit->add_option("--name", command.name, "the profile's name (default: the output's stem)");
    fit->add_option("--min-kernel-us", command.min_kernel_us,
                    "leave out kernels with a median below this (default 20 us)");
    fit->add_flag("--overwrite", command.overwrite, "replace an existing --output or --qq file");
    return trace;
}

int run_trace_command(const TraceCommand& command) {
    std::vector<std::string> inputs = command.traces;
    inputs.push_back(command.base);
    check_new_output(command.output, "trace fit: -o", inputs, command.overwrite);
    if (!command.qq_output.empty()) {
        inputs.push_back(command.output);
        check_new_output(command.qq_output, "trace fit: --qq", inputs, command.overwrite);
    }
    std::vector<io::KinetoTrace> traces;
    for (const std::string& path : command.traces) {
        traces.push_back(io::read_kineto_trace(path));
        check_distinct(traces);
    }
    print_traces(traces, std::cout);
    fit::TraceFitOptions options;
    options.min_kernel_s = command.min_kernel_us * 1e-6;
    const std::vector<fit::TracedJob> jobs = io::traced_jobs(traces);
    const fit::TraceFit fit = fit::fit_traces(jobs, options);
    print_fit(fit, std::cout);
    print_explained(jobs, fit, std::cout);
    const io::VariabilityProfile profile = build_profile(command, fit, traces, jobs);
    std::cout << fmt::format(
        "\ncomm regime  {}\nspatial      {}\n",
        fit.regime ? fmt::format("cv {:.4g} over {} steps", fit.regime->cv, fit.regime->levels)
                   : "not identifiable (kept from " + command.base + ")",
        fit.spatial ? fmt::format("cv {:.4g} over {} ranks", fit.spatial->cv, fit.spatial->levels)
                    : "not identifiable (kept from " + command.base + ")");
    io::write_variability_profile(command.output, profile);
    if (!command.qq_output.empty()) write_qq(command.qq_output, fit);
    std::cout << fmt::format("wrote {}{}\n", command.output,
                             command.qq_output.empty() ? "" : " and " + command.qq_output);
    return kExitOk;
}

}  // namespace prism::explorer
