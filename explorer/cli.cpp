#include "explorer/cli.hpp"

#include <iostream>
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
#include "io/result_store.hpp"
#include "io/work_limits.hpp"
#include "src/common/error.hpp"
#include "src/cotune/cotune.hpp"
#include "src/model/design_space.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/evaluate.hpp"

namespace prism::explorer {

namespace {

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
        std::cout << fmt::format("hardware    {}: {} ({} per node)\n", h.name, h.gpu.name,
                                 h.gpus_per_node);
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
    return kExitOk;
}

int eval_command(const std::string& path, const std::string& point_text) {
    const Experiment e = io::load_experiment(path);
    const DesignPoint p = io::parse_point_assignments(e, point_text);
    std::cout << fmt::format("point: {} ({} GPUs)\n", describe_point(e, p), p.gpus());
    std::optional<std::string> why = filter_reason(e, p);
    if (!why) why = io::work_limit_reason(e, p);
    if (why) {
        std::cout << fmt::format("filtered before evaluation: {}\n", *why);
        return kExitBadInput;
    }
    const DeterministicResult det = evaluate_deterministic(e, p);
    std::cout << format_breakdown(det) << "\n";
    const Evaluator evaluator(e);
    const PointResult r = evaluator.evaluate(p, 0);
    if (r.status != PointStatus::ok) std::cout << fmt::format("status: {}\n", r.reason);
    std::vector<std::vector<Cell>> rows;
    for (std::size_t k = 0; k < r.values.size(); ++k) {
        rows.push_back({evaluator.schema()[k].name, r.values[k], evaluator.schema()[k].unit});
    }
    std::cout << format_table({{"metric", "", Align::left, 5},
                               {"value", "", Align::right, 5},
                               {"unit", "", Align::left, 5}},
                              rows);
    return kExitOk;
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
