#pragma once

// The master's side of a sweep: ordered chunks -> rows of the HDF5 result file, the failure
// list, the filtered counts and the streaming Pareto archive.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "explorer/design_space.hpp"
#include "explorer/pareto.hpp"
#include "explorer/pruning.hpp"
#include "explorer/scenarios.hpp"
#include "explorer/sweep_engine.hpp"
#include "io/result_store.hpp"
#include "src/model/spec.hpp"

namespace prism::explorer {

/// The /points columns every result file has (after index, status, reason_id).
std::vector<io::ColumnSpec> point_columns(const Experiment& experiment);

class ResultSink : public ResultConsumer {
  public:
    /// `writer` is fresh or resumed; on resume, the filtered counts and the Pareto archive are
    /// rebuilt from what the file already holds.
    ResultSink(const Experiment& experiment, const DesignSpace& space, io::ResultWriter writer,
               bool resumed);

    void consume(ChunkResult&& chunk) override;
    void checkpoint(std::uint64_t next_index) override;
    bool abort_requested() const override { return abort_failure_.has_value(); }

    /// Under the abort policy: the first failing point (index, message).
    const std::optional<std::pair<std::uint64_t, std::string>>& abort_failure() const {
        return abort_failure_;
    }

    /// Writes the Pareto front and filtered counts, sets the status and closes the file.
    /// Returns the front's indices.
    std::vector<std::uint64_t> finish(const std::string& status);

    /// Pruning (explorer/pruning.hpp): the pilot's full rows, which chunks leave out (their
    /// work orders name them `known`) and the sink puts back at their index; every evaluated
    /// row is checked against its bounds (a broken bound turns pruning off and is reported).
    void set_pruning(Pruning* pruning, std::map<std::uint64_t, PointResult> pilot_rows);

    std::uint64_t rows_written() const noexcept { return rows_written_; }
    /// Rows the file holds for sure (its last commit).
    std::uint64_t committed_rows() const { return writer_.header().rows_committed; }
    /// Every index below it is in the file (committed): where the sweep starts.
    std::uint64_t next_index() const { return writer_.next_index(); }
    std::uint64_t dominated() const noexcept { return dominated_; }
    std::uint64_t failures() const noexcept { return failures_; }
    const io::FilteredCounts& filtered() const noexcept { return filtered_; }

  private:
    void append_rows(const std::vector<PointResult>& rows);

    const Experiment* experiment_;
    const DesignSpace* space_;
    io::ResultWriter writer_;
    std::vector<io::ColumnSpec> columns_;
    std::vector<std::string> placement_labels_;
    std::vector<int> objective_metric_;  ///< schema index per objective
    ScenarioKey scenarios_;
    ParetoArchive archive_;        ///< per scenario (ScenarioKey::augment)
    io::FilteredCounts filtered_;  ///< reasons in order of first appearance
    std::optional<std::pair<std::uint64_t, std::string>> abort_failure_;
    std::uint64_t rows_written_ = 0;
    std::uint64_t failures_ = 0;
    std::uint64_t dominated_ = 0;
    Pruning* pruning_ = nullptr;
    std::map<std::uint64_t, PointResult> pilot_rows_;
};

/// Objectives as Pareto `maximize` flags.
std::vector<bool> objective_senses(const Experiment& experiment);

}  // namespace prism::explorer
