// ResultWriter: the writing side of the result file (format and crash safety: result_store.hpp).

#include "io/result_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <set>
#include <utility>

#include <hdf5.h>

#include "io/detail/file_lock.hpp"
#include "io/detail/hdf5_handle.hpp"
#include "io/detail/hdf5_util.hpp"
#include "io/detail/result_format.hpp"
#include "io/detail/result_writer.hpp"
#include "io/detail/row_column.hpp"
#include "io/sha256.hpp"
#include "src/common/error.hpp"

#ifndef PRISM_VERSION
#define PRISM_VERSION "unknown"
#endif

namespace prism::io {

using detail::Handle;
using detail::invalid;
using detail::Where;

// ---------------------------------------------------------------------------------------------
// Creation

namespace {

void check_target(const std::string& path, bool overwrite) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(status)) return;
    if (!std::filesystem::is_regular_file(status)) {
        invalid(path, "not a regular file (a result file must be one)");
    }
    if (!overwrite) invalid(path, "file exists (use --overwrite to replace it)");
}

/// The name the new file is built under, beside it: ".NAME.PID.tmp".
std::string temporary_name(const std::string& path) {
    const std::filesystem::path p(path);
    return (p.parent_path() /
            ("." + p.filename().string() + "." + std::to_string(::getpid()) + ".tmp"))
        .string();
}

/// Temporary files of writers of `path` that were killed while building it (the caller holds
/// the claim, so none is in use).
void remove_stale_temporaries(const std::string& path) {
    const std::filesystem::path p(path);
    const std::string prefix = "." + p.filename().string() + ".";
    std::error_code ec;
    const auto dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(prefix, 0) == 0 && name.size() > 4 &&
            name.compare(name.size() - 4, 4, ".tmp") == 0) {
            std::filesystem::remove(entry.path(), ec);
        }
    }
}

/// Builds the complete file under a temporary name and renames it over `path`.
void build_file(const std::string& path, const ResultHeader& header,
                const std::vector<ColumnSpec>& columns, const MetricSchema& metrics,
                std::size_t chunk_rows) {
    const std::string temporary = temporary_name(path);
    const Where where{path, ""};
    try {
        Handle fapl = detail::writer_access_plist(where);
        Handle fcpl = detail::file_create_plist(where);
        Handle file = detail::file_handle(
            H5Fcreate(temporary.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()));
        if (!file) detail::fail(path, "", "cannot create");
        detail::create_layout(file.get(), path, header, columns, metrics, chunk_rows);
        if (file.close() < 0) detail::fail(path, "", "cannot create");
        if (std::rename(temporary.c_str(), path.c_str()) != 0) {
            const int error_number = errno;
            const std::string reason = detail::system_error_text(error_number);
            throw StorageError(path + ": cannot create: " + reason, path, error_number, reason);
        }
    } catch (...) {
        std::remove(temporary.c_str());
        throw;
    }
}

}  // namespace

std::string result_file_writer(const std::string& path) {
    return detail::FileLock::live_holder(path);
}

void add_filtered(FilteredCounts& counts, const std::string& reason, std::uint64_t count) {
    for (auto& [r, c] : counts) {
        if (r == reason) {
            c += count;
            return;
        }
    }
    counts.emplace_back(reason, count);
}

void check_not_in_use(const std::string& path) { detail::FileLock::acquire(path).release(); }

struct ResultFileClaim::Lock {
    detail::FileLock lock;
};

ResultFileClaim::ResultFileClaim(const std::string& path)
    : lock_(std::make_unique<Lock>(Lock{detail::FileLock::acquire(path)})) {}

ResultFileClaim::~ResultFileClaim() = default;

std::size_t chunk_rows_for(std::uint64_t space_size) {
    std::size_t rows = 64;
    while (rows < kDefaultChunkRows && rows * 16 < space_size) rows *= 2;
    return rows;
}

ResultWriter::ResultWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResultWriter::ResultWriter(ResultWriter&&) noexcept = default;
ResultWriter& ResultWriter::operator=(ResultWriter&&) noexcept = default;

ResultWriter::~ResultWriter() {
    if (!impl_) return;
    try {
        impl_->close();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor closes quietly
    }
}

ResultWriter ResultWriter::create(const std::string& path, const ResultHeader& header,
                                  const std::vector<ColumnSpec>& point_columns,
                                  const MetricSchema& metric_schema, bool overwrite,
                                  std::size_t chunk_rows) {
    detail::silence_errors();
    // Everything is checked before the file system is touched, and the claim is taken before
    // the file is.
    detail::check_declarations(path, point_columns, metric_schema, header.pareto_sets, chunk_rows);
    check_target(path, overwrite);
    auto impl = std::make_unique<Impl>();
    impl->lock = detail::FileLock::acquire(path);
    check_target(path, overwrite);  // again, now that no other writer can make it
    remove_stale_temporaries(path);

    impl->path = path;
    impl->header = header;
    impl->columns = point_columns;
    impl->schema = metric_schema;
    ResultHeader& h = impl->header;
    if (h.program_version.empty()) h.program_version = PRISM_VERSION;
    h.experiment_sha256 = detail::expected_sha(header);
    h.format_version = kResultFormatVersion;
    h.status = "running";
    h.next_index = 0;
    h.rows_committed = 0;
    h.created = h.updated = detail::now_iso8601();
    build_file(path, h, point_columns, metric_schema, chunk_rows);

    impl->file = detail::open_result_file(path, detail::OpenMode::write_swmr);
    impl->reserve_fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    impl->make_types();
    impl->open_datasets();
    return ResultWriter(std::move(impl));
}

// ---------------------------------------------------------------------------------------------
// Writing

const ResultHeader& ResultWriter::header() const { return impl_->header; }
const std::vector<ColumnSpec>& ResultWriter::point_columns() const { return impl_->columns; }
const MetricSchema& ResultWriter::metric_schema() const { return impl_->schema; }
std::uint64_t ResultWriter::next_index() const { return impl_->header.next_index; }
std::uint64_t ResultWriter::rows() const { return impl_->total_rows; }
const std::string& ResultWriter::rebuilt() const { return impl_->rebuilt; }

ResultReader ResultWriter::committed() const {
    const Impl& w = *impl_;
    w.check_usable("committed");
    if (w.appended) {
        invalid(w.path, "the committed rows can be read only before the first append");
    }
    const hid_t reopened = H5Freopen(w.file.get());
    if (reopened < 0) detail::fail(w.path, "", "cannot reopen");
    return ResultReader(w.path, reopened);
}

namespace {

/// Checks a batch against the writer's columns; returns each column's slot in the batch's
/// int_columns or float_columns.
std::vector<std::size_t> check_batch(const std::string& path, const RowBatch& batch,
                                     const std::vector<ColumnSpec>& columns,
                                     const MetricSchema& schema, std::size_t bins) {
    const std::size_t n = batch.size();
    auto need = [&](std::size_t got, std::size_t want, const std::string& what) {
        if (got != want) {
            invalid(path, "append: " + what + " has " + std::to_string(got) +
                              " entries, expected " + std::to_string(want));
        }
    };
    std::vector<std::size_t> slots;
    std::size_t ints = 0;
    std::size_t floats = 0;
    for (const auto& c : columns) {
        slots.push_back(c.type == ColumnSpec::Type::float64 ? floats++ : ints++);
    }
    need(batch.status.size(), n, "status");
    need(batch.reason.size(), n, "reason");
    need(batch.int_columns.size(), ints, "int_columns");
    need(batch.float_columns.size(), floats, "float_columns");
    need(batch.metrics.size(), schema.size(), "metrics");
    for (std::size_t i = 0; i < columns.size(); ++i) {
        const auto& c = columns[i];
        const std::string what = "column '" + c.name + "'";
        if (c.type == ColumnSpec::Type::float64) {
            need(batch.float_columns[slots[i]].size(), n, what);
            continue;
        }
        const auto& values = batch.int_columns[slots[i]];
        need(values.size(), n, what);
        if (c.type != ColumnSpec::Type::enumeration) continue;
        for (const std::int64_t v : values) {
            if (v < 0 || v >= static_cast<std::int64_t>(c.labels.size())) {
                invalid(path, "append: " + what + ": value " + std::to_string(v) +
                                  " is not a label index (0.." +
                                  std::to_string(c.labels.size() - 1) + ")");
            }
        }
    }
    for (std::size_t m = 0; m < schema.size(); ++m) {
        need(batch.metrics[m].size(), n, "metric '" + schema[m].name + "'");
    }
    need(batch.histogram.size(), n * bins, "histogram");
    need(batch.histogram_lo_s.size(), bins > 0 ? n : 0, "histogram_lo_s");
    need(batch.histogram_hi_s.size(), bins > 0 ? n : 0, "histogram_hi_s");
    for (const auto s : batch.status) {
        if (static_cast<std::size_t>(s) >= detail::kStatusLabels.size()) {
            invalid(path, "append: invalid point status " + std::to_string(static_cast<int>(s)));
        }
    }
    return slots;
}

}  // namespace

void ResultWriter::append(const RowBatch& batch) {
    Impl& w = *impl_;
    w.check_usable("append");
    const std::vector<std::size_t> slots =
        check_batch(w.path, batch, w.columns, w.schema, w.header.histogram_bins);
    bool has_last = w.has_last;
    std::uint64_t last = w.last_index;
    for (const std::uint64_t index : batch.index) {
        if ((has_last && index <= last) || (!has_last && index < w.header.next_index)) {
            invalid(w.path, "append: index " + std::to_string(index) + " does not follow " +
                                (has_last ? std::to_string(last)
                                          : "next_index " + std::to_string(w.header.next_index)));
        }
        has_last = true;
        last = index;
    }
    w.has_last = has_last;
    w.last_index = last;
    w.appended = true;
    w.buffer_batch(batch, slots);
    // Whole chunks go to the file at once (bounded memory), committed by the next flush.
    w.writing([&] {
        w.reserve(w.bytes_needed(w.total_rows));
        w.write_rows([&](const detail::RowColumn& c) { return c.whole_chunks(w.total_rows); });
    });
}

void ResultWriter::add_failure(std::uint64_t index, const std::string& message) {
    impl_->check_usable("add_failure");
    impl_->pending_failures.push_back({index, message});
}

void ResultWriter::flush(std::uint64_t next_index) {
    Impl& w = *impl_;
    w.check_usable("flush");
    if (next_index < w.latest_next_index) {
        invalid(w.path, "flush: next_index " + std::to_string(next_index) + " is below " +
                            std::to_string(w.latest_next_index));
    }
    if (w.has_last && next_index <= w.last_index) {
        invalid(w.path, "flush: next_index " + std::to_string(next_index) +
                            " does not pass the last appended index " +
                            std::to_string(w.last_index));
    }
    w.latest_next_index = next_index;
    w.commit(next_index);
}

void ResultWriter::set_filtered(const FilteredCounts& counts) {
    impl_->check_usable("set_filtered");
    impl_->filtered = counts;
}

void ResultWriter::write_pareto(const std::string& name, const std::vector<std::string>& objectives,
                                const std::vector<std::string>& senses,
                                const std::vector<std::uint64_t>& indices) {
    Impl& w = *impl_;
    w.check_usable("write_pareto");
    const std::string object = "/pareto/" + name;
    const auto& sets = w.header.pareto_sets;
    const auto set =
        std::find_if(sets.begin(), sets.end(), [&](const ParetoSpec& p) { return p.name == name; });
    if (set == sets.end()) invalid(w.path, object + ": not declared when the file was created");
    if (set->objectives != objectives || set->senses != senses) {
        invalid(w.path, object + ": objectives or senses differ from the declared ones");
    }
    std::vector<std::uint64_t> sorted = indices;
    std::sort(sorted.begin(), sorted.end());
    w.writing([&] {
        Handle group = detail::open_group(w.pareto.get(), name, w.at("/pareto"));
        Handle ds = detail::open_dataset(group.get(), "index", w.at(object));
        detail::resize_rows(ds.get(), sorted.size(), w.at(object + "/index"));
        detail::write_rows(ds.get(), H5T_NATIVE_UINT64, sorted.data(), 0, sorted.size(),
                           w.at(object + "/index"));
        w.flush_file();
    });
}

void ResultWriter::set_status(const std::string& status) {
    Impl& w = *impl_;
    w.check_usable("set_status");
    const auto& valid = detail::kValidStatus;
    if (std::find(valid.begin(), valid.end(), status) == valid.end()) {
        invalid(w.path, "invalid status '" + status +
                            "' (expected running, interrupted, complete or failed)");
    }
    // A final status ("complete", "interrupted") must describe committed data: commit all
    // rows first, with the next_index of the last flush.
    w.commit(w.latest_next_index);
    w.write_status(status);
}

void ResultWriter::close() {
    if (impl_) impl_->close();
}

}  // namespace prism::io
