#include "explorer/sweep_command.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <random>

#include <fmt/format.h>

#include "explorer/chunk_evaluator.hpp"
#include "explorer/cli.hpp"
#include "explorer/design_space.hpp"
#include "explorer/front_verification.hpp"
#include "explorer/progress.hpp"
#include "explorer/pruning.hpp"
#include "explorer/report.hpp"
#include "explorer/result_sink.hpp"
#include "explorer/sweep_engine.hpp"
#include "io/experiment_loader.hpp"
#include "io/result_store.hpp"
#include "src/common/error.hpp"
#include "src/model/evaluate.hpp"

namespace prism::explorer {

namespace {

/// Points screened for a pruned sweep's pilot, and the most points it evaluates.
constexpr std::uint64_t kPilotScreened = 50'000;
constexpr std::size_t kPilotPoints = 4096;

std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig); }

void install_master_signals() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
}

/// Workers leave stopping to the master, which collects their chunks in flight first.
void ignore_stop_signals() {
    std::signal(SIGTERM, SIG_IGN);
    std::signal(SIGINT, SIG_IGN);
}

int broadcast_int(int value) {
    PRISM_MPI_CHECK(MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return value;
}

io::ResultHeader header_of(const Experiment& e, const DesignSpace& space) {
    io::ResultHeader h;
    h.program_version = PRISM_VERSION;
    h.model_version = kModelVersion;
    h.experiment_name = e.name;
    h.experiment_toml = e.text;
    h.seed = e.seed;
    h.space_size = space.size();
    h.histogram_bins =
        e.evaluation.histogram ? static_cast<std::size_t>(e.evaluation.histogram_bins) : 0;
    return h;
}

/// `--dry-run`: space size, what the filters keep, and an estimate of the run time from a
/// short sample of evaluations.
/// A pruned sweep's expected share of points skipped: the pilot of a sample (the front of its
/// points' bounds, at most `kDryPilot` evaluated) against the sample's bounds. A lower bound of
/// the sweep's share (its pilot is the front of more points). Also the pilot's time.
struct PruneEstimate {
    bool on = false;
    std::size_t sample = 0, pilot = 0;
    double share = 0, pilot_s = 0, screen_per_point_s = 0;
};

PruneEstimate estimate_pruning(const Experiment& e, const DesignSpace& space,
                               const Evaluator& evaluator, const Pruning& pruning) {
    constexpr std::uint64_t kDryScreened = 20'000;
    constexpr std::size_t kDryPilot = 256;
    PruneEstimate est;
    if (!pruning.enabled()) return est;
    est.on = true;
    const PilotProbe probe =
        probe_pilot(space, evaluator, pruning, kDryScreened, kDryPilot, e.seed, true);
    est.sample = probe.bounds.size();
    est.pilot = probe.pilot.size();
    est.screen_per_point_s = probe.screened ? probe.seconds / probe.screened : 0;
    std::vector<PointResult> rows;
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto i : probe.pilot) {
        try {
            rows.push_back(
                evaluator.evaluate(space.decode(i).point, i, space.stream_index(i), nullptr));
        } catch (const std::exception&) {
        }
    }
    est.pilot_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Pruning p = pruning;
    p.set_pilot(rows);
    std::size_t skipped = 0;
    for (const auto& [index, b] : probe.bounds) skipped += p.dominated(b) ? 1 : 0;
    est.share = est.sample ? static_cast<double>(skipped) / static_cast<double>(est.sample) : 0;
    return est;
}

int dry_run(const Experiment& e, const DesignSpace& space, const Evaluator& evaluator,
            const Pruning& pruning, int workers) {
    const std::uint64_t n = space.size();
    constexpr std::uint64_t kExact = 2'000'000;
    const bool exact = n <= kExact;
    const std::uint64_t probes = exact ? n : 200'000;
    std::mt19937_64 rng(e.seed);
    std::map<std::string, std::uint64_t> filtered;
    std::vector<std::uint64_t> feasible_sample;
    std::uint64_t kept = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t k = 0; k < probes; ++k) {
        const std::uint64_t index = exact ? k : rng() % n;
        const auto d = space.decode(index);
        if (d.filtered) {
            ++filtered[*d.filtered];
        } else {
            // a uniform sample of the kept points (reservoir): evaluation cost varies over
            // the space, and its first points are not typical of it
            ++kept;
            if (feasible_sample.size() < 400) {
                feasible_sample.push_back(index);
            } else if (const std::uint64_t r = rng() % kept; r < 400) {
                feasible_sample[r] = index;
            }
        }
    }
    const double filter_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double fraction = probes ? static_cast<double>(kept) / probes : 0;
    const double kept_total = fraction * static_cast<double>(n);

    // Time a sample spread over the space (evaluation cost varies across it).
    std::vector<std::uint64_t> sample;
    const std::size_t step = std::max<std::size_t>(1, feasible_sample.size() / 100);
    for (std::size_t i = 0; i < feasible_sample.size(); i += step)
        sample.push_back(feasible_sample[i]);
    // Each sampled point twice: as the first of its stream index (the step-time distribution
    // computed) and again from the step cache (the cost of the points sharing it).
    std::size_t evaluated = 0;
    double miss_s = 0, hit_s = 0;
    for (auto index : sample) {
        StepCache cache;
        const DesignPoint p = space.decode(index).point;
        const std::uint64_t stream = space.stream_index(index);
        auto timed = [&] {  // seconds of one evaluation (a failing point counts its time too)
            const auto t = std::chrono::steady_clock::now();
            try {
                evaluator.evaluate(p, index, stream, &cache);
            } catch (const std::exception&) {
            }
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
        };
        miss_s += timed();
        hit_s += timed();
        ++evaluated;
    }
    const double per_point = evaluated ? miss_s / evaluated : 0;
    const double per_hit = evaluated ? hit_s / evaluated : 0;
    // points sharing one stream index: the distribution is computed for one of them
    const double shared = static_cast<double>(space.points_per_stream());
    const double per_point_sweep = per_hit + (per_point - per_hit) / shared;
    const double filter_per_point = probes ? filter_s / probes : 0;
    const PruneEstimate prune = estimate_pruning(e, space, evaluator, pruning);
    // pruned: every point screened (the deterministic model), the share not skipped evaluated
    const double evaluated_share = prune.on ? 1.0 - prune.share : 1.0;
    const double total_s =
        (kept_total * (per_point_sweep * evaluated_share + prune.screen_per_point_s) +
         static_cast<double>(n) * filter_per_point) /
            std::max(1, workers) +
        prune.pilot_s;

    std::cout << fmt::format("experiment     {}\n", e.name);
    std::cout << fmt::format("space size     {} points ({} dimensions)\n", n,
                             space.dimension_count());
    if (exact) {
        std::cout << fmt::format("to evaluate    {} points; filtered {}\n", kept, n - kept);
    } else {
        const double se = std::sqrt(fraction * (1 - fraction) / probes) * static_cast<double>(n);
        std::cout << fmt::format(
            "to evaluate    ~{:.0f} points (+-{:.0f}, from {} random probes); filtered ~{:.0f}\n",
            kept_total, 2 * se, probes, static_cast<double>(n) - kept_total);
    }
    for (const auto& [reason, count] : filtered) {
        std::cout << fmt::format(
            "  filtered: {:<55} {}{}\n", reason, exact ? "" : "~",
            exact ? count : static_cast<std::uint64_t>(static_cast<double>(count) / probes * n));
    }
    std::cout << fmt::format("evaluation     {:.3g} ms per point (sample of {})\n", per_point * 1e3,
                             evaluated);
    if (shared > 1) {
        std::cout << fmt::format(
            "shared steps   {:.0f} points per step-time distribution (learning_rate, "
            "checkpoint_interval): {:.3g} ms per point in the sweep\n",
            shared, per_point_sweep * 1e3);
    }
    if (prune.on) {
        std::cout << fmt::format(
            "pruning        expected share skipped >= {:.1f}% (points whose bounds the front of "
            "a pilot dominates; pilot of {} points from a sample of {}, {:.2g} s)\n",
            100 * prune.share, prune.pilot, prune.sample, prune.pilot_s);
    } else if (e.evaluation.prune && !e.objectives.empty()) {
        std::cout << fmt::format("pruning        off: {}\n", pruning.off_reason());
    }
    std::cout << fmt::format("estimated run  {:.1f} s with {} worker{}\n", total_s, workers,
                             workers == 1 ? "" : "s");
    return kExitOk;
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
    const int workers = std::max(1, mpi.size() - 1);
    Experiment experiment;
    std::string text;
    int status = kExitOk;
    if (master) {
        try {
            experiment = io::load_experiment(options.experiment_path);
            text = experiment.text;
            DesignSpace probe(experiment);  // an empty or too large space is bad input
            if (!options.dry_run) {
                const bool exists = std::filesystem::exists(options.output_path);
                if (options.resume && !exists) {
                    throw ConfigError(options.output_path +
                                      ": cannot resume: the file does not exist");
                }
                if (exists && !options.resume && !options.overwrite) {
                    throw ConfigError(options.output_path +
                                      ": file exists (use --overwrite to replace it, or --resume "
                                      "to continue it)");
                }
            }
        } catch (const ConfigError& e) {
            std::cerr << "prism: error: " << e.what() << "\n";
            status = kExitBadInput;
        }
    }
    if (mpi.size() > 1) {
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

    if (options.dry_run) {
        if (!master) return kExitOk;
        return dry_run(experiment, space, evaluator, pruning, workers);
    }

    // The master opens the file before any work is handed out; workers learn whether it could.
    std::optional<io::ResultWriter> writer;
    if (master) {
        try {
            const io::ResultHeader header = header_of(experiment, space);
            if (options.resume) {
                writer.emplace(io::ResultWriter::open_resume(
                    options.output_path, header, point_columns(experiment), evaluator.schema()));
            } else {
                writer.emplace(io::ResultWriter::create(options.output_path, header,
                                                        point_columns(experiment),
                                                        evaluator.schema(), options.overwrite));
            }
        } catch (const Error& e) {
            std::cerr << "prism: error: " << e.what() << "\n";
            status =
                dynamic_cast<const IoError*>(&e) && options.resume ? kExitBadInput : kExitError;
        }
    }
    if (mpi.size() > 1) {
        status = broadcast_int(status);
        if (status != kExitOk) return status;
    } else if (status != kExitOk) {
        return status;
    }
    if (!master) {
        run_worker(evaluate);
        if (experiment.evaluation.verify_montecarlo) verify_front_worker(experiment, space);
        return kExitOk;
    }

    writer->set_max_commit_lag(options.max_commit_lag_s);
    install_master_signals();
    const std::uint64_t begin = writer->next_index();
    const bool resumed = options.resume;
    std::optional<ResultSink> sink;
    try {
        sink.emplace(experiment, space, std::move(*writer), resumed, options.output_path);
    } catch (const Error& e) {
        std::cerr << "prism: error: " << e.what() << "\n";
        if (mpi.size() > 1) mpi.abort(kExitError);
        return kExitError;
    }

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
    engine.stop_signal = &g_stop_signal;
    if (!options.quiet) {
        engine.progress = [&](std::uint64_t done) { progress.update(begin + done); };
    }

    if (resumed && begin > 0 && !options.quiet) {
        std::cerr << fmt::format("resuming {} at index {} of {}\n", options.output_path, begin,
                                 space.size());
    }
    // Pruning: the pilot (the front of the points' bounds) first, then its front decides which
    // points of the range are evaluated (explorer/pruning.hpp)
    std::map<std::uint64_t, PointResult> pilot_rows;
    std::vector<double> pilot_front;
    bool front_ready = false;
    PilotProbe probe;
    if (pruning.enabled()) {
        probe = probe_pilot(space, evaluator, pruning, kPilotScreened, kPilotPoints,
                            experiment.seed, false);
        engine.pilot = probe.pilot;
        engine.pilot_result = [&](ChunkResult&& r) {
            for (auto& row : r.rows) pilot_rows[row.index] = std::move(row);
        };
        engine.prepare = [&](WorkOrder& order) {
            if (!front_ready) {
                std::vector<PointResult> rows;
                for (const auto& [index, row] : pilot_rows) rows.push_back(row);
                pruning.set_pilot(rows);
                pilot_front = pruning.front_values();
                sink->set_pruning(&pruning, pilot_rows);
                front_ready = true;
            }
            order.prune = !pruning.violated();
            if (order.prune) order.front = pilot_front;
            for (auto it = pilot_rows.lower_bound(order.begin);
                 it != pilot_rows.end() && it->first < order.end; ++it) {
                order.known.push_back(it->first);
            }
        };
        if (!options.quiet) {
            std::cerr << fmt::format(
                "pruning: a pilot of {} points (the front of {} points' bounds{}) first\n",
                probe.pilot.size(), probe.screened, probe.whole_space ? "" : ", a sample");
        }
    } else if (!options.quiet && experiment.evaluation.prune && !experiment.objectives.empty()) {
        std::cerr << fmt::format("pruning: off: {}\n", pruning.off_reason());
    }
    EngineReport report;
    try {
        report = mpi.size() > 1 ? run_master(engine, workers, *sink)
                                : run_serial(engine, evaluate, *sink);
    } catch (const Error& e) {
        std::cerr << "prism: error: " << e.what() << "\n";
        try {
            sink->finish("failed");
        } catch (const Error& e2) {
            std::cerr << "prism: error: " << e2.what() << "\n";
        }
        std::cerr << "prism: the file keeps every point committed before the error; continue "
                     "with --resume\n";
        if (mpi.size() > 1) mpi.abort(kExitError);
        return kExitError;
    }
    if (!options.quiet) progress.finish();

    int code = kExitOk;
    std::string file_status = "complete";
    if (report.outcome == EngineOutcome::aborted) {
        const auto& [index, message] = *sink->abort_failure();
        std::cerr << fmt::format(
            "prism: error: point {} ({}) failed and on_error = \"abort\": {}\n", index,
            describe_point(experiment, space.decode(index).point), message);
        file_status = "failed";
        code = kExitError;
    } else if (report.outcome == EngineOutcome::worker_failed) {
        std::cerr << fmt::format("prism: error: {}\n", report.worker_failure);
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
    std::vector<std::uint64_t> front;
    bool closed = true;
    try {
        front = sink->finish(file_status);
    } catch (const Error& e) {
        std::cerr << "prism: error: " << e.what() << "\n";
        if (report.workers_still_busy) mpi.abort(kExitError);
        closed = false;
        code = kExitError;
    }
    if (report.workers_still_busy) {
        std::cerr << "prism: workers did not finish their chunks in time; ending them\n";
        mpi.abort(code);
    }
    if (experiment.evaluation.verify_montecarlo) {
        // the workers wait for the front to verify: an empty one releases them
        if (code != kExitOk) front.clear();
        try {
            if (!verify_front(experiment, space, front, options.output_path, mpi, &g_stop_signal,
                              std::cerr, options.quiet)) {
                std::cerr << "prism: verification stopped by a signal; the sweep's results are "
                             "complete, /verify was not written (run again with --resume to "
                             "verify)\n";
                code = kExitInterrupted;
            }
        } catch (const Error& e) {
            std::cerr << "prism: error: " << e.what() << "\n";
            if (mpi.size() > 1) mpi.abort(kExitError);
            code = kExitError;
        }
    }
    if (!closed) return code;
    if (!options.quiet) {
        print_summary(report, *sink, begin, static_cast<std::uint64_t>(workers));
        if (code == kExitOk) {
            ReportOptions ropt;
            ropt.top = 5;
            print_report(options.output_path, ropt, std::cout);
        }
    }
    return code;
}

}  // namespace prism::explorer
