#pragma once

// The HDF5 result file of a sweep: self-describing (readable with h5py and no knowledge of this
// code), written incrementally and resumable. Layout (format "prism-results", version 2):
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
//   /filtered/{reason,count}    points rejected before evaluation, reasons in order of first
//                               appearance in the design space
//   /pareto/<name>/index   uint64 sorted design-space indices; group attributes objectives, senses
//   /histograms/{step_time [rows, bins] float32, step_time_lo_s, step_time_hi_s}   optional
//
// Every dataset of /points, /metrics and /histograms has attributes `unit` and `description`;
// /points and /metrics have an attribute `columns` listing their columns in declaration order.
// Growing datasets are 1-D (or [rows, bins]), chunked along rows, shuffle + deflate level 4.
// Rows are committed by `flush`, `set_status` and `close`: a reader (and a resume) sees exactly
// `rows_committed` rows, and `next_index`, failures and filtered counts of the same moment.
// Format 1 (before 2026-11) is read, not resumed.
//
// One writer, many readers (HDF5's single-writer/multiple-reader mode, SWMR, file format 1.10):
// - The writer claims the file before touching it: a lock file `X.h5.lock` held with flock(2)
//   (detail/file_lock.hpp); a second writer gets FileInUseError.
// - A new file is built complete under a temporary name and renamed to X.h5, then reopened in
//   SWMR mode: X.h5 never exists half-made. Everything (groups, datasets, attributes, the
//   declared Pareto sets) is created before SWMR starts; afterwards the writer only writes
//   values and extends datasets, as SWMR requires.
// - Readers open with SWMR read (ResultReader; h5py.File(X, "r", swmr=True)) while a sweep
//   writes, or after its writer was killed; a cleanly closed file also opens plainly.
//
// Crash safety (kill -9, a full disk): a commit writes the rows and the new reasons and
// failures and flushes (phase 1), then writes the counts that make them visible (filtered
// counts, the `committed` attributes, rows_committed, next_index) and flushes again (phase 2).
// Committed bytes never move or change: a chunk first written full is compressed and written
// once; a chunk first written partly filled is stored raw (its filters skipped) and rewritten
// in place, with its committed rows' bytes unchanged, as it fills. File space is never reused.
// So every commit is cheap (flush intervals of seconds) and a writer killed at any moment, or
// one whose disk filled up, leaves the state of its last commit; only the filtered counts can
// be one commit ahead of next_index (a kill inside phase 2), which a resume detects (their sum
// plus rows_committed equals next_index otherwise) and recounts. The string-valued status and
// `updated` attributes change only when the status does.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/io_errors.hpp"
#include "src/model/metrics.hpp"

namespace prism::io {

inline constexpr const char* kResultFormat = "prism-results";
inline constexpr std::int64_t kResultFormatVersion = 2;
/// Files of format 1 are read (ResultReader, salvage) but not resumed.
inline constexpr std::int64_t kOldestReadableFormatVersion = 1;
inline constexpr std::size_t kDefaultChunkRows = 4096;

/// Rows per chunk for a sweep of `space_size` points: a sixteenth of the space rounded up to a
/// power of two, between 64 and kDefaultChunkRows. A commit stores the partly filled last chunk
/// of every dataset raw at its full size, so small sweeps get small chunks.
std::size_t chunk_rows_for(std::uint64_t space_size);

/// A design-parameter column of /points.
struct ColumnSpec {
    enum class Type { int64, float64, enumeration };

    std::string name;  ///< dataset name: non-empty, no '/', not index/status/reason_id
    Type type = Type::int64;
    std::string unit;  ///< "1" when dimensionless
    std::string description;
    std::vector<std::string> labels;  ///< enumeration only: value i is labels[i] (<= 256)
};

/// A Pareto set the file will hold: created (empty) with the file, filled by write_pareto.
struct ParetoSpec {
    std::string name;
    std::vector<std::string> objectives;  ///< metric names
    std::vector<std::string> senses;      ///< "min" or "max", one per objective
    /// Scenario dimensions (attribute `scenarios`, absent when none): the set is the union of
    /// one front per scenario (explorer/scenarios.hpp).
    std::vector<std::string> scenarios;
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
    /// Files the experiment reads besides itself (variability profiles), as (name, text);
    /// stored as the root attributes included_file_names / included_file_texts when any
    std::vector<std::pair<std::string, std::string>> included_files;
    std::uint64_t seed = 0;
    std::uint64_t space_size = 0;         ///< design points before filtering
    std::size_t histogram_bins = 0;       ///< 0: no /histograms; else bins per step-time histogram
    std::vector<ParetoSpec> pareto_sets;  ///< created with the file (SWMR creates nothing later)
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
    std::vector<std::string> scenarios;   ///< scenario dimensions (ParetoSpec::scenarios)
    std::vector<std::uint64_t> indices;   ///< design-space indices, sorted
};

/// The live process of this host that holds `path` for writing ("pid P on host H since T"),
/// or "" (none, or a holder on another host: informative only).
std::string result_file_writer(const std::string& path);

/// Throws FileInUseError when another writer holds `path` (anywhere the lock is seen), by
/// claiming it and letting it go at once; touches the lock file only.
void check_not_in_use(const std::string& path);

/// Holds `path` for writing as a sweep's writer does (its lock file), without opening it, for
/// as long as it lives: what a step that writes into a closed result file keeps for its whole
/// duration (the front's verification), so that no second sweep takes the file meanwhile.
/// Throws FileInUseError when another writer holds it.
class ResultFileClaim {
  public:
    explicit ResultFileClaim(const std::string& path);
    ~ResultFileClaim();
    ResultFileClaim(const ResultFileClaim&) = delete;
    ResultFileClaim& operator=(const ResultFileClaim&) = delete;

  private:
    struct Lock;
    std::unique_ptr<Lock> lock_;
};

/// Points rejected before evaluation, by reason, the reasons in the order they first
/// appear in the design space (so that the file's /filtered is the same whatever the rank
/// count, the commits and the resumes).
using FilteredCounts = std::vector<std::pair<std::string, std::uint64_t>>;
/// Adds `count` to `reason`'s entry, appending the reason when it is new.
void add_filtered(FilteredCounts& counts, const std::string& reason, std::uint64_t count);

/// Recounts the points filtered out below `next_index` (by decoding the design space): used
/// by a resume when the file's filtered counts do not go with its next_index.
using FilteredRecount = std::function<FilteredCounts(std::uint64_t next_index)>;

class ResultReader;

/// Writes a result file incrementally. Not thread-safe. Every failure is an IoError naming
/// the file (and the dataset); a failing system call (full disk, I/O error) a StorageError;
/// invalid arguments are IoError too. After a StorageError the writer writes nothing more;
/// the file keeps its last commit (header().rows_committed rows).
class ResultWriter {
  public:
    /// Creates `path` with the header (status "running"), the declared point columns, metrics
    /// and Pareto sets, then holds it open in SWMR mode. Claims it first (FileInUseError while
    /// another writer holds it, before anything is touched). Refuses an existing file unless
    /// `overwrite`: "PATH: file exists (use --overwrite to replace it)", and anything but a
    /// regular file: "PATH: not a regular file". The file appears complete (built under a
    /// temporary name, then renamed over `path`). `chunk_rows` rows per chunk.
    static ResultWriter create(const std::string& path, const ResultHeader& header,
                               const std::vector<ColumnSpec>& point_columns,
                               const MetricSchema& metric_schema, bool overwrite,
                               std::size_t chunk_rows = kDefaultChunkRows);

    /// Opens an existing file to continue it, after claiming it. Checks format, format_version
    /// (format 1 files are refused with advice to `prism recover` them), experiment_sha256
    /// against `expected` (sha256 empty: computed from experiment_toml; a file whose hash is
    /// that of the TOML text, as older versions wrote, matches `expected.experiment_toml`'s),
    /// model_version, and drops rows, reasons and failures that were written but not committed
    /// (or whose index is >= next_index). When the filtered counts do not go with next_index
    /// (a writer killed in the middle of a commit) and `recount` is given, next_index falls
    /// back to just past the last committed row and the counts are recounted. A file that
    /// passes these checks but cannot be continued as it is (damaged) is replaced by one
    /// rebuilt from its committed rows that read back whole (io/result_salvage.hpp; rebuilt()
    /// says so). Sets the status to "running".
    static ResultWriter open_resume(const std::string& path, const ResultHeader& expected,
                                    const FilteredRecount& recount = {});

    /// As above, and also checks that the file's point columns (names, types, enumeration
    /// labels) and metric names equal this program's, before changing anything:
    /// "PATH: /metrics: columns differ from this program's (file: a, b; expected: a, c)".
    /// Use it when the caller fills batches by position from its own schema.
    static ResultWriter open_resume(const std::string& path, const ResultHeader& expected,
                                    const std::vector<ColumnSpec>& point_columns,
                                    const MetricSchema& metric_schema,
                                    const FilteredRecount& recount = {});

    ResultWriter(ResultWriter&&) noexcept;
    ResultWriter& operator=(ResultWriter&&) noexcept;
    ResultWriter(const ResultWriter&) = delete;
    ResultWriter& operator=(const ResultWriter&) = delete;
    /// Closes quietly (as `close`, errors swallowed). Does not change the status.
    ~ResultWriter();

    /// Header as in the file (state fields current as of the last commit).
    const ResultHeader& header() const;
    const std::vector<ColumnSpec>& point_columns() const;
    const MetricSchema& metric_schema() const;
    /// Every design-space index below it has been processed: the committed value, as in the
    /// file.
    std::uint64_t next_index() const;
    /// Rows appended so far, committed or buffered.
    std::uint64_t rows() const;
    /// After open_resume: "" when the file was continued as it was, else what was wrong with
    /// it and from how many committed rows it was rebuilt (a file whose writer stopped on an
    /// I/O error in the middle of a flush).
    const std::string& rebuilt() const;
    /// The committed content of a resumed file, read through this writer's open file. HDF5
    /// 1.10 misreads chunks that this process rewrote raw, so it is available only before the
    /// first append: IoError "PATH: the committed rows can be read only before the first
    /// append" after.
    ResultReader committed() const;

    /// Buffers the rows; writes whole chunks to the file as the buffer fills (not committed
    /// until `flush`). Throws on inconsistent sizes, unknown enum values, non-increasing indices.
    void append(const RowBatch& batch);
    /// Records a point whose evaluation threw (committed with the next flush).
    void add_failure(std::uint64_t index, const std::string& message);
    /// Commits: writes every buffered row (a partly filled last chunk raw, in place), the new
    /// reasons and failures, flushes, then writes the filtered counts, rows_committed and
    /// next_index and flushes again. Throws if next_index decreases or does not pass the last
    /// appended index.
    void flush(std::uint64_t next_index);
    /// The filtered counts that go with the next flush's next_index. Reasons new to the file
    /// are appended to /filtered in this order; its rows are never rewritten (counts in place).
    void set_filtered(const FilteredCounts& counts);
    /// Writes (or replaces) the indices of /pareto/<name>, a set declared in the header at
    /// creation with these objectives and senses; indices are stored sorted.
    void write_pareto(const std::string& name, const std::vector<std::string>& objectives,
                      const std::vector<std::string>& senses,
                      const std::vector<std::uint64_t>& indices);
    /// Commits all rows appended so far (with the last flush's next_index), then sets the
    /// status attribute ("running", "interrupted", "complete", "failed") and `updated`.
    void set_status(const std::string& status);
    /// Commits everything with the next_index of the last flush (call flush(next_index) first
    /// to record the final progress), closes the file and releases the claim. Throws IoError;
    /// later calls do nothing.
    void close();

    class Impl;

  private:
    explicit ResultWriter(std::unique_ptr<Impl> impl);
    static ResultWriter resume(const std::string& path, const ResultHeader& expected,
                               const std::vector<ColumnSpec>* point_columns,
                               const MetricSchema* metric_schema, const FilteredRecount& recount);
    std::unique_ptr<Impl> impl_;
};

/// Read-only view of a result file (committed rows only), opened in SWMR read mode: it works
/// while another process writes the file, and on the file of a killed writer. HDF5 refuses to
/// open a file for writing (`open_resume`) while the same process has it open read-only:
/// destroy the reader first; a process that writes a file reads it through
/// ResultWriter::committed().
class ResultReader {
  public:
    /// Opens `path`; IoError "PATH: cannot open: not an HDF5 file", "PATH: not a prism result
    /// file (no 'format' attribute)", ...
    explicit ResultReader(const std::string& path);
    /// Over a file this process holds open (ResultWriter::committed): `open_file` is an HDF5
    /// file identifier (hid_t), which the reader closes.
    ResultReader(const std::string& path, std::int64_t open_file);
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
    /// False when the filtered counts do not go with next_index (their sum plus rows must
    /// equal it): a writer was killed in the middle of a commit.
    bool filtered_consistent() const;
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
