#include "explorer/cli.hpp"

#include <algorithm>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "explorer/design_space.hpp"
#include "explorer/fit_lr_command.hpp"
#include "explorer/html_report.hpp"
#include "explorer/mpi_context.hpp"
#include "explorer/report.hpp"
#include "explorer/result_commands.hpp"
#include "explorer/steps_command.hpp"
#include "explorer/stop_signals.hpp"
#include "explorer/sweep_command.hpp"
#include "explorer/table.hpp"
#include "explorer/trace_command.hpp"
#include "io/experiment_loader.hpp"
#include "io/resolved_settings.hpp"
#include "io/result_store.hpp"
#include "io/work_limits.hpp"
#include "src/common/error.hpp"
#include "src/cotune/cotune.hpp"
#include "src/model/design_space.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/evaluate.hpp"
#include "src/model/memory.hpp"
#include "src/stochastic/step_distribution.hpp"

namespace prism::explorer {

namespace {

/// The settings the experiment runs with; `*` marks a default prism filled, with its reason.
void print_resolved_settings(const Experiment& e) {
    std::cout << "settings    as resolved; * = not in the file, filled by prism\n";
    for (const io::ResolvedSetting& s : io::resolved_settings(e)) {
        std::string line =
            fmt::format("  {} {:<32} = {:<12}  {}", s.defaulted ? '*' : ' ', s.key, s.value, s.why);
        line.erase(line.find_last_not_of(' ') + 1);
        std::cout << line << "\n";
    }
}

/// Where a point's memory goes, term by term: the baseline, else the [defaults] point.
void print_memory_explained(const Experiment& e) {
    DesignPoint p = e.baseline ? *e.baseline : e.defaults;
    if (!e.baseline) resolve_point_defaults(e, p);  // as a sweep decodes it (SP with TP)
    if (e.hardware.empty() || filter_reason(e, p) || io::work_limit_reason(e, p)) return;
    const DeterministicResult r = evaluate_deterministic(e, p);
    const MemoryBreakdown& m = r.memory;
    const GpuSpec& gpu = e.hardware[static_cast<std::size_t>(p.hardware)].gpu;
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    std::cout << fmt::format("memory      {} point {} ({} GPUs), stage {}:\n",
                             e.baseline ? "baseline" : "[defaults]", describe_point(e, p), p.gpus(),
                             r.breakdown.memory_stage);
    std::cout << fmt::format(
        "  weights {:.1f} + gradients {:.1f} + optimizer {:.1f} + activations {:.1f} + "
        "temporary {:.1f} + reserved {:.1f} = {:.1f} GiB of {:.1f} usable ({:g} x {:.1f} GiB)\n",
        m.weights_bytes / kGiB, m.grads_bytes / kGiB, m.optimizer_bytes / kGiB,
        m.activations_bytes / kGiB, m.temporary_bytes / kGiB, m.reserved_bytes / kGiB,
        m.total_bytes() / kGiB, gpu.hbm_bytes * e.constraints.max_memory_fraction / kGiB,
        e.constraints.max_memory_fraction, gpu.hbm_bytes / kGiB);
    const double per_layer = activation_bytes_per_layer(e.model, e.training, p);
    std::cout << fmt::format(
        "  activations: {:.3f} GiB per layer and microbatch ({} attention{}{}), held for {:g} "
        "layer-microbatches; reserved: CUDA context, workspaces, NCCL buffers of {} "
        "communicators\n",
        per_layer / kGiB, e.training.flash_attention ? "fused" : "unfused: the s x s scores stored",
        p.sequence_parallel ? ", sequence parallel" : (p.tp > 1 ? ", no sequence parallelism" : ""),
        p.recompute == Recompute::none ? "" : ", recompute " + recompute_name(p.recompute),
        per_layer > 0 ? m.activations_bytes / per_layer : 0.0, nccl_communicators(p));
}

int validate_command(const std::string& path) {
    const Experiment e = io::load_experiment(path);
    const DesignSpace space(e);
    const MetricSchema schema = metric_schema(e);
    std::cout << fmt::format("{}: ok\n", path);
    std::cout << fmt::format("experiment  {} (seed {})\n", e.name, e.seed);
    std::cout << fmt::format(
        "model       {}: {} layers, hidden {}, heads {} (kv {}), ffn {}{}, vocab {}, seq {}\n",
        e.model.name, e.model.layers, e.model.hidden, e.model.heads, e.model.kv_heads, e.model.ffn,
        e.model.gated_mlp ? " gated" : "", e.model.vocab, e.model.seq);
    for (const auto& h : e.hardware) {
        std::cout << fmt::format("hardware    {}: {} ({} per node{})\n", h.name, h.gpu.name,
                                 h.gpus_per_node,
                                 h.nvlink_domain_gpus() > h.gpus_per_node
                                     ? fmt::format(", {} per NVLink domain", h.nvlink_domain_gpus())
                                     : "");
    }
    std::cout << fmt::format("space       {} points:", space.size());
    for (const auto& d : e.space.dimensions)
        std::cout << " " << d.name << "[" << d.values.size() << "]";
    std::cout << "\n";
    std::string objectives;
    for (const auto& o : e.objectives) {
        objectives += fmt::format("{}{} {}", objectives.empty() ? "" : ", ",
                                  o.maximize ? "max" : "min", o.metric);
    }
    std::cout << fmt::format("objectives  {}\n", objectives.empty() ? "(none)" : objectives);
    std::cout << fmt::format("metrics     {} per point\n", schema.size());
    std::cout << fmt::format(
        "work limits {} pipeline slots, {} GPUs, Monte Carlo samples x GPUs {}: points beyond "
        "them are filtered\n",
        io::kMaxPipelineSlots, io::kMaxGpus, io::kMaxMonteCarloWork);
    if (e.cotune.enabled) {
        std::cout << fmt::format("cotune      {}\n", cotune::make_model(e).describe());
    }
    print_resolved_settings(e);
    print_memory_explained(e);
    return kExitOk;
}

/// Every metric a sweep can write: an experiment with a baseline, an MoE model with a routing
/// law, a run (total_tokens, failure deadlines) and a [cotune] study, the default slow deltas
/// and sensitivities.
MetricSchema every_metric() {
    Experiment e;
    e.baseline = DesignPoint{};
    e.model.experts = 8;  // the MoE lines, routing_share_* and the routing sensitivity
    e.training.moe_force_balance = false;
    e.training.total_tokens = 1;
    e.failures.enabled = true;
    e.failures.deadlines_s = {90 * 86400.0};
    e.cotune.enabled = true;
    return metric_schema(e);
}

/// `prism metrics [EXP.toml]`: name, unit and meaning of every metric (of the experiment's
/// schema when one is given).
int metrics_command(const std::string& path) {
    const MetricSchema schema =
        path.empty() ? every_metric() : metric_schema(io::load_experiment(path));
    std::vector<std::vector<Cell>> rows;
    for (const MetricInfo& m : schema) rows.push_back({m.name, m.unit, m.description});
    std::cout << format_table({{"metric", "", Align::left, 5},
                               {"unit", "", Align::left, 5},
                               {"meaning", "", Align::left, 5}},
                              rows);
    if (path.empty()) {
        std::cout
            << "\nwhich metrics a sweep writes depends on its experiment: speedup_vs_baseline "
               "and step_speedup_vs_baseline with [experiment] baseline; p_slow_<d>pct per "
               "[evaluation] slow_deltas (defaults shown); sens_* with sensitivity = true; "
               "moe_*_s with a Mixture-of-Experts model, routing_share_* too unless "
               "[evaluation] routing_share = false, sens_*_routing_* with moe_force_balance = "
               "false; "
               "the run metrics with [training] total_tokens, p_run_le_<deadline> per "
               "[failures] deadlines (90 days shown); the target metrics with [cotune]. "
               "`prism metrics EXP.toml` lists an experiment's own.\n";
    }
    return kExitOk;
}

/// "[1024, 2048]": a [space] dimension's values as the file gives them.
std::string space_values(const Dimension& d) {
    std::string out;
    for (const DimensionValue& v : d.values) {
        if (!out.empty()) out += ", ";
        switch (v.type) {
            case DimensionValue::Type::integer:
                out += std::to_string(v.i);
                break;
            case DimensionValue::Type::number:
                out += fmt::format("{}", v.d);
                break;
            case DimensionValue::Type::string:
                out += "\"" + v.s + "\"";
                break;
            case DimensionValue::Type::boolean:
                out += v.b ? "true" : "false";
                break;
        }
    }
    return "[" + out + "]";
}

/// The [space] dimensions that `--point` does not name: they keep the experiment's [defaults]
/// (dp = 1 unless set), one warning line each. `gpus` and `dp` name the same dimension.
std::vector<std::string> defaulted_dimensions(const Experiment& e, const std::string& point_text,
                                              const DesignPoint& p) {
    std::vector<std::string> given;
    std::stringstream in(point_text);
    std::string item;
    while (std::getline(in, item, ',')) {
        const auto eq = item.find('=');
        std::string key = item.substr(0, eq);
        key.erase(0, key.find_first_not_of(" \t"));
        key.erase(key.find_last_not_of(" \t") + 1);
        given.push_back(key);
    }
    const auto named = [&](const std::string& k) {
        return std::find(given.begin(), given.end(), k) != given.end();
    };
    std::vector<std::string> lines;
    for (const Dimension& d : e.space.dimensions) {
        const bool is_dp = d.name == "dp" || d.name == "gpus";
        if (named(d.name) || (is_dp && (named("dp") || named("gpus")))) continue;
        const std::string used =
            is_dp ? fmt::format("dp = {} ({} GPUs)", p.dp, p.gpus()) : "its [defaults] value";
        lines.push_back(fmt::format("--point: {} not given, using {}; [space] {} = {}", d.name,
                                    used, d.name, space_values(d)));
    }
    return lines;
}

int eval_command(const std::string& path, const std::string& point_text) {
    const Experiment e = io::load_experiment(path);
    const DesignPoint p = io::parse_point_assignments(e, point_text);
    for (const std::string& line : defaulted_dimensions(e, point_text, p)) {
        std::cerr << "prism: warning: " << line << "\n";
    }
    std::optional<std::string> why = filter_reason(e, p);
    if (!why) why = io::work_limit_reason(e, p);
    if (why) {
        std::cout << fmt::format("filtered before evaluation: {}\n", *why);
        std::cout << fmt::format("point: {} ({} GPUs)\n", describe_point(e, p), p.gpus());
        return kExitBadInput;
    }
    const DeterministicResult det = evaluate_deterministic(e, p);
    const Evaluator evaluator(e);
    const PointResult r = evaluator.evaluate(p, 0);
    // the verdict first, where a script or a reader looks: the point does not run as given
    if (r.status == PointStatus::infeasible) std::cout << fmt::format("infeasible: {}\n", r.reason);
    std::cout << fmt::format("point: {} ({} GPUs)\n", describe_point(e, p), p.gpus());
    std::cout << format_breakdown(det) << "\n";
    if (e.evaluation.method == Method::analytic && r.status == PointStatus::ok &&
        stochastic::analytic_hands_over(det.profile, p, e.hardware[p.hardware], e.variability)) {
        std::cout << fmt::format(
            "evaluator: Monte Carlo, {} draws (the point is outside the analytic law's domain: "
            "docs/model.md, \"Where the analytic evaluator hands over\")\n",
            e.evaluation.samples);
    }
    if (r.status != PointStatus::ok && r.status != PointStatus::infeasible) {
        std::cout << fmt::format("status: {}\n", r.reason);
    }
    if (r.status == PointStatus::ok) {
        // what the tail terms add (docs/tails.md): hiccups, periodic events, stalls
        const VariabilitySpec& v = e.variability;
        const HardwareSpec& hw = e.hardware[p.hardware];
        const std::vector<std::string> lines = hiccup_lines(p, hw, v);
        for (const std::string& line : lines) std::cout << line << "\n";
        if (v.stalls.active()) std::cout << stalls_line(det.profile, p, hw, v) << "\n";
        if (!lines.empty() || v.stalls.active()) std::cout << "\n";
    }
    if (det.moe && !e.training.moe_force_balance && r.status == PointStatus::ok) {
        // the routing law's share of p50 and p95 against the same point with the router forced
        // to balance (docs/moe.md, "Load imbalance"): the evaluator's routing_share_* where it
        // computed them, else a forced-balance evaluation here
        auto value = [](const Evaluator& ev, const PointResult& pr, const std::string& name) {
            for (std::size_t k = 0; k < pr.values.size(); ++k) {
                if (ev.schema()[k].name == name) return pr.values[k];
            }
            return std::numeric_limits<double>::quiet_NaN();
        };
        std::optional<Evaluator> forced;
        PointResult b;
        if (!e.evaluation.routing_share) {
            Experiment balanced = e;
            balanced.training.moe_force_balance = true;
            forced.emplace(balanced);
            b = forced->evaluate(p, 0);
        }
        for (const char* q : {"p50", "p95"}) {
            const std::string name = fmt::format("step_time_{}_s", q);
            const double with = value(evaluator, r, name);
            const double without =
                forced ? value(*forced, b, name)
                       : with * (1.0 - value(evaluator, r, fmt::format("routing_share_{}", q)));
            std::cout << fmt::format(
                "MoE routing imbalance: {} {:.1f} ms against {:.1f} ms forced balance: +{:.1f} ms "
                "({:.1f}% of {})\n",
                q, with * 1e3, without * 1e3, (with - without) * 1e3,
                100.0 * (with - without) / with, q);
        }
        std::cout << "\n";
    }
    std::vector<std::vector<Cell>> rows;
    for (std::size_t k = 0; k < r.values.size(); ++k) {
        rows.push_back({evaluator.schema()[k].name, r.values[k], evaluator.schema()[k].unit});
    }
    std::cout << format_table({{"metric", "", Align::left, 5},
                               {"value", "", Align::right, 5},
                               {"unit", "", Align::left, 5}},
                              rows);
    return r.status == PointStatus::infeasible ? kExitInfeasible : kExitOk;
}

}  // namespace

int run_cli(int argc, char** argv) {
    CLI::App app{"PRISM explorer: step-time distributions of LLM training configurations"};
    app.set_version_flag("--version", std::string("prism ") + PRISM_VERSION);
    app.require_subcommand(1);

    SweepOptions sweep;
    std::string time_limit;
    auto* sweep_cmd = app.add_subcommand("sweep", "evaluate every point of an experiment's space");
    sweep_cmd->add_option("experiment", sweep.experiment_path, "experiment TOML file")->required();
    sweep_cmd->add_option("-o,--output", sweep.output_path, "result file (HDF5)");
    sweep_cmd->add_flag("--overwrite", sweep.overwrite, "replace an existing result file");
    sweep_cmd->add_flag("--resume", sweep.resume, "continue an interrupted sweep in --output");
    sweep_cmd->add_flag("--dry-run", sweep.dry_run,
                        "print the space size, the points left after filtering and an estimate");
    sweep_cmd->add_option("--time-limit", time_limit,
                          "stop cleanly (exit 3, resumable) after this long: 3600, 45m, 3h50m");
    sweep_cmd->add_option("--progress-interval", sweep.progress_interval_s,
                          "seconds between progress lines when not on a terminal");
    sweep_cmd->add_option("--flush-interval", sweep.flush_interval_s,
                          "seconds between commits of rows to the file (default 2)");
    double obsolete_commit_lag_s = 0;
    sweep_cmd
        ->add_option("--max-commit-lag", obsolete_commit_lag_s,
                     "obsolete and ignored: every flush commits its rows")
        ->group("");
    sweep_cmd->add_flag("-q,--quiet", sweep.quiet, "no progress and no report at the end");

    std::string validate_path;
    auto* validate_cmd = app.add_subcommand("validate", "check an experiment file without running");
    validate_cmd->add_option("experiment", validate_path, "experiment TOML file")->required();

    std::string eval_path;
    std::string eval_point;
    auto* eval_cmd = app.add_subcommand("eval", "evaluate one point with a time/memory breakdown");
    eval_cmd->add_option("experiment", eval_path, "experiment TOML file")->required();
    eval_cmd->add_option("--point", eval_point, "dimension values: tp=8,pp=2,gpus=64,...");

    std::string status_path;
    auto* status_cmd = app.add_subcommand(
        "status", "print a result file's status; exit 0 complete, 3 resumable, 1 damaged");
    status_cmd->add_option("results", status_path, "result file (HDF5)")->required();

    std::string recover_path;
    std::string recover_output;
    bool recover_overwrite = false;
    auto* recover_cmd = app.add_subcommand(
        "recover", "copy the committed rows of a damaged result file that read back whole");
    recover_cmd->add_option("results", recover_path, "damaged result file (HDF5)")->required();
    recover_cmd->add_option("-o,--output", recover_output, "new result file")->required();
    recover_cmd->add_flag("--overwrite", recover_overwrite, "replace an existing output file");

    std::string report_path;
    ReportOptions report;
    std::string report_metrics;
    auto* report_cmd = app.add_subcommand("report", "print the Pareto front and top points");
    report_cmd->add_option("results", report_path, "result file (HDF5)")->required();
    report_cmd->add_option("--top", report.top, "rows in the ranking");
    report_cmd->add_option("--sort", report.sort_metric, "metric to rank by");
    report_cmd->add_flag("--desc", report.descending, "largest first");
    report_cmd->add_option("--metrics", report_metrics, "metrics to show, comma-separated");
    std::string report_html;
    report_cmd->add_option("--html", report_html,
                           "write the study's self-contained interactive page (HTML) instead "
                           "(runs scripts/prism_results.py html with /usr/bin/python3)");

    std::string metrics_path;
    auto* metrics_cmd = app.add_subcommand(
        "metrics", "list every metric with its unit and meaning (or an experiment's metrics)");
    metrics_cmd->add_option("experiment", metrics_path, "experiment TOML file (optional)");

    FitLrOptions fit_lr;
    auto* fit_lr_cmd = app.add_subcommand(
        "fit-lr", "fit loss curves per learning rate and pick the lowest predicted loss");
    fit_lr_cmd->add_option("curves", fit_lr.curves_path, "CSV: learning_rate,step,loss")
        ->required();
    fit_lr_cmd->add_option("--tau", fit_lr.tau_step, "step at which to compare the predictions")
        ->required();
    TraceCommand trace;
    auto* trace_cmd = add_trace_command(app, trace);
    StepsCommand steps;
    auto* steps_cmd = add_steps_command(app, steps);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? kExitOk : kExitBadInput;
    }

    try {
        if (*sweep_cmd) {
            if (!sweep.dry_run && sweep.output_path.empty()) {
                throw ConfigError("sweep: --output is required (or use --dry-run)");
            }
            if (!time_limit.empty()) sweep.time_limit_s = parse_duration_s(time_limit);
            install_stop_signals();  // before MPI starts: a signal at any moment stops cleanly
            MpiEnvironment mpi(&argc, &argv);
            return sweep_command(sweep, mpi);
        }
        if (*validate_cmd) return validate_command(validate_path);
        if (*status_cmd) return status_command(status_path);
        if (*recover_cmd) return recover_command(recover_path, recover_output, recover_overwrite);
        if (*eval_cmd) return eval_command(eval_path, eval_point);
        if (*metrics_cmd) return metrics_command(metrics_path);
        if (*fit_lr_cmd) return fit_lr_command(fit_lr, std::cout, std::cerr);
        if (*trace_cmd) return run_trace_command(trace);
        if (*steps_cmd) return run_steps_command(*steps_cmd, steps);
        if (*report_cmd && !report_html.empty()) {
            return write_html_report(report_path, report_html) == 0 ? kExitOk : kExitError;
        }
        if (*report_cmd) {
            std::stringstream in(report_metrics);
            std::string m;
            while (std::getline(in, m, ',')) {
                if (!m.empty()) report.metrics.push_back(m);
            }
            print_report(report_path, report, std::cout);
            return kExitOk;
        }
    } catch (const ConfigError& e) {
        std::cerr << "prism: error: " << e.what() << "\n";
        return kExitBadInput;
    } catch (const Error& e) {
        std::cerr << "prism: error: " << e.what() << "\n";
        return kExitError;
    } catch (const std::exception& e) {
        std::cerr << "prism: internal error: " << e.what() << "\n";
        return kExitError;
    }
    return kExitOk;
}

}  // namespace prism::explorer
