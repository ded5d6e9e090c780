#include "explorer/sweep_command.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "explorer/chunk_evaluator.hpp"
#include "explorer/cli.hpp"
#include "explorer/design_space.hpp"
#include "explorer/dry_run.hpp"
#include "explorer/front_verification.hpp"
#include "explorer/progress.hpp"
#include "explorer/pruning.hpp"
#include "explorer/report.hpp"
#include "explorer/result_commands.hpp"
#include "explorer/result_sink.hpp"
#include "explorer/stop_signals.hpp"
#include "explorer/sweep_engine.hpp"
#include "io/experiment_fingerprint.hpp"
#include "io/experiment_loader.hpp"
#include "io/io_errors.hpp"
#include "io/result_store.hpp"
#include "src/common/error.hpp"
#include "src/model/evaluate.hpp"

namespace prism::explorer {

namespace {

/// Points screened for a pruned sweep's pilot, and the most points it evaluates.
constexpr std::uint64_t kPilotScreened = 50'000;
constexpr std::size_t kPilotPoints = 4096;

int broadcast_int(int value) {
    PRISM_MPI_CHECK(MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return value;
}

void print_error(const std::string& message) { std::cerr << "prism: error: " << message << "\n"; }

/// The one line for a failed write of the result file: the operating system's reason, what the
/// file keeps, and how to go on.
void print_write_error(const std::exception_ptr& error, const std::string& path,
                       std::uint64_t rows_committed) {
    try {
        std::rethrow_exception(error);
    } catch (const io::StorageError& e) {
        const bool full = e.error_number() == ENOSPC || e.error_number() == EDQUOT;
        print_error(fmt::format("{}: {}; {} rows committed, continue with --resume{}", path,
                                e.reason(), rows_committed, full ? " after freeing space" : ""));
    } catch (const Error& e) {
        print_error(
            fmt::format("{}; {} rows committed, continue with --resume", e.what(), rows_committed));
    }
}

io::ResultHeader header_of(const Experiment& e, const DesignSpace& space) {
    io::ResultHeader h;
    h.program_version = PRISM_VERSION;
    h.model_version = kModelVersion;
    h.experiment_name = e.name;
    h.experiment_toml = e.text;
    h.experiment_sha256 = io::experiment_fingerprint(e.text, e.included);
    for (const IncludedFile& f : e.included) h.included_files.emplace_back(f.name, f.text);
    h.seed = e.seed;
    h.space_size = space.size();
    h.histogram_bins =
        e.evaluation.histogram ? static_cast<std::size_t>(e.evaluation.histogram_bins) : 0;
    if (!e.objectives.empty()) {
        io::ParetoSpec front{"objectives", {}, {}, {}};
        for (const auto& o : e.objectives) {
            front.objectives.push_back(o.metric);
            front.senses.push_back(o.maximize ? "max" : "min");
        }
        const ScenarioKey scenarios(e);
        if (scenarios.enabled()) front.scenarios = scenarios.dimensions();
        h.pareto_sets.push_back(std::move(front));
    }
    return h;
}

/// What the command line asks of the output file, checked before anything is touched.
void check_output(const SweepOptions& options) {
    const std::string& path = options.output_path;
    if (options.resume && options.overwrite) {
        throw ConfigError("--resume and --overwrite exclude each other (--resume continues " +
                          path + ", --overwrite replaces it)");
    }
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    const bool exists = std::filesystem::exists(status);
    if (exists && !std::filesystem::is_regular_file(status)) {
        throw ConfigError(path + ": not a regular file (a result file must be one)");
    }
    if (options.resume && !exists) {
        throw ConfigError(path + ": cannot resume: the file does not exist");
    }
    if (exists) {
        try {
            io::check_not_in_use(path);  // whatever is asked of it, a file in use is not touched
        } catch (const io::FileInUseError& e) {
            throw ConfigError(e.what());
        }
    }
    if (exists && !options.resume && !options.overwrite) {
        throw ConfigError(path +
                          ": file exists (use --overwrite to replace it, or --resume to "
                          "continue it)");
    }
}

/// Stage 1 (rank 0): the experiment and the command line.
int load_inputs(const SweepOptions& options, Experiment& experiment) {
    try {
        experiment = io::load_experiment(options.experiment_path);
        DesignSpace probe(experiment);  // an empty or too large space is bad input
        if (!options.dry_run) check_output(options);
    } catch (const ConfigError& e) {
        print_error(e.what());
        return kExitBadInput;
    }
    return kExitOk;
}

/// Stage 2 (rank 0): creates or resumes the result file (claiming it first) and the sink that
/// feeds it; on a resume, filtered counts that a killed writer left ahead of next_index are
/// recounted from the design space.
int open_results(const SweepOptions& options, const Experiment& experiment,
                 const DesignSpace& space, const Evaluator& evaluator,
                 std::optional<ResultSink>& sink) {
    try {
        const io::ResultHeader header = header_of(experiment, space);
        std::optional<io::ResultWriter> writer;
        if (options.resume) {
            const io::FilteredRecount recount = [&](std::uint64_t next_index) {
                return count_filtered(space, 0, next_index);
            };
            writer.emplace(io::ResultWriter::open_resume(options.output_path, header,
                                                         point_columns(experiment),
                                                         evaluator.schema(), recount));
        } else {
            writer.emplace(io::ResultWriter::create(
                options.output_path, header, point_columns(experiment), evaluator.schema(),
                options.overwrite, io::chunk_rows_for(space.size())));
        }
        sink.emplace(experiment, space, std::move(*writer), options.resume);
    } catch (const io::FileInUseError& e) {
        print_error(e.what());
        return kExitBadInput;
    } catch (const io::StorageError& e) {
        print_error(e.what());
        return kExitError;
    } catch (const ConfigError& e) {
        print_error(e.what());
        return kExitBadInput;
    } catch (const IoError& e) {
        // A file that cannot be continued: say what is wrong with it and what can be done.
        const std::string damaged =
            options.resume ? damaged_file_message(options.output_path) : std::string();
        print_error(damaged.empty() ? std::string(e.what()) : damaged);
        return options.resume ? kExitBadInput : kExitError;
    } catch (const Error& e) {
        print_error(e.what());
        return kExitError;
    }
    return kExitOk;
}

/// Pruning (explorer/pruning.hpp): the pilot (the front of the points' bounds) is evaluated
/// first, then its front decides which points of the range are evaluated.
void set_up_pruning(const SweepOptions& options, const Experiment& experiment,
                    const DesignSpace& space, const Evaluator& evaluator, Pruning& pruning,
                    ResultSink& sink, EngineOptions& engine) {
    if (!pruning.enabled()) {
        if (!options.quiet && experiment.evaluation.prune && !experiment.objectives.empty()) {
            std::cerr << fmt::format("pruning: off: {}\n", pruning.off_reason());
        }
        return;
    }
    const PilotProbe probe = probe_pilot(space, evaluator, pruning, kPilotScreened, kPilotPoints,
                                         experiment.seed, false);
    engine.pilot = probe.pilot;
    // shared by the engine's callbacks, which outlive this function
    struct PilotState {
        std::map<std::uint64_t, PointResult> rows;
        std::vector<double> front;
        bool front_ready = false;
    };
    auto state = std::make_shared<PilotState>();
    engine.pilot_result = [state](ChunkResult&& r) {
        for (auto& row : r.rows) state->rows[row.index] = std::move(row);
    };
    engine.prepare = [state, &pruning, &sink](WorkOrder& order) {
        if (!state->front_ready) {
            std::vector<PointResult> rows;
            for (const auto& [index, row] : state->rows) rows.push_back(row);
            pruning.set_pilot(rows);
            state->front = pruning.front_values();
            sink.set_pruning(&pruning, state->rows);
            state->front_ready = true;
        }
        order.prune = !pruning.violated();
        if (order.prune) order.front = state->front;
        for (auto it = state->rows.lower_bound(order.begin);
             it != state->rows.end() && it->first < order.end; ++it) {
            order.known.push_back(it->first);
        }
    };
    if (!options.quiet) {
        std::cerr << fmt::format(
            "pruning: a pilot of {} points (the front of {} points' bounds{}) first\n",
            probe.pilot.size(), probe.screened, probe.whole_space ? "" : ", a sample");
    }
}

/// Stage 3 (rank 0): the engine, alone or as master, with progress.
EngineReport run_engine(const SweepOptions& options, int ranks, const DesignSpace& space,
                        const ChunkFunction& evaluate, ResultSink& sink, std::uint64_t begin,
                        const std::function<void(EngineOptions&)>& configure) {
    const bool terminal = !options.quiet && isatty(STDERR_FILENO) == 1;
    const auto clock0 = std::chrono::steady_clock::now();
    Progress progress(
        space.size(), std::cerr, terminal,
        [clock0] {
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - clock0).count();
        },
        options.progress_interval_s);
    progress.start_at(begin);  // rates count only this run's points

    EngineOptions engine;
    engine.begin = begin;
    engine.end = space.size();
    engine.time_limit_s = options.time_limit_s;
    engine.flush_interval_s = options.flush_interval_s;
    engine.stop_signal = &stop_signal();
    if (!options.quiet) {
        engine.progress = [&](std::uint64_t done) { progress.update(begin + done); };
        engine.worker_ready = [](int rank, const std::string& where) {
            std::cerr << fmt::format("prism: worker rank {} is {}\n", rank, where);
        };
    }
    if (options.resume && begin > 0 && !options.quiet) {
        std::cerr << fmt::format("resuming {} at index {} of {}\n", options.output_path, begin,
                                 space.size());
    }
    configure(engine);
    EngineReport report =
        ranks > 1 ? run_master(engine, ranks - 1, sink) : run_serial(engine, evaluate, sink);
    if (!options.quiet) progress.finish();
    return report;
}

/// Stage 4 (rank 0): what the run's outcome means for the user, the file and the exit status;
/// finishes the file (Pareto front, filtered counts, status) unless a write failed.
int conclude(const SweepOptions& options, const Experiment& experiment, const DesignSpace& space,
             const EngineReport& report, ResultSink& sink, std::vector<std::uint64_t>& front) {
    const std::string& path = options.output_path;
    if (report.consumer_error) {
        print_write_error(report.consumer_error, path, sink.committed_rows());
        return kExitError;
    }
    int code = kExitOk;
    std::string file_status = "complete";
    if (report.outcome == EngineOutcome::aborted) {
        const auto& [index, message] = *sink.abort_failure();
        print_error(fmt::format("point {} ({}) failed and on_error = \"abort\": {}", index,
                                describe_point(experiment, space.decode(index).point), message));
        file_status = "failed";
        code = kExitError;
    } else if (report.outcome == EngineOutcome::worker_failed) {
        print_error(report.worker_failure);
        std::cerr << fmt::format(
            "prism: stopped at index {} of {}; the file keeps every point committed before the "
            "error; continue with --resume\n",
            report.next_index, space.size());
        file_status = "failed";
        code = kExitError;
    } else if (report.outcome == EngineOutcome::interrupted) {
        file_status = "interrupted";
        code = kExitInterrupted;
        std::cerr << fmt::format("prism: {} at index {} of {}; continue with --resume\n",
                                 report.stop_signal != 0
                                     ? fmt::format("stopped by signal {}", report.stop_signal)
                                     : std::string("stopped by --time-limit"),
                                 report.next_index, space.size());
    }
    try {
        front = sink.finish(file_status);
    } catch (const Error&) {
        print_write_error(std::current_exception(), path, sink.committed_rows());
        return kExitError;
    }
    return code;
}

/// Stage 5 (rank 0, `[evaluation] verify = "montecarlo"`): the front of a complete sweep by
/// Monte Carlo into /verify (explorer/front_verification.hpp); with any other outcome the
/// workers are only released. The verification stops as the sweep does, on SIGTERM/SIGINT or
/// when --time-limit (counted from the sweep's start, `t0`) runs out: exit 3, no /verify, and
/// `prism status` calls the file resumable (--resume verifies again). Sets `workers_busy` when a
/// worker was still on its point after the grace period. Returns the job's exit status.
int verify_the_front(const SweepOptions& options, const Experiment& experiment,
                     const DesignSpace& space, const std::vector<std::uint64_t>& front, int code,
                     std::chrono::steady_clock::time_point t0, MpiEnvironment& mpi,
                     bool& workers_busy) {
    if (code != kExitOk) {
        release_verify_workers(mpi);
        return code;
    }
    const auto time_up = [&] {
        return options.time_limit_s > 0 &&
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >=
                   options.time_limit_s;
    };
    const StopRequested stop = [&] { return stop_signal().load() != 0 || time_up(); };
    try {
        // the file stays claimed, as while the sweep wrote it (released by finish() a moment
        // ago), until /verify is written
        const io::ResultFileClaim claim(options.output_path);
        const VerifyOutcome outcome = verify_front(experiment, space, front, options.output_path,
                                                   mpi, stop, std::cerr, options.quiet);
        if (outcome != VerifyOutcome::written) {
            const int sig = stop_signal().load();
            std::cerr << fmt::format(
                "prism: verification stopped by {}; the sweep's results are complete, /verify "
                "was not written; continue with --resume to verify\n",
                sig != 0 ? fmt::format("signal {}", sig) : std::string("--time-limit"));
            workers_busy = outcome == VerifyOutcome::workers_busy;
            return kExitInterrupted;
        }
    } catch (const Error& e) {
        print_error(e.what());
        if (mpi.size() > 1) mpi.abort(kExitError);
        return kExitError;
    }
    return code;
}

void print_summary(const EngineReport& report, const ResultSink& sink, std::uint64_t begin,
                   std::uint64_t workers) {
    const double points = static_cast<double>(report.next_index - begin);
    std::uint64_t filtered = 0;
    for (const auto& [reason, count] : sink.filtered()) filtered += count;
    std::cout << fmt::format(
        "processed {} points in {:.2f} s ({:.0f} points/s, {} worker{}); rows {}, filtered {}, "
        "failed {}, dominated {}\n",
        report.next_index - begin, report.wall_s, points / std::max(report.wall_s, 1e-9), workers,
        workers == 1 ? "" : "s", sink.rows_written(), filtered, sink.failures(), sink.dominated());
    if (workers > 1 || report.wall_s > 0) {
        rusage usage{};
        getrusage(RUSAGE_SELF, &usage);
        std::cout << fmt::format(
            "master cpu {:.3f} s over {:.2f} s wall ({:.1f}% of a core), peak rss {:.1f} MiB\n",
            report.master_cpu_s, report.wall_s,
            100.0 * report.master_cpu_s / std::max(report.wall_s, 1e-9),
            static_cast<double>(usage.ru_maxrss) / 1024.0);
    }
}

}  // namespace

double parse_duration_s(const std::string& text) {
    double total = 0;
    std::size_t i = 0;
    bool any = false;
    while (i < text.size()) {
        std::size_t used = 0;
        double value = 0;
        try {
            value = std::stod(text.substr(i), &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || value < 0) {
            throw ConfigError("--time-limit: '" + text +
                              "' is not a duration (e.g. 3600, 90s, 15m, 3h50m, 1d)");
        }
        i += used;
        double unit = 1;
        if (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) {
            const char u = text[i++];
            if (u == 's') {
                unit = 1;
            } else if (u == 'm') {
                unit = 60;
            } else if (u == 'h') {
                unit = 3600;
            } else if (u == 'd') {
                unit = 86400;
            } else {
                throw ConfigError("--time-limit: unknown unit '" + std::string(1, u) + "' in '" +
                                  text + "' (use s, m, h, d)");
            }
        }
        total += value * unit;
        any = true;
    }
    if (!any) throw ConfigError("--time-limit: empty duration");
    return total;
}

int sweep_command(const SweepOptions& options, MpiEnvironment& mpi) {
    const bool master = mpi.rank() == 0;
    const int ranks = mpi.size();
    Experiment experiment;
    std::string text;
    int status = master ? load_inputs(options, experiment) : kExitOk;
    if (master && status == kExitOk) text = experiment.text;
    if (ranks > 1) {
        status = broadcast_int(status);
        if (status != kExitOk) return status;
        broadcast_string(text);
    } else if (status != kExitOk) {
        return status;
    }
    if (!master) {
        ignore_stop_signals();
        experiment = io::parse_experiment(text, options.experiment_path);
    }

    const DesignSpace space(experiment);
    const Evaluator evaluator(experiment);
    Pruning pruning(experiment, evaluator.schema());
    const ChunkEvaluator chunk_evaluator(space, evaluator, &pruning);
    const ChunkFunction evaluate = [&](const WorkOrder& order) { return chunk_evaluator(order); };
    const int workers = std::max(1, ranks - 1);
    if (options.dry_run) {
        if (master) restore_stop_signals();  // nothing to keep: a signal ends it at once
        return master ? dry_run(experiment, space, evaluator, pruning, workers) : kExitOk;
    }

    // The master claims and opens the file before any work is handed out; workers learn
    // whether it could, and later the job's exit status, which every rank returns.
    std::optional<ResultSink> sink;
    if (master) status = open_results(options, experiment, space, evaluator, sink);
    if (ranks > 1) {
        status = broadcast_int(status);
        if (status != kExitOk) return status;
    } else if (status != kExitOk) {
        return status;
    }
    const bool verify = experiment.evaluation.verify_montecarlo;
    if (!master) {
        // after the sweep, the front's verification (the master releases the workers with an
        // empty front when there is nothing to verify)
        return run_worker(evaluate, [&] {
            if (verify) verify_front_worker(experiment, space);
        });
    }

    const std::uint64_t begin = sink->next_index();
    const auto t0 = std::chrono::steady_clock::now();
    const EngineReport report =
        run_engine(options, ranks, space, evaluate, *sink, begin, [&](EngineOptions& engine) {
            set_up_pruning(options, experiment, space, evaluator, pruning, *sink, engine);
        });
    std::vector<std::uint64_t> front;
    int code = conclude(options, experiment, space, report, *sink, front);
    bool workers_busy = report.workers_still_busy;
    if (verify && !workers_busy) {
        code = verify_the_front(options, experiment, space, front, code, t0, mpi, workers_busy);
    }
    if (!options.quiet && !report.consumer_error) {
        print_summary(report, *sink, begin, static_cast<std::uint64_t>(workers));
        if (code == kExitOk) {
            ReportOptions ropt;
            ropt.top = 5;
            print_report(options.output_path, ropt, std::cout);
        }
    }
    if (ranks > 1) {
        if (workers_busy) {
            std::cerr << "prism: workers did not finish their work in time; ending them\n";
            mpi.abort(code);
        }
        // After it forwards a signal, MPICH's mpirun keeps the exit statuses of only some
        // ranks: with every rank returning 3 it still returned 0 in 2 of 60 trials (an MPI
        // test program; 1 of 40 for prism), while MPI_Abort's code came back in 40 of 40. So a
        // sweep stopped by a signal ends, its file closed, with MPI_Abort(3), and MPICH adds
        // its one line "Abort(3) on node 0 ...".
        if (code != kExitOk && stop_signal().load() != 0) {
            std::cerr.flush();
            std::cout.flush();
            mpi.abort(code);
        }
        send_exit_status(ranks - 1, code);
    }
    return code;
}

}  // namespace prism::explorer
