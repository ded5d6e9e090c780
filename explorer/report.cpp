#include "explorer/report.hpp"
#include "explorer/scenarios.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "explorer/table.hpp"
#include "io/experiment_loader.hpp"
#include "io/result_store.hpp"
#include "io/verify_store.hpp"
#include "src/common/error.hpp"

namespace prism::explorer {

namespace {

/// Result-file column shown for a [space] dimension.
std::string column_of_dimension(const std::string& dim) {
    if (dim == "checkpoint_interval") return "checkpoint_interval_s";
    return dim;
}

struct Loaded {
    std::vector<std::string> design;  ///< point columns to show
    std::vector<std::uint64_t> index;
    std::vector<PointStatus> status;
    std::map<std::string, std::vector<Cell>> design_cells;
    std::map<std::string, std::vector<double>> metric;
    std::map<std::string, std::string> metric_unit;
};

std::vector<Cell> cells_of(const io::ResultReader& reader, const io::ColumnSpec& c) {
    std::vector<Cell> cells;
    if (c.type == io::ColumnSpec::Type::float64) {
        for (double v : reader.float_column(c.name)) cells.emplace_back(v);
    } else if (c.type == io::ColumnSpec::Type::enumeration) {
        for (auto v : reader.int_column(c.name)) {
            cells.emplace_back(v >= 0 && static_cast<std::size_t>(v) < c.labels.size()
                                   ? c.labels[v]
                                   : std::string("?"));
        }
    } else {
        for (auto v : reader.int_column(c.name)) cells.emplace_back(v);
    }
    return cells;
}

std::vector<std::vector<Cell>> table_rows(const Loaded& data,
                                          const std::vector<std::string>& metrics,
                                          const std::vector<std::size_t>& rows) {
    std::vector<std::vector<Cell>> out;
    for (std::size_t r : rows) {
        std::vector<Cell> line{Cell(data.index[r])};
        for (const auto& d : data.design) line.push_back(data.design_cells.at(d)[r]);
        for (const auto& m : metrics) line.emplace_back(data.metric.at(m)[r]);
        out.push_back(std::move(line));
    }
    return out;
}

std::vector<TableColumn> table_columns(const Loaded& data,
                                       const std::vector<std::string>& metrics) {
    std::vector<TableColumn> cols{{"index", "", Align::right, 4}};
    for (const auto& d : data.design) cols.push_back({d, "", Align::automatic, 4});
    for (const auto& m : metrics) cols.push_back({m, data.metric_unit.at(m), Align::right, 4});
    return cols;
}

/// The /verify table (`[evaluation] verify = "montecarlo"`): per front point, the KS distance and
/// the analytic and Monte Carlo mean, p95 and p99 with their relative difference.
void print_verification(const std::vector<io::VerifiedPoint>& rows, std::ostream& out) {
    if (rows.empty()) return;
    const int samples = rows.front().verification.samples;
    out << fmt::format(
        "\nMonte Carlo verification of the front ({} points, {} samples each; diff = analytic / "
        "Monte Carlo - 1)\n",
        rows.size(), samples);
    std::vector<TableColumn> cols{{"index", "", Align::right, 4}, {"ks", "1", Align::right, 3}};
    for (const char* q : {"mean", "p95", "p99"}) {
        cols.push_back({fmt::format("{}_analytic", q), "s", Align::right, 5});
        cols.push_back({fmt::format("{}_mc", q), "s", Align::right, 5});
        cols.push_back({fmt::format("{}_diff", q), "%", Align::right, 2});
    }
    std::vector<std::vector<Cell>> lines;
    const auto percent = [](double a, double m) { return 100 * (a / m - 1); };
    for (const auto& r : rows) {
        const auto& v = r.verification;
        lines.push_back({Cell(r.index), Cell(v.ks), Cell(v.analytic_mean_s), Cell(v.mc_mean_s),
                         Cell(percent(v.analytic_mean_s, v.mc_mean_s)), Cell(v.analytic_p95_s),
                         Cell(v.mc_p95_s), Cell(percent(v.analytic_p95_s, v.mc_p95_s)),
                         Cell(v.analytic_p99_s), Cell(v.mc_p99_s),
                         Cell(percent(v.analytic_p99_s, v.mc_p99_s))});
    }
    out << format_table(cols, lines);
}

/// The MoE columns a sweep of an MoE experiment writes (docs/moe_outputs.md), in this order;
/// files of dense experiments, and files written before them, have none.
constexpr const char* kMoeColumns[] = {
    "moe_router_s",      "moe_expert_compute_s", "moe_dispatch_s",   "moe_combine_s",
    "moe_a2a_exposed_s", "routing_share_p50",    "routing_share_p95"};

/// The MoE lines and the routing imbalance's share of p50 and p95 of a table's points (a
/// front's, or the top N's: `of` names it), when the file has them.
void print_moe_lines(const io::ResultReader& reader, Loaded& data,
                     const std::vector<std::size_t>& rows, const std::string& of,
                     std::ostream& out) {
    const MetricSchema& schema = reader.metric_schema();
    std::vector<std::string> shown;
    for (const char* m : kMoeColumns) {
        const int k = find_metric(schema, m);
        if (k < 0) continue;
        shown.push_back(m);
        if (!data.metric.count(m)) data.metric[m] = reader.metric(m);
        data.metric_unit[m] = schema[k].unit;
    }
    if (shown.empty()) return;
    const bool shares = find_metric(schema, "routing_share_p95") >= 0;
    out << fmt::format(
        "\nMoE lines of {} (the busiest stage, seconds per step: router and expert compute "
        "are part of its compute, dispatch and combine before overlap, of which a2a_exposed stays "
        "exposed{})\n",
        of,
        shares ? "; routing_share = (p - p with moe_force_balance = true) / p, 0 without a routing "
                 "law"
               : "");
    out << format_table(table_columns(data, shown), table_rows(data, shown, rows));
}

/// A front of scenario dimensions: one front per scenario, then the robust pick
/// (explorer/scenarios.hpp).
void print_scenario_fronts(const io::ResultReader& reader, const Experiment& experiment,
                           const io::ParetoSet& set, const std::string& objectives,
                           const std::vector<std::size_t>& rows, const Loaded& data,
                           const std::vector<std::string>& shown, std::ostream& out) {
    Experiment keyed = experiment;
    keyed.space.scenarios = set.scenarios;  // the file's word, not a re-derived default
    const ScenarioKey key(keyed);
    std::string dims;
    for (const auto& d : set.scenarios) dims += (dims.empty() ? "" : ", ") + d;
    out << fmt::format("\nPareto front '{}' ({}) per scenario of {}: {} points in {} scenarios\n",
                       set.name, objectives, dims, rows.size(), key.count());
    for (std::uint64_t s = 0; s < key.count(); ++s) {
        std::vector<std::size_t> mine;
        for (const std::size_t r : rows) {
            if (key.of(data.index[r]) == s) mine.push_back(r);
        }
        out << fmt::format("\nscenario {}: {} points\n", key.label(s), mine.size());
        out << format_table(table_columns(data, shown), table_rows(data, shown, mine));
    }
    // the robust pick over every ok row
    std::vector<std::vector<double>> columns;
    std::vector<bool> maximize;
    for (std::size_t k = 0; k < set.objectives.size(); ++k) {
        columns.push_back(reader.metric(set.objectives[k]));
        maximize.push_back(set.senses[k] == "max");
    }
    std::vector<ScenarioRow> candidates;
    for (std::size_t r = 0; r < data.index.size(); ++r) {
        if (data.status[r] != PointStatus::ok) continue;
        ScenarioRow row{
            data.index[r], key.configuration_of(data.index[r]), key.of(data.index[r]), {}};
        bool finite = true;
        for (const auto& c : columns) {
            row.objectives.push_back(c[r]);
            finite = finite && std::isfinite(c[r]);
        }
        if (finite) candidates.push_back(std::move(row));
    }
    const RobustPick pick = robust_pick(candidates, maximize, key.count());
    if (!pick.found) {
        out << fmt::format("\nRobust pick across scenarios: none ({})\n", pick.why_not);
        return;
    }
    std::string regrets;
    for (std::uint64_t s = 0; s < key.count(); ++s) {
        regrets += fmt::format("{}{}: {:.2f}%", s ? ", " : "", key.label(s), 100 * pick.regret[s]);
    }
    out << fmt::format(
        "\nRobust pick across scenarios (least worst-case regret against each scenario's front): "
        "worst regret {:.2f}% ({})\n",
        100 * pick.worst_regret, regrets);
    std::map<std::uint64_t, std::size_t> row_of;
    for (std::size_t r = 0; r < data.index.size(); ++r) row_of[data.index[r]] = r;
    std::vector<std::size_t> picked;
    for (const auto i : pick.index) picked.push_back(row_of.at(i));
    out << format_table(table_columns(data, shown), table_rows(data, shown, picked));
}

}  // namespace

void print_report(const std::string& path, const ReportOptions& options, std::ostream& out) {
    io::ResultReader reader(path);
    const auto& h = reader.header();
    const Experiment experiment =
        io::parse_experiment(h.experiment_toml, path + ":experiment_toml");

    Loaded data;
    data.index = reader.index();
    data.status = reader.status();
    for (const auto& dim : experiment.space.dimensions) {
        data.design.push_back(column_of_dimension(dim.name));
        if (dim.name == "dp") data.design.push_back("gpus");
    }
    if (data.design.empty()) data.design = {"tp", "pp", "dp"};
    for (const auto& c : reader.point_columns()) {
        if (std::find(data.design.begin(), data.design.end(), c.name) != data.design.end()) {
            data.design_cells[c.name] = cells_of(reader, c);
        }
    }
    data.design.erase(
        std::remove_if(data.design.begin(), data.design.end(),
                       [&](const std::string& d) { return data.design_cells.count(d) == 0; }),
        data.design.end());

    std::vector<std::string> metrics = options.metrics;
    if (metrics.empty()) {
        for (const auto& o : experiment.objectives) metrics.push_back(o.metric);
        for (const char* m :
             {"step_time_s", "step_time_p99_s", "tokens_per_s", "mfu", "memory_per_gpu_gib"}) {
            if (std::find(metrics.begin(), metrics.end(), m) == metrics.end()) metrics.push_back(m);
        }
    }
    const MetricSchema& schema = reader.metric_schema();
    // Every metric named on the command line is checked before anything is printed.
    const auto check_known = [&](const std::string& m, const char* option) {
        if (find_metric(schema, m) < 0) {
            throw ConfigError(fmt::format("report: {}: unknown metric '{}' in {}{}", option, m,
                                          path, io::metric_suggestion(m, schema)));
        }
    };
    for (const auto& m : options.metrics) check_known(m, "--metrics");
    if (!options.sort_metric.empty()) check_known(options.sort_metric, "--sort");
    std::vector<std::string> shown;
    for (const auto& m : metrics) {
        // A metric that repeats a design column shown already (gpus) is printed once.
        if (std::find(data.design.begin(), data.design.end(), m) != data.design.end()) continue;
        const int k = find_metric(schema, m);
        if (k < 0) continue;  // a default column this file's experiment does not have
        shown.push_back(m);
        data.metric[m] = reader.metric(m);
        data.metric_unit[m] = schema[k].unit;
    }

    std::size_t ok = 0;
    std::size_t infeasible = 0;
    std::size_t failed = 0;
    std::size_t dominated = 0;
    for (auto s : data.status) {
        (s == PointStatus::ok           ? ok
         : s == PointStatus::infeasible ? infeasible
         : s == PointStatus::dominated  ? dominated
                                        : failed)++;
    }
    std::uint64_t filtered = 0;
    const auto filtered_by = reader.filtered();
    for (const auto& [reason, count] : filtered_by) filtered += count;

    out << fmt::format("file        {}\n", path);
    out << fmt::format("experiment  {} (sha256 {}..., seed {})\n", h.experiment_name,
                       h.experiment_sha256.substr(0, 12), h.seed);
    for (const auto& [name, text] : h.included_files) {
        out << fmt::format("includes    {} ({} bytes, stored in the file)\n", name, text.size());
    }
    out << fmt::format("status      {} ({} of {} indices processed; prism {})\n", h.status,
                       h.next_index, h.space_size, h.program_version);
    if (dominated > 0) {
        // dominated: deterministic metrics only (their bounds dominated by the pilot's front)
        out << fmt::format(
            "points      {} evaluated: {} ok, {} dominated, {} infeasible, {} failed; {} "
            "filtered\n",
            data.index.size(), ok, dominated, infeasible, failed, filtered);
    } else {
        out << fmt::format(
            "points      {} evaluated: {} ok, {} infeasible, {} failed; {} filtered\n",
            data.index.size(), ok, infeasible, failed, filtered);
    }
    for (const auto& [reason, count] : filtered_by) {
        out << fmt::format("  filtered  {:>10}  {}\n", count, reason);
    }
    const auto failures = reader.failures();
    for (std::size_t i = 0; i < failures.size() && i < 10; ++i) {
        out << fmt::format("  failed    index {}: {}\n", failures[i].index, failures[i].message);
    }
    if (failures.size() > 10) out << fmt::format("  ... {} more failures\n", failures.size() - 10);

    std::map<std::uint64_t, std::size_t> row_of;
    for (std::size_t r = 0; r < data.index.size(); ++r) row_of[data.index[r]] = r;

    if (options.show_front) {
        for (const auto& name : reader.pareto_names()) {
            const auto set = reader.pareto(name);
            std::vector<std::size_t> rows;
            for (auto i : set.indices) {
                if (auto it = row_of.find(i); it != row_of.end()) rows.push_back(it->second);
            }
            // Sort the front along its first objective so it reads as a trade-off curve.
            if (!set.objectives.empty() && data.metric.count(set.objectives[0])) {
                const auto& v = data.metric.at(set.objectives[0]);
                std::stable_sort(rows.begin(), rows.end(),
                                 [&](auto a, auto b) { return v[a] < v[b]; });
            }
            std::string objectives;
            for (std::size_t k = 0; k < set.objectives.size(); ++k) {
                objectives +=
                    fmt::format("{}{} {}", k ? ", " : "", set.senses[k], set.objectives[k]);
            }
            if (set.scenarios.empty()) {
                out << fmt::format("\nPareto front '{}' ({}): {} points\n", name, objectives,
                                   rows.size());
                out << format_table(table_columns(data, shown), table_rows(data, shown, rows));
                print_moe_lines(reader, data, rows, fmt::format("front '{}'", name), out);
                continue;
            }
            print_scenario_fronts(reader, experiment, set, objectives, rows, data, shown, out);
            print_moe_lines(reader, data, rows, fmt::format("front '{}'", name), out);
        }
    }

    if (options.show_front) {
        if (const auto verified = io::read_verification(path)) print_verification(*verified, out);
    }

    std::string sort = options.sort_metric;
    bool descending = options.descending;
    if (sort.empty() && !experiment.objectives.empty()) {
        sort = experiment.objectives[0].metric;
        descending = experiment.objectives[0].maximize;
    }
    if (sort.empty() && !shown.empty()) sort = shown[0];
    if (sort.empty() || options.top == 0) return;
    if (!data.metric.count(sort)) data.metric[sort] = reader.metric(sort);
    const auto& key = data.metric.at(sort);
    std::vector<std::size_t> rows;
    for (std::size_t r = 0; r < key.size(); ++r) {
        if (data.status[r] == PointStatus::ok && !std::isnan(key[r])) rows.push_back(r);
    }
    std::stable_sort(rows.begin(), rows.end(), [&](auto a, auto b) {
        return descending ? key[a] > key[b] : key[a] < key[b];
    });
    if (rows.size() > options.top) rows.resize(options.top);
    out << fmt::format("\nTop {} by {} ({})\n", rows.size(), sort,
                       descending ? "largest first" : "smallest first");
    out << format_table(table_columns(data, shown), table_rows(data, shown, rows));
    print_moe_lines(reader, data, rows, fmt::format("the top {}", rows.size()), out);
}

}  // namespace prism::explorer
