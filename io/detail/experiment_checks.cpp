#include "io/detail/experiment_checks.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <fmt/format.h>

#include "io/detail/toml_reader.hpp"
#include "io/work_limits.hpp"
#include "src/common/error.hpp"
#include "src/model/design_space.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/evaluate.hpp"

namespace prism::io::detail {

namespace {

const toml::node* node_at(const toml::table& root, std::initializer_list<const char*> path) {
    const toml::node* node = &root;
    for (const char* key : path) {
        const toml::table* table = node != nullptr ? node->as_table() : nullptr;
        node = table != nullptr ? table->get(key) : nullptr;
    }
    return node;
}

/// The baseline is evaluated once per sweep (speedup_vs_baseline): it must be a point of the
/// space that the model can evaluate.
void check_baseline(const toml::table& root, const Experiment& e) {
    if (!e.baseline) return;
    const toml::node* at = node_at(root, {"experiment", "baseline"});
    if (at == nullptr) return;
    if (auto why = filter_reason(e, *e.baseline)) {
        fail_at(*at, "experiment.baseline: " + *why);
    }
    if (auto why = work_limit_reason(e, *e.baseline)) {
        fail_at(*at, "experiment.baseline: " + *why);
    }
    try {
        (void)evaluate_deterministic(e, *e.baseline);
    } catch (const Error& error) {
        fail_at(*at,
                std::string("experiment.baseline: the model cannot evaluate it: ") + error.what());
    }
}

/// steps_total = total_tokens / tokens per step must fit a 64-bit integer (and a double's 53
/// bits exactly) for the smallest global batch of the space.
void check_step_count(const toml::table& root, const Experiment& e) {
    if (e.training.total_tokens <= 0) return;
    std::int64_t smallest =
        e.training.global_batch_seqs > 0 ? e.training.global_batch_seqs : INT64_MAX;
    if (e.defaults.global_batch_seqs > 0) {
        smallest = std::min(smallest, e.defaults.global_batch_seqs);
    }
    for (const auto& dim : e.space.dimensions) {
        if (dim.name != "global_batch") continue;
        for (const auto& v : dim.values) smallest = std::min(smallest, v.i);
    }
    if (smallest <= 0 || smallest == INT64_MAX) return;
    const double steps = e.training.total_tokens /
                         (static_cast<double>(smallest) * static_cast<double>(e.model.seq));
    constexpr double kMaxSteps = 9007199254740992.0;  // 2^53
    if (!(steps <= kMaxSteps)) {
        const toml::node* at = node_at(root, {"training", "total_tokens"});
        fail_at(*at, fmt::format("training.total_tokens: {} tokens make {} steps of {} tokens, "
                                 "more than 2^53 (a step count must fit 64 bits exactly)",
                                 format_number(e.training.total_tokens), format_number(steps),
                                 static_cast<double>(smallest) * e.model.seq));
    }
}

/// Slow-step deltas and deadlines name metrics by their value rounded (p_slow_5pct): two
/// values that round alike would make two metrics of one name.
void check_metric_names(const toml::table& root, const Experiment& e) {
    std::map<std::string, int> seen;
    for (const auto& m : metric_schema(e)) {
        if (++seen[m.name] < 2) continue;
        const bool slow = m.name.rfind("p_slow_", 0) == 0;
        const toml::node* at = slow ? node_at(root, {"evaluation", "slow_deltas"})
                                    : node_at(root, {"failures", "deadlines"});
        const std::string key = slow ? "evaluation.slow_deltas" : "failures.deadlines";
        if (at == nullptr) throw ConfigError(e.file + ": two metrics are named '" + m.name + "'");
        fail_at(*at, fmt::format("{}: two values round to the same metric name '{}'; give "
                                 "values that differ in their name",
                                 key, m.name));
    }
}

/// A value above its work limit (io/work_limits.hpp says why each limit is where it is).
void check_limit(const toml::table& root, std::initializer_list<const char*> path,
                 std::int64_t value, std::int64_t limit, const std::string& what) {
    if (value <= limit) return;
    std::string key;
    for (const char* part : path) key = join_key(key, part);
    const toml::node* at = node_at(root, path);
    const std::string message =
        fmt::format("{}: {} is above the limit of {} ({})", key, value, limit, what);
    if (at == nullptr) throw ConfigError(message);
    fail_at(*at, message);
}

void check_limits(const toml::table& root, const Experiment& e) {
    check_limit(root, {"evaluation", "samples"}, e.evaluation.samples, kMaxSamples,
                "Monte Carlo costs ~50 us per sample and point; at 100000 the p99 is within "
                "3e-4 in probability");
    check_limit(root, {"evaluation", "histogram_bins"}, e.evaluation.histogram_bins,
                kMaxHistogramBins, "a float32 per bin and point in the result file");
    check_limit(root, {"evaluation", "slow_deltas"},
                static_cast<std::int64_t>(e.evaluation.slow_deltas.size()), kMaxListedMetrics,
                "values: each makes a metric of every point");
    check_limit(root, {"failures", "deadlines"},
                static_cast<std::int64_t>(e.failures.deadlines_s.size()), kMaxListedMetrics,
                "values: each makes a metric of every point");
    check_limit(root, {"hardware"}, static_cast<std::int64_t>(e.hardware.size()),
                kMaxHardwareTables,
                "tables: the result file stores the hardware as an 8-bit "
                "enumeration");
}

}  // namespace

void check_experiment(const toml::table& root, const Experiment& experiment) {
    if (experiment.evaluation.verify_montecarlo && experiment.objectives.empty()) {
        fail_at(*root["evaluation"]["verify"].node(),
                "evaluation.verify: \"montecarlo\" verifies the Pareto front; it needs "
                "[objectives]");
    }
    check_limits(root, experiment);
    check_baseline(root, experiment);
    check_step_count(root, experiment);
    check_metric_names(root, experiment);
}

}  // namespace prism::io::detail
