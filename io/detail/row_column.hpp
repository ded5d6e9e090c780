#pragma once

// One dataset of a result file with a row per design point (1-D, or [rows, width]), grown
// chunk by chunk so that committed bytes never move or change:
// - a chunk first written full goes through the dataset's filters (shuffle + deflate) and is
//   never written again;
// - a chunk first written partly filled (a commit that does not end on a chunk boundary) is
//   written raw, its filters skipped (HDF5 records that per chunk, and every reader honours
//   it), at its full size: as it fills it is rewritten in place (same size, same address; the
//   bytes of the rows already committed are rewritten with the same values), so a writer killed
//   mid-write loses nothing committed and no file space is wasted.
// Raw chunks go through H5Dwrite_chunk with the bytes of the memory type, which equal the file
// type's on a little-endian host (the file types are little-endian).

#include <cstdint>
#include <string>
#include <vector>

#include <hdf5.h>

#include "io/detail/hdf5_handle.hpp"
#include "io/detail/hdf5_util.hpp"

namespace prism::io::detail {

class RowColumn {
  public:
    /// `dataset` open for writing; `mem_type` the memory type of a value (copied); `row_values`
    /// values per row (1, or the width of a 2-D dataset). `object` and `file` name it in errors.
    RowColumn(Handle dataset, hid_t mem_type, std::size_t row_values, std::string file,
              std::string object);

    hid_t dataset() const noexcept { return dataset_.get(); }
    const std::string& object() const noexcept { return object_; }
    std::size_t row_bytes() const noexcept { return row_bytes_; }
    std::uint64_t chunk_rows() const noexcept { return chunk_rows_; }
    /// Rows in the file.
    std::uint64_t rows() const noexcept { return rows_; }
    /// The largest row count <= `rows` that ends on a chunk boundary.
    std::uint64_t whole_chunks(std::uint64_t rows) const noexcept {
        return rows / chunk_rows_ * chunk_rows_;
    }

    /// Writes `count` rows (`count * row_bytes()` bytes, row-major) after the last row.
    void write(const unsigned char* data, std::uint64_t count);

    /// Forgets the dataset without closing it (a file whose writes failed: see Handle::abandon).
    void abandon() noexcept { dataset_.abandon(); }

    /// For a resume: the dataset holds exactly `rows` rows (trimmed by the caller); reads the
    /// rows of its partly filled last chunk back, so that its next write rewrites it whole.
    void resume_at(std::uint64_t rows);

  private:
    void write_raw_chunk(std::uint64_t chunk_start);

    Handle dataset_;
    Handle mem_type_;
    std::size_t row_values_;
    std::size_t row_bytes_;
    std::string file_;
    std::string object_;
    std::uint64_t chunk_rows_ = 1;
    std::uint32_t skip_filters_ = 0;  ///< filter mask with every filter of the dataset skipped
    std::uint64_t rows_ = 0;
    std::vector<unsigned char> tail_;  ///< the partly filled last chunk, when it is raw
};

}  // namespace prism::io::detail
