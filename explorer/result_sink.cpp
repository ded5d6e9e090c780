#include "explorer/result_sink.hpp"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "src/common/error.hpp"
#include "src/model/design_space.hpp"
#include "src/model/evaluate.hpp"

namespace prism::explorer {

namespace {

using Type = io::ColumnSpec::Type;

std::vector<std::string> placement_labels_of(const Experiment& e) {
    std::vector<std::string> labels{placement_name(e.defaults.placement)};
    for (const auto& dim : e.space.dimensions) {
        if (dim.name != "placement") continue;
        for (const auto& v : dim.values) {
            const std::string name = placement_name(parse_placement(v.s));
            if (std::find(labels.begin(), labels.end(), name) == labels.end()) {
                labels.push_back(name);
            }
        }
    }
    return labels;
}

}  // namespace

std::vector<bool> objective_senses(const Experiment& experiment) {
    std::vector<bool> maximize;
    for (const auto& o : experiment.objectives) maximize.push_back(o.maximize);
    if (maximize.empty())
        maximize.push_back(false);  // archive needs one; unused without objectives
    return maximize;
}

std::vector<io::ColumnSpec> point_columns(const Experiment& e) {
    std::vector<std::string> hardware;
    for (const auto& h : e.hardware) hardware.push_back(h.name);
    std::vector<io::ColumnSpec> columns{
        {"tp", Type::int64, "1", "tensor-parallel degree", {}},
        {"pp", Type::int64, "1", "pipeline-parallel degree", {}},
        {"dp", Type::int64, "1", "data-parallel degree", {}},
        {"cp", Type::int64, "1", "context-parallel degree", {}},
        {"gpus", Type::int64, "1", "total GPUs tp*pp*dp*cp", {}},
        {"microbatch", Type::int64, "sequences", "microbatch size", {}},
        {"zero_stage", Type::int64, "1", "ZeRO stage (3 = FSDP)", {}},
        {"recompute",
         Type::enumeration,
         "1",
         "activation recomputation",
         {"none", "selective", "full"}},
        {"sequence_parallel",
         Type::enumeration,
         "1",
         "Megatron sequence parallelism",
         {"false", "true"}},
        {"interleave", Type::int64, "1", "virtual pipeline stages per rank", {}},
        {"hardware", Type::enumeration, "1", "hardware table name", hardware},
        {"placement", Type::enumeration, "1", "rank placement (innermost first)",
         placement_labels_of(e)},
        {"global_batch", Type::int64, "sequences", "global batch", {}},
        {"checkpoint_interval_s", Type::float64, "s", "checkpoint interval (0 = policy)", {}},
        {"learning_rate", Type::float64, "1", "peak learning rate (0 = not studied)", {}},
    };
    if (e.cotune.enabled) {
        // Only in co-tuning studies, so that other experiments' files keep their columns.
        columns.push_back({"b_noise",
                           Type::float64,
                           "tokens",
                           "gradient noise scale B_noise of [cotune] (NaN: B_crit(L))",
                           {}});
    }
    if (e.model.is_moe()) {
        // Only for MoE models, so that dense experiments' files keep their columns.
        columns.push_back({"ep", Type::int64, "1", "expert-parallel degree", {}});
        columns.push_back({"etp", Type::int64, "1", "expert tensor-parallel degree", {}});
    }
    return columns;
}

ResultSink::ResultSink(const Experiment& experiment, const DesignSpace& space,
                       io::ResultWriter writer, bool resumed)
    : experiment_(&experiment),
      space_(&space),
      writer_(std::move(writer)),
      columns_(point_columns(experiment)),
      placement_labels_(placement_labels_of(experiment)),
      scenarios_(experiment),
      archive_(scenarios_.augment(objective_senses(experiment))) {
    const MetricSchema& schema = writer_.metric_schema();
    for (const auto& o : experiment.objectives) {
        const int k = find_metric(schema, o.metric);
        if (k < 0) throw ConfigError("objectives: unknown metric '" + o.metric + "'");
        objective_metric_.push_back(k);
    }
    if (!resumed) return;
    // Rebuild the state a resumed sweep needs from the committed rows of the file.
    io::ResultReader reader = writer_.committed();
    for (const auto& [reason, count] : reader.filtered())
        io::add_filtered(filtered_, reason, count);
    rows_written_ = reader.rows();
    failures_ = reader.failures().size();
    if (objective_metric_.empty()) return;
    const auto index = reader.index();
    const auto status = reader.status();
    std::vector<std::vector<double>> columns;
    for (const auto& o : experiment.objectives) columns.push_back(reader.metric(o.metric));
    std::vector<double> row(columns.size());
    for (std::size_t r = 0; r < index.size(); ++r) {
        if (status[r] != PointStatus::ok) continue;  // as in append_rows: only ok rows compete
        for (std::size_t k = 0; k < columns.size(); ++k) row[k] = columns[k][r];
        archive_.insert(index[r], scenarios_.augment(row, index[r]));
    }
}

void ResultSink::append_rows(const std::vector<PointResult>& rows) {
    if (rows.empty()) return;
    const std::size_t n = rows.size();
    const std::size_t metrics = writer_.metric_schema().size();
    const std::size_t bins = writer_.header().histogram_bins;
    io::RowBatch batch;
    batch.index.reserve(n);
    batch.status.reserve(n);
    batch.reason.reserve(n);
    std::size_t ints = 0;
    std::size_t floats = 0;
    for (const auto& c : columns_) (c.type == Type::float64 ? floats : ints)++;
    batch.int_columns.assign(ints, std::vector<std::int64_t>(n));
    batch.float_columns.assign(floats, std::vector<double>(n));
    batch.metrics.assign(metrics, std::vector<double>(n));
    for (std::size_t r = 0; r < n; ++r) {
        const PointResult& row = rows[r];
        batch.index.push_back(row.index);
        batch.status.push_back(row.status);
        batch.reason.push_back(row.reason);
        const DesignPoint p = space_->point(row.index);  // filters already passed on the worker
        const auto placement = std::find(placement_labels_.begin(), placement_labels_.end(),
                                         placement_name(p.placement)) -
                               placement_labels_.begin();
        const std::int64_t batch_seqs =
            p.global_batch_seqs > 0 ? p.global_batch_seqs : experiment_->training.global_batch_seqs;
        std::vector<std::int64_t> int_values{p.tp,
                                             p.pp,
                                             p.dp,
                                             p.cp,
                                             p.gpus(),
                                             p.microbatch,
                                             p.zero_stage,
                                             static_cast<std::int64_t>(p.recompute),
                                             p.sequence_parallel ? 1 : 0,
                                             p.interleave,
                                             p.hardware,
                                             placement,
                                             batch_seqs};
        if (experiment_->model.is_moe()) {
            int_values.push_back(p.ep);
            int_values.push_back(p.etp);
        }
        for (std::size_t k = 0; k < ints; ++k) batch.int_columns[k][r] = int_values[k];
        batch.float_columns[0][r] = p.checkpoint_interval_s;
        batch.float_columns[1][r] = p.learning_rate;
        if (floats > 2) {
            batch.float_columns[2][r] = experiment_->cotune.noise == NoiseModel::kaplan ? kNaN
                                        : p.b_noise_tokens > 0 ? p.b_noise_tokens
                                                               : experiment_->cotune.b_noise_tokens;
        }
        for (std::size_t m = 0; m < metrics; ++m) {
            batch.metrics[m][r] = m < row.values.size() ? row.values[m] : kNaN;
        }
        if (bins > 0) {
            // Rows without a histogram (failed points) get an empty one: all zeros, range NaN.
            const bool has = row.histogram.size() == bins;
            for (std::size_t b = 0; b < bins; ++b) {
                batch.histogram.push_back(has ? row.histogram[b] : 0.0f);
            }
            batch.histogram_lo_s.push_back(has ? row.histogram_lo_s : kNaN);
            batch.histogram_hi_s.push_back(has ? row.histogram_hi_s : kNaN);
        }
        if (row.status == PointStatus::failed) {
            writer_.add_failure(row.index, row.reason);
            ++failures_;
        }
        if (row.status == PointStatus::dominated) ++dominated_;
        if (pruning_ != nullptr && row.status == PointStatus::ok && !pruning_->violated() &&
            !pruning_->check(row)) {
            const auto& [index, what] = pruning_->violation();
            std::cerr << fmt::format(
                "prism: warning: point {} ({}): {}: the bounds pruning relies on do not hold "
                "here, so pruning stops; points skipped before it may be missing from the front "
                "(run again with [evaluation] prune = false)\n",
                index, describe_point(*experiment_, space_->decode(index).point), what);
        }
        if (row.status == PointStatus::ok && !objective_metric_.empty()) {
            std::vector<double> objectives;
            for (int k : objective_metric_) objectives.push_back(row.values[k]);
            archive_.insert(row.index, scenarios_.augment(objectives, row.index));
        }
    }
    writer_.append(batch);
    rows_written_ += n;
}

void ResultSink::set_pruning(Pruning* pruning, std::map<std::uint64_t, PointResult> pilot_rows) {
    pruning_ = pruning;
    pilot_rows_ = std::move(pilot_rows);
}

void ResultSink::consume(ChunkResult&& chunk) {
    if (abort_failure_) return;  // nothing after the failing point is recorded
    if (!pilot_rows_.empty()) {
        // the pilot's rows of this range, which its work order told the worker it need not send
        const auto first = pilot_rows_.lower_bound(chunk.begin);
        const auto last = pilot_rows_.lower_bound(chunk.end);
        if (first != last) {
            for (auto it = first; it != last; ++it) chunk.rows.push_back(it->second);
            std::sort(chunk.rows.begin(), chunk.rows.end(),
                      [](const PointResult& a, const PointResult& b) { return a.index < b.index; });
        }
    }
    if (experiment_->on_error == Experiment::OnError::abort) {
        const auto bad = std::find_if(chunk.rows.begin(), chunk.rows.end(), [](const auto& r) {
            return r.status == PointStatus::failed;
        });
        if (bad != chunk.rows.end()) {
            abort_failure_.emplace(bad->index, bad->reason);
            // Keep the rows before the failure; the resumable prefix ends at the failing index.
            // Filtered counts of this chunk past the failure are recounted on resume: count
            // only the part before the failure.
            for (const auto& [reason, count] : count_filtered(*space_, chunk.begin, bad->index)) {
                io::add_filtered(filtered_, reason, count);
            }
            chunk.rows.erase(bad, chunk.rows.end());
            append_rows(chunk.rows);
            return;
        }
    }
    for (const auto& [reason, count] : chunk.filtered) io::add_filtered(filtered_, reason, count);
    append_rows(chunk.rows);
}

void ResultSink::checkpoint(std::uint64_t next_index) {
    if (abort_failure_) next_index = std::min(next_index, abort_failure_->first);
    writer_.set_filtered(filtered_);
    writer_.flush(next_index);
}

std::vector<std::uint64_t> ResultSink::finish(const std::string& status) {
    std::vector<std::uint64_t> front;
    if (!objective_metric_.empty()) {
        front = archive_.indices();
        std::vector<std::string> names;
        std::vector<std::string> senses;
        for (const auto& o : experiment_->objectives) {
            names.push_back(o.metric);
            senses.push_back(o.maximize ? "max" : "min");
        }
        writer_.write_pareto("objectives", names, senses, front);
    }
    writer_.set_filtered(filtered_);
    writer_.set_status(status);
    writer_.close();
    return front;
}

}  // namespace prism::explorer
