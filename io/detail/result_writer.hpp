#pragma once

// The state of a ResultWriter (io/result_store.hpp), shared by its creating and writing side
// (result_store.cpp) and its resuming side (result_resume.cpp). Commits follow the two-phase
// protocol described in result_store.hpp.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <hdf5.h>

#include "io/detail/file_lock.hpp"
#include "io/detail/hdf5_handle.hpp"
#include "io/detail/hdf5_util.hpp"
#include "io/detail/result_format.hpp"
#include "io/detail/row_column.hpp"
#include "io/result_store.hpp"

namespace prism::io {

namespace detail {
struct ResumeState;  // result_resume.cpp
}  // namespace detail

using detail::Handle;
using detail::invalid;
using detail::Where;

class ResultWriter::Impl {
  public:
    /// A row dataset and the rows appended to it but not yet in the file.
    struct Column {
        detail::RowColumn file;
        std::vector<unsigned char> buffer;  ///< rows [buffer_base, total_rows), row-major bytes
    };

    std::string path;
    ResultHeader header;
    std::vector<ColumnSpec> columns;
    MetricSchema schema;
    detail::FileLock lock;
    Handle file;
    Handle status_type;
    std::vector<Handle> enum_types;  // per declared column (empty unless enumeration)
    // Row datasets: index, status, reason_id, the declared columns, the metrics, and with
    // histograms step_time, step_time_lo_s, step_time_hi_s.
    std::vector<Column> row_columns;
    std::uint64_t buffer_base = 0;  // first row held in the buffers
    std::uint64_t total_rows = 0;   // rows appended (in the file or buffered)
    Handle ds_reasons, ds_fail_index, ds_fail_message, ds_filtered_reason, ds_filtered_count;
    Handle pareto;

    std::uint64_t reasons_written = 0;
    std::uint64_t failures_written = 0;
    std::map<std::string, std::int32_t> reason_ids;
    std::vector<std::string> pending_reasons;
    std::vector<FailureRecord> pending_failures;
    FilteredCounts filtered;                     // latest set_filtered
    std::vector<std::string> filtered_order;     // reasons of /filtered, in file order
    std::vector<std::uint64_t> filtered_counts;  // their counts in the file
    bool filtered_replace = false;               // a resume recounted them: rewrite /filtered
    detail::CommitRecord committed;              // as in the file

    bool has_last = false;
    std::uint64_t last_index = 0;
    std::uint64_t latest_next_index = 0;  // of the last flush
    bool appended = false;                // rows appended in this session
    bool closed = false;
    bool broken = false;  // a write failed: nothing more is written
    int reserve_fd = -1;  // the file, for reserving space (fallocate) before writes
    std::string rebuilt;  // what a resume found damaged and rebuilt ("" when nothing)
    bool reserve_supported = true;

    Where at(const std::string& object) const { return Where{path, object}; }

    void check_usable(const char* operation) const {
        if (closed) invalid(path, std::string(operation) + ": the file is closed");
        if (broken) {
            invalid(path, std::string(operation) +
                              ": the file is not written after an earlier "
                              "write error");
        }
    }

    /// Runs a step that writes the file; a failure leaves the writer broken (nothing more is
    /// written, the file keeps its last commit).
    template <class Step>
    void writing(Step&& step) {
        try {
            step();
        } catch (...) {
            broken = true;
            throw;
        }
    }

    void make_types() {
        enum_types.clear();
        for (const auto& c : columns) {
            enum_types.push_back(c.type == ColumnSpec::Type::enumeration
                                     ? detail::enum_type(c.labels, at("/points/" + c.name))
                                     : Handle());
        }
        status_type = detail::enum_type(detail::kStatusLabels, at("/points/status"));
    }

    void open_datasets() {
        const Where root = at("");
        Handle points = detail::open_group(file.get(), "points", root);
        Handle metrics = detail::open_group(file.get(), "metrics", root);
        row_columns.clear();
        auto add = [&](hid_t group, const std::string& where, const std::string& name,
                       hid_t mem_type, std::size_t values) {
            Handle ds = detail::open_dataset(group, name, at(where));
            row_columns.push_back(
                {detail::RowColumn(std::move(ds), mem_type, values, path, where + "/" + name), {}});
        };
        add(points.get(), "/points", "index", H5T_NATIVE_UINT64, 1);
        add(points.get(), "/points", "status", status_type.get(), 1);
        add(points.get(), "/points", "reason_id", H5T_NATIVE_INT32, 1);
        for (std::size_t i = 0; i < columns.size(); ++i) {
            const auto& c = columns[i];
            const hid_t type = c.type == ColumnSpec::Type::float64 ? H5T_NATIVE_DOUBLE
                               : c.type == ColumnSpec::Type::int64 ? H5T_NATIVE_INT64
                                                                   : enum_types[i].get();
            add(points.get(), "/points", c.name, type, 1);
        }
        for (const auto& m : schema) add(metrics.get(), "/metrics", m.name, H5T_NATIVE_DOUBLE, 1);
        if (header.histogram_bins > 0) {
            Handle group = detail::open_group(file.get(), "histograms", root);
            add(group.get(), "/histograms", detail::kHistogram, H5T_NATIVE_FLOAT,
                header.histogram_bins);
            add(group.get(), "/histograms", detail::kHistogramLo, H5T_NATIVE_DOUBLE, 1);
            add(group.get(), "/histograms", detail::kHistogramHi, H5T_NATIVE_DOUBLE, 1);
        }
        ds_reasons = detail::open_dataset(file.get(), "reasons", root);
        Handle failures = detail::open_group(file.get(), "failures", root);
        ds_fail_index = detail::open_dataset(failures.get(), "index", at("/failures"));
        ds_fail_message = detail::open_dataset(failures.get(), "message", at("/failures"));
        Handle filtered_group = detail::open_group(file.get(), "filtered", root);
        ds_filtered_reason = detail::open_dataset(filtered_group.get(), "reason", at("/filtered"));
        ds_filtered_count = detail::open_dataset(filtered_group.get(), "count", at("/filtered"));
        pareto = detail::open_group(file.get(), "pareto", root);
    }

    // ---- rows ------------------------------------------------------------------------------

    template <class T>
    static void push(Column& column, const T* values, std::size_t count) {
        const auto* bytes = reinterpret_cast<const unsigned char*>(values);
        column.buffer.insert(column.buffer.end(), bytes, bytes + count * sizeof(T));
    }

    /// Copies a batch (checked) into the column buffers, interning its reasons.
    void buffer_batch(const RowBatch& batch, const std::vector<std::size_t>& slots) {
        const std::size_t n = batch.size();
        std::size_t k = 0;
        push(row_columns[k++], batch.index.data(), n);
        std::vector<std::uint8_t> status(n);
        std::vector<std::int32_t> reason(n, -1);
        for (std::size_t r = 0; r < n; ++r) {
            status[r] = static_cast<std::uint8_t>(batch.status[r]);
            if (batch.reason[r].empty()) continue;
            auto [it, inserted] = reason_ids.emplace(
                batch.reason[r],
                static_cast<std::int32_t>(reasons_written + pending_reasons.size()));
            if (inserted) pending_reasons.push_back(batch.reason[r]);
            reason[r] = it->second;
        }
        push(row_columns[k++], status.data(), n);
        push(row_columns[k++], reason.data(), n);
        for (std::size_t i = 0; i < columns.size(); ++i, ++k) {
            const auto& c = columns[i];
            if (c.type == ColumnSpec::Type::float64) {
                push(row_columns[k], batch.float_columns[slots[i]].data(), n);
            } else if (c.type == ColumnSpec::Type::int64) {
                push(row_columns[k], batch.int_columns[slots[i]].data(), n);
            } else {
                const auto& values = batch.int_columns[slots[i]];
                const std::vector<std::uint8_t> labels(values.begin(), values.end());
                push(row_columns[k], labels.data(), n);
            }
        }
        for (std::size_t m = 0; m < schema.size(); ++m) {
            push(row_columns[k++], batch.metrics[m].data(), n);
        }
        if (header.histogram_bins > 0) {
            push(row_columns[k++], batch.histogram.data(), batch.histogram.size());
            push(row_columns[k++], batch.histogram_lo_s.data(), n);
            push(row_columns[k++], batch.histogram_hi_s.data(), n);
        }
        total_rows += n;
    }

    /// Writes each dataset's buffered rows up to `upto(column)` rows, then drops the rows every
    /// dataset holds from the buffers.
    template <class Upto>
    void write_rows(Upto&& upto) {
        std::uint64_t lowest = total_rows;
        for (auto& c : row_columns) {
            const std::uint64_t from = c.file.rows();
            const std::uint64_t to = upto(c.file);
            if (to > from) {
                c.file.write(c.buffer.data() + (from - buffer_base) * c.file.row_bytes(),
                             to - from);
            }
            lowest = std::min(lowest, c.file.rows());
        }
        if (lowest > buffer_base) {
            for (auto& c : row_columns) {
                c.buffer.erase(c.buffer.begin(),
                               c.buffer.begin() + static_cast<std::ptrdiff_t>(
                                                      (lowest - buffer_base) * c.file.row_bytes()));
            }
            buffer_base = lowest;
        }
    }

    // ---- commits ---------------------------------------------------------------------------

    void flush_file() {
        if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) detail::fail(path, "", "cannot flush");
    }

    void write_new_reasons_and_failures() {
        if (!pending_reasons.empty()) {
            detail::write_string_rows(ds_reasons.get(), pending_reasons, reasons_written,
                                      at("/reasons"));
            reasons_written += pending_reasons.size();
            pending_reasons.clear();
        }
        if (!pending_failures.empty()) {
            std::vector<std::uint64_t> index;
            std::vector<std::string> message;
            for (const auto& f : pending_failures) {
                index.push_back(f.index);
                message.push_back(f.message);
            }
            detail::write_rows(ds_fail_index.get(), H5T_NATIVE_UINT64, index.data(),
                               failures_written, index.size(), at("/failures/index"));
            detail::write_string_rows(ds_fail_message.get(), message, failures_written,
                                      at("/failures/message"));
            failures_written += index.size();
            pending_failures.clear();
        }
    }

    /// Phase 1 of a commit: appends the filtered reasons new to the file, with count 0 (the
    /// counts of the last commit, which still go with its next_index). Strings once written
    /// are never rewritten: a rewritten string moves in the global heap, and a writer stopped
    /// half-way would leave committed rows pointing at nothing. A resume that recounted the
    /// counts rewrites the table once, in the recount's order.
    void append_filtered_reasons() {
        std::size_t first_new = filtered_order.size();
        const bool replace = filtered_replace;
        if (replace) {
            filtered_order.clear();
            first_new = 0;
            filtered_replace = false;
        }
        for (const auto& [reason, count] : filtered) {
            if (std::find(filtered_order.begin(), filtered_order.end(), reason) ==
                filtered_order.end()) {
                filtered_order.push_back(reason);
            }
        }
        if (filtered_order.size() == first_new && !replace) return;
        filtered_counts.resize(first_new);
        filtered_counts.resize(filtered_order.size(), 0);
        const std::vector<std::string> added(filtered_order.begin() + static_cast<long>(first_new),
                                             filtered_order.end());
        detail::resize_rows(ds_filtered_reason.get(), filtered_order.size(),
                            at("/filtered/reason"));
        detail::resize_rows(ds_filtered_count.get(), filtered_order.size(), at("/filtered/count"));
        detail::write_string_rows(ds_filtered_reason.get(), added, first_new,
                                  at("/filtered/reason"));
        detail::write_rows(ds_filtered_count.get(), H5T_NATIVE_UINT64, filtered_counts.data(), 0,
                           filtered_counts.size(), at("/filtered/count"));
    }

    /// Phase 2: the counts that go with the new next_index, in place.
    std::uint64_t write_filtered_counts() {
        std::vector<std::uint64_t> counts;
        for (const auto& reason : filtered_order) {
            std::uint64_t count = 0;
            for (const auto& [r, c] : filtered) {
                if (r == reason) count = c;
            }
            counts.push_back(count);
        }
        if (counts != filtered_counts) {
            detail::write_rows(ds_filtered_count.get(), H5T_NATIVE_UINT64, counts.data(), 0,
                               counts.size(), at("/filtered/count"));
            filtered_counts = counts;
        }
        return std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
    }

    /// Whether a commit at `next_index` would change the file.
    bool commit_changes(std::uint64_t next_index) const {
        if (next_index != committed.next_index || total_rows != committed.rows ||
            !pending_reasons.empty() || !pending_failures.empty() || filtered_replace) {
            return true;
        }
        std::uint64_t sum = 0;
        for (const auto& [reason, count] : filtered) {
            sum += count;
            if (std::find(filtered_order.begin(), filtered_order.end(), reason) ==
                filtered_order.end()) {
                return true;
            }
        }
        return sum != committed.filtered_sum;
    }

    void commit(std::uint64_t next_index) {
        if (!commit_changes(next_index)) return;
        writing([&] {
            reserve(bytes_needed(total_rows));
            // Phase 1: everything the commit will point to.
            write_rows([&](const detail::RowColumn&) { return total_rows; });
            write_new_reasons_and_failures();
            append_filtered_reasons();
            flush_file();
            // Phase 2: what makes it visible.
            const std::uint64_t filtered_sum = write_filtered_counts();
            committed = {next_index, total_rows, reasons_written, failures_written, filtered_sum};
            detail::write_commit(file.get(), path, committed);
            const Where root = at("");
            detail::write_attribute(file.get(), "rows_committed", total_rows, root);
            detail::write_attribute(file.get(), "next_index", next_index, root);
            flush_file();
        });
        header.rows_committed = total_rows;
        header.next_index = next_index;
    }

    void write_status(const std::string& status) {
        writing([&] {
            header.status = status;
            header.updated = detail::now_iso8601();
            detail::write_attribute(file.get(), "status", status, at(""));
            detail::write_attribute(file.get(), "updated", header.updated, at(""));
            flush_file();
        });
    }

    /// Claims the file's next `bytes` bytes past HDF5's end of allocated space before HDF5
    /// writes them: fallocate(2) extends the file with real blocks, or, where the file system
    /// cannot, ftruncate(2) extends it sparsely. Two reasons: (1) a full disk stops the writer
    /// here, before a write fails half-way (HDF5 keeps flushing after a failed write); (2) the
    /// file's size is then always past everything this writer may have allocated, so a resume
    /// after a crash starts allocating past it (H5Fincrement_filesize), never over space that a
    /// dead writer's metadata may still point to. HDF5 trims the file to its allocated end when
    /// it closes it.
    void reserve(std::uint64_t bytes) {
        if (reserve_fd < 0 || bytes == 0) return;
        haddr_t eoa = 0;
        struct stat st {};
        if (H5Fget_eoa(file.get(), &eoa) < 0 || ::fstat(reserve_fd, &st) != 0) {
            H5Eclear2(H5E_DEFAULT);
            return;
        }
        const auto size = static_cast<std::uint64_t>(st.st_size);
        const std::uint64_t target = eoa + bytes;
        if (size >= target) return;
        if (reserve_supported) {
            if (::fallocate(reserve_fd, 0, static_cast<off_t>(size),
                            static_cast<off_t>(target - size)) == 0) {
                return;
            }
            const int error_number = errno;
            if (error_number != EOPNOTSUPP && error_number != ENOSYS && error_number != EINVAL) {
                reservation_failed(bytes, error_number);
            }
            reserve_supported = false;
        }
        if (::ftruncate(reserve_fd, static_cast<off_t>(target)) != 0) {
            reservation_failed(bytes, errno);
        }
    }

    [[noreturn]] void reservation_failed(std::uint64_t bytes, int error_number) {
        broken = true;
        const std::string reason = detail::system_error_text(error_number);
        throw StorageError(path + ": cannot reserve " + std::to_string(bytes) +
                               " bytes for the next rows: " + reason,
                           path, error_number, reason);
    }

    /// Bytes the rows up to `rows` of every dataset may add to the file, with room for a raw
    /// chunk and metadata per dataset and for the pending strings.
    std::uint64_t bytes_needed(std::uint64_t rows) const {
        std::uint64_t bytes = 64 * 1024;
        for (const auto& c : row_columns) {
            bytes += (rows - std::min(rows, c.file.rows())) * c.file.row_bytes() +
                     c.file.chunk_rows() * c.file.row_bytes() + 1024;
        }
        for (const auto& r : pending_reasons) bytes += 2 * r.size() + 64;
        for (const auto& f : pending_failures) bytes += 2 * f.message.size() + 64;
        return bytes;
    }

    /// After a failed write: lets every handle go without closing (closing flushes), so that
    /// the file keeps its last commit.
    void abandon() noexcept {
        for (auto& c : row_columns) c.file.abandon();
        row_columns.clear();
        for (Handle* h : {&ds_reasons, &ds_fail_index, &ds_fail_message, &ds_filtered_reason,
                          &ds_filtered_count, &pareto, &file}) {
            h->abandon();
        }
    }

    void close() {
        if (closed) return;
        closed = true;
        // Never invent progress: the filtered counts and failures go with the caller's last
        // next_index. Rows at or past it are kept but dropped (and redone) by a resume.
        std::exception_ptr error;
        if (!broken) {
            try {
                commit(latest_next_index);
            } catch (...) {
                error = std::current_exception();
            }
        }
        if (reserve_fd >= 0) ::close(reserve_fd);
        reserve_fd = -1;
        if (broken) {
            abandon();
            lock.release();
            if (error) std::rethrow_exception(error);
            return;
        }
        row_columns.clear();
        for (Handle* h : {&ds_reasons, &ds_fail_index, &ds_fail_message, &ds_filtered_reason,
                          &ds_filtered_count, &pareto, &status_type}) {
            h->close();
        }
        enum_types.clear();
        haddr_t eoa = 0;
        const bool known_end = H5Fget_eoa(file.get(), &eoa) >= 0;
        const bool failed = file.close() < 0;
        // The reservations past the allocated end (reserve) are given back.
        if (!failed && known_end) {
            std::error_code ec;
            if (std::filesystem::file_size(path, ec) > eoa && !ec) {
                std::filesystem::resize_file(path, eoa, ec);
            }
        }
        lock.release();
        if (failed && !broken) detail::fail(path, "", "cannot close");
    }

    // ---- resume ----------------------------------------------------------------------------

    void trim_to(const detail::ResumeState& state);
    void repair_filtered(const FilteredRecount& recount);
};

}  // namespace prism::io
