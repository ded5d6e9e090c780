#pragma once

// Damaged result files (a copy cut short, a crash of the machine, a disk error): what is wrong
// with them, and what of their committed content can still be read, checked chunk by chunk, so
// that `prism recover` writes it into a new file that `--resume` completes.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/result_store.hpp"

namespace prism::io {

/// What a result file holds that reads back whole.
struct SalvagedResults {
    /// "" when the file reads whole; else what is wrong, one line ("cut short: 3100 of 91712
    /// bytes", "cannot be read: ..."), with no library internals.
    std::string problem;
    bool header_read = false;  ///< root attributes and layout read: rows can be saved
    ResultHeader header;       ///< as stored
    std::vector<ColumnSpec> columns;
    MetricSchema metrics;
    std::uint64_t rows_committed = 0;  ///< what the file says it committed
    RowBatch rows;                     ///< the committed rows that read back whole: a prefix
    /// Every index below it is among `rows` or was filtered: the file's next_index when every
    /// committed row was saved, else the index of the first row lost.
    std::uint64_t next_index = 0;
    std::vector<FailureRecord> failures;  ///< below next_index
    FilteredCounts filtered;              ///< in file order
    /// `filtered` goes with next_index; when false they must be recounted below it.
    bool filtered_exact = false;
};

enum class SalvageMode {
    /// What is wrong, cheaply: no copy, no row read (chunk addresses only). `rows` stays empty;
    /// `rows_committed` and `problem` are set.
    diagnose,
    /// Everything that reads back whole. A file cut short (shorter than its superblock says) is
    /// read from a private copy in the scratch directory, extended to the size HDF5 expects
    /// (removed afterwards); every chunk is checked to lie within the real file and to decode,
    /// so nothing past the cut is taken for data.
    recover
};

/// Reads what it can of `path`. Never throws for a damaged file (IoError only when the scratch
/// copy cannot be made).
SalvagedResults salvage_result_file(const std::string& path, SalvageMode mode,
                                    const std::string& scratch_dir);

}  // namespace prism::io
