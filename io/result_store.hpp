#pragma once

// The HDF5 result file of a sweep: self-describing (readable with h5py and no knowledge of this
// code), written incrementally and resumable. Layout (format "prism-results", version 1):
//
//   /                      attributes: format, format_version, program_version, model_version,
//                          experiment_name, experiment_toml, experiment_sha256, seed, space_size,
//                          status, next_index, rows_committed, created, updated
//   /points/index          uint64   design-space index, increasing
//   /points/status         enum {ok, infeasible, failed, dominated} (values of PointStatus)
//   /points/reason_id      int32    row of /reasons, -1 = none
//   /points/<column>       int64 | float64 | enum (uint8 base), one per declared ColumnSpec
//   /metrics/<metric>      float64, one per MetricSchema entry; rows aligned with /points
//   /reasons               vlen strings (interned reasons of infeasible/failed points)
//   /failures/{index,message}   points whose evaluation threw
//   /filtered/{reason,count}    points rejected before evaluation
//   /pareto/<name>/index   uint64 sorted design-space indices; group attributes objectives, senses
//   /histograms/{step_time [rows, bins] float32, step_time_lo_s, step_time_hi_s}   optional
//
// Every dataset of /points, /metrics and /histograms has attributes `unit` and `description`;
// /points and /metrics have an attribute `columns` listing their columns in declaration order.
// Growing datasets are 1-D (or [rows, bins]), chunked along rows, shuffle + deflate level 4.
// Rows are committed by `flush` and `close`: a reader (and a resume) sees exactly
// `rows_committed` rows, and `next_index`, failures and filtered counts of the same moment.
//
// Crash safety (kill -9, node failure): HDF5 without SWMR is consistent on disk only after
// H5Fflush, so (1) the metadata cache never evicts: dirty metadata reaches the disk only at a
// flush; (2) a compressed chunk is written once, full, and never rewritten (a rewritten chunk
// moves, and the on-disk index would point at the old place); a flush is therefore committed
// once the rows it covers fill whole chunks, i.e. the committed state lags at most chunk_rows
// rows behind, or, for slow sweeps, at most the max commit lag (60 s by default; then the
// partial chunk is written, and later rewritten elsewhere); close() commits everything;
// (3) file space is never reused within a session, so the flushed state stays valid while
// chunks move; (4) small rewritten tables (/reasons, /failures, /filtered) are uncompressed,
// so rewrites stay in place. Default library version bounds (superblock 2, no "latest"), so a
// killed writer's file opens with h5py without h5clear.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "src/model/metrics.hpp"

namespace prism::io {

inline constexpr const char* kResultFormat = "prism-results";
inline constexpr std::int64_t kResultFormatVersion = 1;
inline constexpr std::size_t kDefaultChunkRows = 4096;
inline constexpr double kDefaultMaxCommitLagSeconds = 60.0;

/// A design-parameter column of /points.
struct ColumnSpec {
    enum class Type { int64, float64, enumeration };

    std::string name;  ///< dataset name: non-empty, no '/', not index/status/reason_id
    Type type = Type::int64;
    std::string unit;  ///< "1" when dimensionless
    std::string description;
    std::vector<std::string> labels;  ///< enumeration only: value i is labels[i] (<= 256)
};

/// Root attributes of a result file. The fields above the line are set by the writer's caller;
/// the others describe the state of a file (filled when opened, ignored by `create`).
struct ResultHeader {
    std::string program_version;  ///< empty: this program's PRISM_VERSION
    /// the evaluators' numerics (prism::kModelVersion); a resume must match it unless empty
    std::string model_version;
    std::string experiment_name;
    std::string experiment_toml;    ///< full text of the experiment file
    std::string experiment_sha256;  ///< empty: computed from experiment_toml
    std::uint64_t seed = 0;
    std::uint64_t space_size = 0;    ///< design points before filtering
    std::size_t histogram_bins = 0;  ///< 0: no /histograms; else bins per step-time histogram
    // ---- state of an existing file
    std::int64_t format_version = kResultFormatVersion;
    std::string status;            ///< "running" | "interrupted" | "complete" | "failed"
    std::uint64_t next_index = 0;  ///< every design-space index below it has been processed
    std::uint64_t rows_committed = 0;
    std::string created;  ///< ISO 8601 UTC, "2026-11-22T06:15:12Z"
    std::string updated;
};

/// Rows to append, one entry per row in every vector (column-major). Indices increase, also
/// across batches.
struct RowBatch {
    std::vector<std::uint64_t> index;
    std::vector<PointStatus> status;
    std::vector<std::string> reason;  ///< "" = none
    /// One vector per int64 or enumeration column, in declaration order; enum values are label
    /// indices.
    std::vector<std::vector<std::int64_t>> int_columns;
    /// One vector per float64 column, in declaration order.
    std::vector<std::vector<double>> float_columns;
    /// One vector per metric of the schema, in schema order.
    std::vector<std::vector<double>> metrics;
    /// Step-time histograms when the file has them: rows x bins counts (row-major), and the
    /// range [lo, hi) of each row in seconds. Empty when the file has none.
    std::vector<float> histogram;
    std::vector<double> histogram_lo_s;
    std::vector<double> histogram_hi_s;

    std::size_t size() const noexcept { return index.size(); }
};

struct FailureRecord {
    std::uint64_t index = 0;
    std::string message;
};

struct ParetoSet {
    std::string name;
    std::vector<std::string> objectives;  ///< metric names
    std::vector<std::string> senses;      ///< "min" or "max", one per objective
    std::vector<std::uint64_t> indices;   ///< design-space indices, sorted
};

/// Writes a result file incrementally. Not thread-safe. Every failure is an IoError naming
/// the file (and the dataset); invalid arguments are IoError too.
class ResultWriter {
  public:
    /// Creates `path` with the header (status "running"), the declared point columns and the
    /// metrics. Refuses an existing file unless `overwrite`:
    /// "PATH: file exists (use --overwrite to replace it)". `chunk_rows` rows per chunk (and
    /// per write: at most that many rows are buffered).
    static ResultWriter create(const std::string& path, const ResultHeader& header,
                               const std::vector<ColumnSpec>& point_columns,
                               const MetricSchema& metric_schema, bool overwrite,
                               std::size_t chunk_rows = kDefaultChunkRows);

    /// Opens an existing file to continue it. Checks format, format_version and
    /// experiment_sha256 against `expected` (sha256 empty: computed from experiment_toml) and
    /// drops rows, reasons and failures that were written but not committed (or whose index is
    /// >= next_index). Sets the status to "running".
    static ResultWriter open_resume(const std::string& path, const ResultHeader& expected);

    /// As above, and also checks that the file's point columns (names, types, enumeration
    /// labels) and metric names equal this program's, before changing anything:
    /// "PATH: /metrics: columns differ from this program's (file: a, b; expected: a, c)".
    /// Use it when the caller fills batches by position from its own schema.
    static ResultWriter open_resume(const std::string& path, const ResultHeader& expected,
                                    const std::vector<ColumnSpec>& point_columns,
                                    const MetricSchema& metric_schema);

    ResultWriter(ResultWriter&&) noexcept;
    ResultWriter& operator=(ResultWriter&&) noexcept;
    ResultWriter(const ResultWriter&) = delete;
    ResultWriter& operator=(const ResultWriter&) = delete;
    /// Closes quietly (as `close`, errors swallowed). Does not change the status.
    ~ResultWriter();

    /// Header as in the file (state fields current as of the last flush).
    const ResultHeader& header() const;
    const std::vector<ColumnSpec>& point_columns() const;
    const MetricSchema& metric_schema() const;
    /// Every design-space index below it has been processed: the committed value (see the
    /// commit lag above), as in the file.
    std::uint64_t next_index() const;
    /// Rows appended so far, committed or buffered.
    std::uint64_t rows() const;

    /// Buffers the rows; writes whole chunks to the file as the buffer fills (not committed
    /// until `flush`). Throws on inconsistent sizes, unknown enum values, non-increasing indices.
    void append(const RowBatch& batch);
    /// Records a point whose evaluation threw (committed with the next flush).
    void add_failure(std::uint64_t index, const std::string& message);
    /// Records a checkpoint (next_index, rows, failures, filtered counts so far), writes the
    /// buffered rows that fill whole chunks, commits the latest checkpoint whose rows are all in
    /// the file (rows_committed, next_index, updated, failures, filtered) and flushes the file
    /// to disk. Throws if next_index decreases or does not pass the last appended index.
    void flush(std::uint64_t next_index);
    /// Replaces /filtered with these counts, written with the next flush (or close), so that
    /// the counts in the file always go with its next_index.
    void set_filtered(const std::map<std::string, std::uint64_t>& counts);
    /// Writes (or replaces) /pareto/<name>; indices are stored sorted.
    void write_pareto(const std::string& name, const std::vector<std::string>& objectives,
                      const std::vector<std::string>& senses,
                      const std::vector<std::uint64_t>& indices);
    /// Longest time a flush may stay uncommitted waiting for its chunks to fill (default
    /// kDefaultMaxCommitLagSeconds; 0: every flush commits at once, at the cost of dead space
    /// in the file for every rewritten partial chunk).
    void set_max_commit_lag(double seconds);
    /// Commits all rows appended so far (with the last flush's next_index), then sets the
    /// status attribute ("running", "interrupted", "complete", "failed") and flushes.
    void set_status(const std::string& status);
    /// Writes and commits everything, the last partial chunk too, with the next_index of the
    /// last flush (call flush(next_index) first to record the final progress), and closes the
    /// file. Throws IoError; later calls do nothing.
    void close();

    class Impl;

  private:
    explicit ResultWriter(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

/// Read-only view of a result file (committed rows only). HDF5 refuses to open a file for
/// writing (`open_resume`) while the same process has it open read-only: destroy the reader
/// first. Opening a reader while a writer of this process holds the file works.
class ResultReader {
  public:
    /// Opens `path`; IoError "PATH: cannot open: not an HDF5 file", "PATH: not a prism result
    /// file (no 'format' attribute)", ...
    explicit ResultReader(const std::string& path);
    ResultReader(ResultReader&&) noexcept;
    ResultReader& operator=(ResultReader&&) noexcept;
    ~ResultReader();

    const std::string& path() const;
    const ResultHeader& header() const;
    /// Committed rows of /points and /metrics.
    std::uint64_t rows() const;
    /// Declared columns of /points (without index, status, reason_id).
    const std::vector<ColumnSpec>& point_columns() const;
    const MetricSchema& metric_schema() const;

    std::vector<std::uint64_t> index() const;
    std::vector<PointStatus> status() const;
    std::vector<std::int32_t> reason_ids() const;
    /// Interned reasons (/reasons), addressed by reason_ids.
    std::vector<std::string> reasons() const;
    /// Reason of each row ("" when none).
    std::vector<std::string> row_reasons() const;
    /// An int64 or enumeration column (enum values as label indices).
    std::vector<std::int64_t> int_column(const std::string& name) const;
    std::vector<double> float_column(const std::string& name) const;
    std::vector<double> metric(const std::string& name) const;

    std::vector<FailureRecord> failures() const;
    std::map<std::string, std::uint64_t> filtered() const;
    std::vector<std::string> pareto_names() const;
    ParetoSet pareto(const std::string& name) const;

    /// Histograms (rows x bins, row-major) and their per-row ranges; empty when none.
    std::vector<float> histograms() const;
    std::vector<double> histogram_lo_s() const;
    std::vector<double> histogram_hi_s() const;

    class Impl;

  private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace prism::io
