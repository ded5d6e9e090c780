#pragma once

// What the writer, the reader and the salvager of result files share: the names and enums of
// the format, opening a file for reading or for SWMR writing, the root attributes and the
// column layout. The format itself is described in io/result_store.hpp.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <hdf5.h>

#include "io/detail/hdf5_handle.hpp"
#include "io/detail/hdf5_util.hpp"
#include "io/result_store.hpp"

namespace prism::io::detail {

inline const std::vector<std::string> kStatusLabels = {"ok", "infeasible", "failed", "dominated"};
inline const std::vector<std::string> kValidStatus = {"running", "interrupted", "complete",
                                                      "failed"};
inline constexpr const char* kHistogram = "step_time";
inline constexpr const char* kHistogramLo = "step_time_lo_s";
inline constexpr const char* kHistogramHi = "step_time_hi_s";

/// "2026-11-22T06:15:12Z"
std::string now_iso8601();
/// The first 12 hex digits and "..."
std::string short_hash(const std::string& hex);
/// header.experiment_sha256, or the SHA-256 of header.experiment_toml when that is empty.
std::string expected_sha(const ResultHeader& header);
/// Non-empty, no '/', not "." or "..".
bool valid_name(const std::string& name);
[[noreturn]] void invalid(const std::string& path, const std::string& what);

enum class OpenMode {
    read,       ///< SWMR read (works while a writer writes, or after it was killed), else plain
    salvage,    ///< as read, without reading a block again when its checksum fails
    write_swmr  ///< read-write in SWMR mode; clears the flags a killed writer left (lock held)
};
/// Opens a result file; IoError "PATH: cannot open: no such file", "...: not an HDF5 file",
/// "...: the file is truncated (...)".
Handle open_result_file(const std::string& path, OpenMode mode);

/// File access properties of the writer: the 1.10 file format (superblock 3, which SWMR
/// needs), metadata written only at flushes.
Handle writer_access_plist(const Where& where);

/// Reads and checks the root attributes (format name; format_version 1 or 2). `tolerant`:
/// the attributes that only describe (program_version, status, created, updated) become ""
/// when they do not read back (a damaged file).
ResultHeader read_header(hid_t file, const std::string& path, bool tolerant = false);

/// What a commit made visible, stored in format 2 as one root attribute `commit` (u64[5]) so
/// that a writer killed in the middle of a commit leaves either the old record or the new one;
/// rows_committed and next_index are copies of it for h5py users.
struct CommitRecord {
    std::uint64_t next_index = 0;
    std::uint64_t rows = 0;
    std::uint64_t reasons = 0;       ///< rows of /reasons
    std::uint64_t failures = 0;      ///< rows of /failures
    std::uint64_t filtered_sum = 0;  ///< sum of /filtered/count
};
/// Format 2: the `commit` attribute; format 1: rows_committed, next_index and the `committed`
/// attributes of /reasons and /failures (filtered_sum: that of /filtered/count).
CommitRecord read_commit(hid_t file, const std::string& path, std::int64_t format_version);
void write_commit(hid_t file, const std::string& path, const CommitRecord& record);
/// Throws IoError "PATH: damaged: its counts do not add up (...)" unless rows <= next_index <=
/// space_size and filtered_sum <= next_index - rows: counts read from a file are not trusted
/// to size anything before they pass.
void check_commit(const std::string& path, const CommitRecord& record, std::uint64_t space_size);
/// The rows of /filtered, in file order (rows with count 0 included).
std::vector<std::pair<std::string, std::uint64_t>> read_filtered_rows(hid_t file,
                                                                      const std::string& path);

struct Layout {
    std::vector<ColumnSpec> columns;
    MetricSchema metrics;
    std::size_t histogram_bins = 0;
    std::vector<ParetoSpec> pareto_sets;  ///< /pareto/<name> groups, in name order
};
Layout read_layout(hid_t file, const std::string& path);

/// Throws "PATH: /points: columns differ from this program's (file: ...; expected: ...)".
void check_same_layout(const std::string& path, const Layout& file,
                       const std::vector<ColumnSpec>& columns, const MetricSchema& metrics);
/// Throws on invalid column or metric names, enumerations, duplicates, chunk_rows == 0.
void check_declarations(const std::string& path, const std::vector<ColumnSpec>& columns,
                        const MetricSchema& metrics, const std::vector<ParetoSpec>& pareto_sets,
                        std::size_t chunk_rows);

/// Creates every group, dataset and attribute of a result file in `file` (a fresh file not yet
/// in SWMR mode): after this nothing is created, only written, as SWMR requires.
void create_layout(hid_t file, const std::string& path, const ResultHeader& header,
                   const std::vector<ColumnSpec>& columns, const MetricSchema& metrics,
                   std::size_t chunk_rows);

/// Rows of a histogram chunk: about 256 KiB whatever the bin count, at most chunk_rows.
std::size_t histogram_chunk_rows(std::size_t bins, std::size_t chunk_rows);

/// The first `count` values of an integer or enumeration dataset as int64.
std::vector<std::int64_t> read_integers(hid_t dataset, std::uint64_t count, const Where& where);
std::vector<double> read_doubles(hid_t dataset, std::uint64_t count, const Where& where);
std::vector<std::uint64_t> read_u64s(hid_t dataset, std::uint64_t count, const Where& where);
/// An optional u64 attribute (0 when absent).
std::uint64_t optional_u64_attribute(hid_t obj, const std::string& name, const Where& where);

}  // namespace prism::io::detail
