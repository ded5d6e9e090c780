#include "io/detail/row_column.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "io/detail/result_format.hpp"

namespace prism::io::detail {

static_assert(std::endian::native == std::endian::little,
              "raw chunk writes copy memory bytes into little-endian file types");

RowColumn::RowColumn(Handle dataset, hid_t mem_type, std::size_t row_values, std::string file,
                     std::string object)
    : dataset_(std::move(dataset)),
      mem_type_(type_handle(H5Tcopy(mem_type))),
      row_values_(row_values),
      row_bytes_(H5Tget_size(mem_type) * row_values),
      file_(std::move(file)),
      object_(std::move(object)) {
    const Where where{file_, object_};
    if (!mem_type_ || row_bytes_ == 0) fail(file_, object_, "cannot copy the memory type");
    chunk_rows_ = std::max<std::uint64_t>(1, detail::chunk_rows(dataset_.get(), where));
    if (chunk_rows_ * row_bytes_ > (std::uint64_t{1} << 28)) {
        invalid(file_, object_ + ": chunks of " + std::to_string(chunk_rows_) +
                           " rows are implausible (more than 256 MiB)");
    }
    Handle dcpl = plist_handle(H5Dget_create_plist(dataset_.get()));
    if (!dcpl) fail(file_, object_, "cannot get the creation properties");
    const int filters = H5Pget_nfilters(dcpl.get());
    if (filters < 0 || filters > 31) fail(file_, object_, "cannot read the filters");
    skip_filters_ = (std::uint32_t{1} << filters) - 1;
    rows_ = row_count(dataset_.get(), where);
}

void RowColumn::write_raw_chunk(std::uint64_t chunk_start) {
    std::vector<hsize_t> offset(row_values_ > 1 ? 2 : 1, 0);
    offset[0] = chunk_start;
    if (H5Dwrite_chunk(dataset_.get(), H5P_DEFAULT, skip_filters_, offset.data(), tail_.size(),
                       tail_.data()) < 0) {
        fail(file_, object_,
             "cannot write rows " + std::to_string(chunk_start) + ".." +
                 std::to_string(std::min(rows_, chunk_start + chunk_rows_) - 1));
    }
}

void RowColumn::write(const unsigned char* data, std::uint64_t count) {
    const Where where{file_, object_};
    while (count > 0) {
        const std::uint64_t chunk_start = rows_ / chunk_rows_ * chunk_rows_;
        const std::uint64_t in_chunk = rows_ - chunk_start;
        const std::uint64_t take = std::min(count, chunk_rows_ - in_chunk);
        if (in_chunk == 0 && take == chunk_rows_ && tail_.empty()) {
            // A whole fresh chunk: through the filters, written once.
            write_rows(dataset_.get(), mem_type_.get(), data, rows_, take, where);
        } else {
            if (tail_.empty()) tail_.assign(chunk_rows_ * row_bytes_, 0);
            std::memcpy(tail_.data() + in_chunk * row_bytes_, data, take * row_bytes_);
            resize_rows(dataset_.get(), rows_ + take, where);
            rows_ += take;
            write_raw_chunk(chunk_start);
            rows_ -= take;
            if (in_chunk + take == chunk_rows_) tail_.clear();  // full: never written again
        }
        rows_ += take;
        data += take * row_bytes_;
        count -= take;
    }
}

void RowColumn::resume_at(std::uint64_t rows) {
    rows_ = rows;
    tail_.clear();
    const std::uint64_t chunk_start = rows / chunk_rows_ * chunk_rows_;
    if (chunk_start == rows) return;
    // The partly filled chunk may be compressed (written by a close) or raw: read its rows in
    // this fresh session (HDF5 1.10 misreads a chunk after this process rewrote it raw) and
    // rewrite it raw at the next write.
    tail_.assign(chunk_rows_ * row_bytes_, 0);
    read_row_range(dataset_.get(), mem_type_.get(), tail_.data(), chunk_start, rows - chunk_start,
                   {file_, object_});
}

}  // namespace prism::io::detail
