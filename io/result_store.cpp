#include "io/result_store.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>

#include <hdf5.h>

#include "io/detail/hdf5_handle.hpp"
#include "io/detail/hdf5_util.hpp"
#include "io/sha256.hpp"
#include "src/common/error.hpp"

#ifndef PRISM_VERSION
#define PRISM_VERSION "unknown"
#endif

namespace prism::io {

using detail::Handle;
using detail::Where;

namespace {

const std::vector<std::string> kStatusLabels = {"ok", "infeasible", "failed", "dominated"};
const std::vector<std::string> kValidStatus = {"running", "interrupted", "complete", "failed"};
constexpr const char* kHistogram = "step_time";
constexpr const char* kHistogramLo = "step_time_lo_s";
constexpr const char* kHistogramHi = "step_time_hi_s";

std::string now_iso8601() {
    const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm utc{};
    gmtime_r(&now, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

std::string short_hash(const std::string& hex) {
    return hex.size() > 12 ? hex.substr(0, 12) + "..." : hex;
}

std::string expected_sha(const ResultHeader& header) {
    return header.experiment_sha256.empty() ? sha256_hex(header.experiment_toml)
                                            : header.experiment_sha256;
}

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
    throw IoError(path + ": " + what);
}

bool valid_name(const std::string& name) {
    return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

Handle open_file(const std::string& path, bool write) {
    detail::silence_errors();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) invalid(path, "cannot open: no such file");
    const htri_t is_hdf5 = detail::is_hdf5_file(path);
    if (is_hdf5 == 0) invalid(path, "cannot open: not an HDF5 file");
    if (is_hdf5 < 0) detail::fail(path, "", "cannot open");
    Handle fapl = detail::file_access_plist({path, ""});
    Handle file = detail::file_handle(
        H5Fopen(path.c_str(), write ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl.get()));
    if (!file) detail::fail(path, "", write ? "cannot open for writing" : "cannot open");
    return file;
}

/// Reads and checks the root attributes: format name and version.
ResultHeader read_header(hid_t file, const std::string& path) {
    const Where root{path, ""};
    if (!detail::has_attribute(file, "format", root)) {
        invalid(path, "not a prism result file (no 'format' attribute)");
    }
    const std::string format = detail::read_string_attribute(file, "format", root);
    if (format != kResultFormat) {
        invalid(path, "not a prism result file (format '" + format + "')");
    }
    ResultHeader h;
    h.format_version = detail::read_i64_attribute(file, "format_version", root);
    if (h.format_version != kResultFormatVersion) {
        invalid(path, "unsupported format_version " + std::to_string(h.format_version) +
                          " (this program reads " + std::to_string(kResultFormatVersion) + ")");
    }
    h.program_version = detail::read_string_attribute(file, "program_version", root);
    // files from before the attribute existed have none
    h.model_version = detail::has_attribute(file, "model_version", root)
                          ? detail::read_string_attribute(file, "model_version", root)
                          : std::string();
    h.experiment_name = detail::read_string_attribute(file, "experiment_name", root);
    h.experiment_toml = detail::read_string_attribute(file, "experiment_toml", root);
    h.experiment_sha256 = detail::read_string_attribute(file, "experiment_sha256", root);
    h.seed = detail::read_u64_attribute(file, "seed", root);
    h.space_size = detail::read_u64_attribute(file, "space_size", root);
    h.status = detail::read_string_attribute(file, "status", root);
    h.next_index = detail::read_u64_attribute(file, "next_index", root);
    h.rows_committed = detail::read_u64_attribute(file, "rows_committed", root);
    h.created = detail::read_string_attribute(file, "created", root);
    h.updated = detail::read_string_attribute(file, "updated", root);
    return h;
}

std::string optional_string_attribute(hid_t obj, const std::string& name, const Where& where) {
    return detail::has_attribute(obj, name, where) ? detail::read_string_attribute(obj, name, where)
                                                   : std::string();
}

struct Layout {
    std::vector<ColumnSpec> columns;
    MetricSchema metrics;
    std::size_t histogram_bins = 0;
};

Layout read_layout(hid_t file, const std::string& path) {
    Layout layout;
    const Where root{path, ""};
    Handle points = detail::open_group(file, "points", root);
    const Where at_points{path, "/points"};
    for (const auto& name : detail::read_strings_attribute(points.get(), "columns", at_points)) {
        const Where where{path, "/points/" + name};
        Handle dataset = detail::open_dataset(points.get(), name, at_points);
        Handle type = detail::type_handle(H5Dget_type(dataset.get()));
        if (!type) detail::fail(path, where.object, "cannot get the type");
        ColumnSpec column;
        column.name = name;
        switch (H5Tget_class(type.get())) {
            case H5T_INTEGER:
                column.type = ColumnSpec::Type::int64;
                break;
            case H5T_FLOAT:
                column.type = ColumnSpec::Type::float64;
                break;
            case H5T_ENUM:
                column.type = ColumnSpec::Type::enumeration;
                column.labels = detail::enum_labels(type.get(), where);
                break;
            default:
                invalid(path, where.object + ": unsupported column type");
        }
        column.unit = optional_string_attribute(dataset.get(), "unit", where);
        column.description = optional_string_attribute(dataset.get(), "description", where);
        layout.columns.push_back(std::move(column));
    }
    Handle metrics = detail::open_group(file, "metrics", root);
    const Where at_metrics{path, "/metrics"};
    for (const auto& name : detail::read_strings_attribute(metrics.get(), "columns", at_metrics)) {
        const Where where{path, "/metrics/" + name};
        Handle dataset = detail::open_dataset(metrics.get(), name, at_metrics);
        layout.metrics.push_back({name, optional_string_attribute(dataset.get(), "unit", where),
                                  optional_string_attribute(dataset.get(), "description", where)});
    }
    if (detail::link_exists(file, "histograms", root)) {
        Handle histograms = detail::open_group(file, "histograms", root);
        Handle dataset = detail::open_dataset(histograms.get(), kHistogram, {path, "/histograms"});
        Handle space = detail::space_handle(H5Dget_space(dataset.get()));
        std::array<hsize_t, 2> dims{};
        if (!space || H5Sget_simple_extent_ndims(space.get()) != 2 ||
            H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
            invalid(path, "/histograms/step_time: expected a 2-D dataset");
        }
        layout.histogram_bins = dims[1];
    }
    return layout;
}

void write_unit(hid_t dataset, const std::string& unit, const std::string& description,
                const Where& where) {
    detail::write_attribute(dataset, "unit", unit, where);
    detail::write_attribute(dataset, "description", description, where);
}

/// Reads the first `count` values of an integer or enumeration dataset as int64.
std::vector<std::int64_t> read_integers(hid_t dataset, std::uint64_t count, const Where& where) {
    std::vector<std::int64_t> out(count, 0);
    if (count == 0) return out;
    Handle type = detail::type_handle(H5Dget_type(dataset));
    if (!type) detail::fail(where.file, where.object, "cannot get the type");
    const H5T_class_t type_class = H5Tget_class(type.get());
    if (type_class == H5T_INTEGER) {
        detail::read_rows(dataset, H5T_NATIVE_INT64, out.data(), count, where);
    } else if (type_class == H5T_ENUM) {
        // HDF5 converts enums only to enums: read the raw values in the native enum type,
        // then widen its integer base in place (the buffer has 8 bytes per value).
        Handle native = detail::type_handle(H5Tget_native_type(type.get(), H5T_DIR_ASCEND));
        Handle base = detail::type_handle(H5Tget_super(native.get()));
        if (!native || !base) detail::fail(where.file, where.object, "cannot get the type");
        detail::read_rows(dataset, native.get(), out.data(), count, where);
        if (H5Tconvert(base.get(), H5T_NATIVE_INT64, count, out.data(), nullptr, H5P_DEFAULT) < 0) {
            detail::fail(where.file, where.object, "cannot convert enumeration values");
        }
    } else {
        invalid(where.file, where.object + ": not an integer column");
    }
    return out;
}

std::vector<double> read_doubles(hid_t dataset, std::uint64_t count, const Where& where) {
    std::vector<double> out(count, 0.0);
    detail::read_rows(dataset, H5T_NATIVE_DOUBLE, out.data(), count, where);
    return out;
}

std::vector<std::uint64_t> read_u64s(hid_t dataset, std::uint64_t count, const Where& where) {
    std::vector<std::uint64_t> out(count, 0);
    detail::read_rows(dataset, H5T_NATIVE_UINT64, out.data(), count, where);
    return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ResultWriter

class ResultWriter::Impl {
  public:
    std::string path;
    ResultHeader header;
    std::vector<ColumnSpec> columns;
    MetricSchema schema;
    std::size_t chunk = kDefaultChunkRows;

    Handle file, points, metrics, failures, pareto;
    Handle ds_index, ds_status, ds_reason_id, ds_reasons, ds_fail_index, ds_fail_message;
    std::vector<Handle> ds_columns;  // per declared column
    std::vector<Handle> ds_metrics;  // per metric
    Handle ds_hist, ds_hist_lo, ds_hist_hi;
    Handle status_type;
    std::vector<Handle> enum_types;  // per declared column (empty handle unless enumeration)
    std::vector<std::size_t> slot;   // per declared column: index into int or float columns
    std::size_t int_count = 0, float_count = 0;

    std::uint64_t rows_written = 0;      // rows in the file
    std::uint64_t reasons_written = 0;   // interned reasons in the file
    std::uint64_t failures_written = 0;  // failures in the file
    bool has_last = false;
    std::uint64_t last_index = 0;
    bool closed = false;

    // Buffered rows, column-major.
    std::vector<std::uint64_t> b_index;
    std::vector<std::uint8_t> b_status;
    std::vector<std::int32_t> b_reason;
    std::vector<std::vector<std::int64_t>> b_int;
    std::vector<std::vector<double>> b_float;
    std::vector<std::vector<double>> b_metrics;
    std::vector<float> b_hist;
    std::vector<double> b_lo, b_hi;
    std::map<std::string, std::int32_t> reason_ids;
    std::vector<std::string> pending_reasons;
    std::vector<FailureRecord> pending_failures;
    std::optional<std::map<std::string, std::uint64_t>> filtered;  // latest set_filtered
    std::optional<std::map<std::string, std::uint64_t>> filtered_written;

    /// State at a flush call, committed once its rows lie in whole chunks of the file.
    struct Checkpoint {
        std::uint64_t next_index = 0;
        std::uint64_t rows = 0;
        std::uint64_t reasons = 0;
        std::uint64_t failures = 0;
        std::optional<std::map<std::string, std::uint64_t>> filtered;
        std::chrono::steady_clock::time_point time;
    };
    std::vector<Checkpoint> checkpoints;
    double max_commit_lag_s = kDefaultMaxCommitLagSeconds;

    Where at(const std::string& object) const { return Where{path, object}; }

    void index_columns() {
        slot.clear();
        int_count = float_count = 0;
        enum_types.clear();
        for (const auto& c : columns) {
            if (c.type == ColumnSpec::Type::float64) {
                slot.push_back(float_count++);
                enum_types.emplace_back();
            } else {
                slot.push_back(int_count++);
                enum_types.push_back(c.type == ColumnSpec::Type::enumeration
                                         ? detail::enum_type(c.labels, at("/points/" + c.name))
                                         : Handle());
            }
        }
        status_type = detail::enum_type(kStatusLabels, at("/points/status"));
        b_int.assign(int_count, {});
        b_float.assign(float_count, {});
        b_metrics.assign(schema.size(), {});
    }

    std::size_t buffered() const { return b_index.size(); }

    /// Writes the first `n` buffered rows at the end of the file's rows and drops them from
    /// the buffer.
    void write_buffer(std::uint64_t n) {
        if (n == 0) return;
        const std::uint64_t start = rows_written;
        detail::write_rows(ds_index.get(), H5T_NATIVE_UINT64, b_index.data(), start, n,
                           at("/points/index"));
        detail::write_rows(ds_status.get(), status_type.get(), b_status.data(), start, n,
                           at("/points/status"));
        detail::write_rows(ds_reason_id.get(), H5T_NATIVE_INT32, b_reason.data(), start, n,
                           at("/points/reason_id"));
        for (std::size_t i = 0; i < columns.size(); ++i) {
            const auto& c = columns[i];
            const Where where = at("/points/" + c.name);
            if (c.type == ColumnSpec::Type::float64) {
                detail::write_rows(ds_columns[i].get(), H5T_NATIVE_DOUBLE, b_float[slot[i]].data(),
                                   start, n, where);
            } else if (c.type == ColumnSpec::Type::int64) {
                detail::write_rows(ds_columns[i].get(), H5T_NATIVE_INT64, b_int[slot[i]].data(),
                                   start, n, where);
            } else {
                std::vector<std::uint8_t> values(b_int[slot[i]].begin(),
                                                 b_int[slot[i]].begin() + static_cast<long>(n));
                detail::write_rows(ds_columns[i].get(), enum_types[i].get(), values.data(), start,
                                   n, where);
            }
        }
        for (std::size_t m = 0; m < schema.size(); ++m) {
            detail::write_rows(ds_metrics[m].get(), H5T_NATIVE_DOUBLE, b_metrics[m].data(), start,
                               n, at("/metrics/" + schema[m].name));
        }
        if (header.histogram_bins > 0) {
            detail::write_rows(ds_hist.get(), H5T_NATIVE_FLOAT, b_hist.data(), start, n,
                               at("/histograms/step_time"));
            detail::write_rows(ds_hist_lo.get(), H5T_NATIVE_DOUBLE, b_lo.data(), start, n,
                               at("/histograms/step_time_lo_s"));
            detail::write_rows(ds_hist_hi.get(), H5T_NATIVE_DOUBLE, b_hi.data(), start, n,
                               at("/histograms/step_time_hi_s"));
        }
        rows_written += n;
        auto drop = [n](auto& v, std::uint64_t per_row = 1) {
            v.erase(v.begin(), v.begin() + static_cast<long>(n * per_row));
        };
        drop(b_index);
        drop(b_status);
        drop(b_reason);
        for (auto& v : b_int) drop(v);
        for (auto& v : b_float) drop(v);
        for (auto& v : b_metrics) drop(v);
        drop(b_hist, header.histogram_bins);
        drop(b_lo, header.histogram_bins > 0 ? 1 : 0);
        drop(b_hi, header.histogram_bins > 0 ? 1 : 0);
    }

    /// Writes the buffered rows that complete whole chunks of the file. A chunk is written
    /// once, full, and never rewritten: a rewritten compressed chunk moves, and if the writer
    /// is killed before the chunk index on disk follows, committed rows would be lost.
    void write_full_chunks() {
        const std::uint64_t total = rows_written + buffered();
        const std::uint64_t aligned = total / chunk * chunk;
        if (aligned > rows_written) write_buffer(aligned - rows_written);
    }

    /// Writes the interned reasons and failures up to the given counts.
    void write_reasons_and_failures(std::uint64_t reason_count, std::uint64_t failure_count) {
        if (reason_count > reasons_written) {
            const auto n = static_cast<long>(reason_count - reasons_written);
            const std::vector<std::string> batch(pending_reasons.begin(),
                                                 pending_reasons.begin() + n);
            detail::write_string_rows(ds_reasons.get(), batch, reasons_written, at("/reasons"));
            pending_reasons.erase(pending_reasons.begin(), pending_reasons.begin() + n);
            reasons_written = reason_count;
        }
        if (failure_count > failures_written) {
            const auto n = static_cast<std::size_t>(failure_count - failures_written);
            std::vector<std::uint64_t> index;
            std::vector<std::string> message;
            for (std::size_t k = 0; k < n; ++k) {
                index.push_back(pending_failures[k].index);
                message.push_back(pending_failures[k].message);
            }
            detail::write_rows(ds_fail_index.get(), H5T_NATIVE_UINT64, index.data(),
                               failures_written, n, at("/failures/index"));
            detail::write_string_rows(ds_fail_message.get(), message, failures_written,
                                      at("/failures/message"));
            pending_failures.erase(pending_failures.begin(),
                                   pending_failures.begin() + static_cast<long>(n));
            failures_written = failure_count;
        }
    }

    Checkpoint checkpoint(std::uint64_t next_index) const {
        return {next_index,
                rows_written + buffered(),
                reasons_written + pending_reasons.size(),
                failures_written + pending_failures.size(),
                filtered,
                std::chrono::steady_clock::now()};
    }

    /// Commits the latest checkpoint whose rows are all in the file; returns whether one was.
    bool try_commit() {
        auto it = std::find_if(checkpoints.rbegin(), checkpoints.rend(),
                               [&](const Checkpoint& c) { return c.rows <= rows_written; });
        if (it == checkpoints.rend()) return false;
        const Checkpoint cp = *it;
        checkpoints.erase(checkpoints.begin(), it.base());
        write_reasons_and_failures(cp.reasons, cp.failures);
        if (cp.filtered && cp.filtered != filtered_written) {
            write_filtered(*cp.filtered);
            filtered_written = cp.filtered;
        }
        const Where root = at("");
        header.rows_committed = cp.rows;
        header.next_index = cp.next_index;
        header.updated = now_iso8601();
        detail::write_attribute(ds_reasons.get(), "committed", cp.reasons, at("/reasons"));
        detail::write_attribute(failures.get(), "committed", cp.failures, at("/failures"));
        detail::write_attribute(file.get(), "rows_committed", header.rows_committed, root);
        detail::write_attribute(file.get(), "next_index", header.next_index, root);
        detail::write_attribute(file.get(), "updated", header.updated, root);
        return true;
    }

    void write_filtered(const std::map<std::string, std::uint64_t>& counts) {
        Handle group = detail::open_group(file.get(), "filtered", at(""));
        const Where where = at("/filtered");
        Handle reason = detail::open_dataset(group.get(), "reason", where);
        Handle count = detail::open_dataset(group.get(), "count", where);
        std::vector<std::string> reasons;
        std::vector<std::uint64_t> values;
        for (const auto& [r, c] : counts) {
            reasons.push_back(r);
            values.push_back(c);
        }
        detail::resize_rows(reason.get(), reasons.size(), at("/filtered/reason"));
        detail::resize_rows(count.get(), values.size(), at("/filtered/count"));
        detail::write_string_rows(reason.get(), reasons, 0, at("/filtered/reason"));
        detail::write_rows(count.get(), H5T_NATIVE_UINT64, values.data(), 0, values.size(),
                           at("/filtered/count"));
    }

    void flush_file() {
        if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) detail::fail(path, "", "cannot flush");
    }

    /// flush(next_index): records a checkpoint, writes whole chunks, commits what it can.
    void commit(std::uint64_t next_index) {
        checkpoints.push_back(checkpoint(next_index));
        write_full_chunks();
        try_commit();
        // A slow sweep may take long to fill a chunk: past the lag limit, write the partial
        // chunk anyway. It will be rewritten elsewhere later (file space is not reused, so the
        // flushed state stays valid), at the cost of some dead space in the file.
        if (!checkpoints.empty()) {
            const std::chrono::duration<double> lag =
                std::chrono::steady_clock::now() - checkpoints.front().time;
            if (lag.count() >= max_commit_lag_s) {
                write_buffer(buffered());
                try_commit();
            }
        }
        flush_file();
    }

    /// next_index of the last flush (committed or not).
    std::uint64_t latest_next_index() const {
        return checkpoints.empty() ? header.next_index : checkpoints.back().next_index;
    }

    /// Writes everything, the last partial chunk too, and commits it.
    void commit_all(std::uint64_t next_index) {
        checkpoints.push_back(checkpoint(next_index));
        write_buffer(buffered());
        try_commit();
        flush_file();
    }

    void open_datasets() {
        const Where root = at("");
        points = detail::open_group(file.get(), "points", root);
        metrics = detail::open_group(file.get(), "metrics", root);
        failures = detail::open_group(file.get(), "failures", root);
        pareto = detail::open_group(file.get(), "pareto", root);
        const Where at_points = at("/points");
        ds_index = detail::open_dataset(points.get(), "index", at_points);
        ds_status = detail::open_dataset(points.get(), "status", at_points);
        ds_reason_id = detail::open_dataset(points.get(), "reason_id", at_points);
        ds_columns.clear();
        for (const auto& c : columns) {
            ds_columns.push_back(detail::open_dataset(points.get(), c.name, at_points));
        }
        ds_metrics.clear();
        for (const auto& m : schema) {
            ds_metrics.push_back(detail::open_dataset(metrics.get(), m.name, at("/metrics")));
        }
        ds_reasons = detail::open_dataset(file.get(), "reasons", root);
        ds_fail_index = detail::open_dataset(failures.get(), "index", at("/failures"));
        ds_fail_message = detail::open_dataset(failures.get(), "message", at("/failures"));
        if (header.histogram_bins > 0) {
            Handle group = detail::open_group(file.get(), "histograms", root);
            ds_hist = detail::open_dataset(group.get(), kHistogram, at("/histograms"));
            ds_hist_lo = detail::open_dataset(group.get(), kHistogramLo, at("/histograms"));
            ds_hist_hi = detail::open_dataset(group.get(), kHistogramHi, at("/histograms"));
        }
    }

    /// Every growing dataset that holds one entry per row of /points.
    std::vector<std::pair<hid_t, std::string>> row_datasets() const {
        std::vector<std::pair<hid_t, std::string>> out = {
            {ds_index.get(), "/points/index"},
            {ds_status.get(), "/points/status"},
            {ds_reason_id.get(), "/points/reason_id"}};
        for (std::size_t i = 0; i < columns.size(); ++i) {
            out.emplace_back(ds_columns[i].get(), "/points/" + columns[i].name);
        }
        for (std::size_t m = 0; m < schema.size(); ++m) {
            out.emplace_back(ds_metrics[m].get(), "/metrics/" + schema[m].name);
        }
        if (header.histogram_bins > 0) {
            out.emplace_back(ds_hist.get(), "/histograms/step_time");
            out.emplace_back(ds_hist_lo.get(), "/histograms/step_time_lo_s");
            out.emplace_back(ds_hist_hi.get(), "/histograms/step_time_hi_s");
        }
        return out;
    }

    void close() {
        if (closed) return;
        closed = true;
        // Never invent progress: the filtered counts and failures go with the caller's last
        // next_index. Rows at or past it are kept but dropped (and redone) by a resume.
        commit_all(latest_next_index());
        ds_columns.clear();
        ds_metrics.clear();
        for (Handle* h : {&ds_index, &ds_status, &ds_reason_id, &ds_reasons, &ds_fail_index,
                          &ds_fail_message, &ds_hist, &ds_hist_lo, &ds_hist_hi, &points, &metrics,
                          &failures, &pareto, &status_type}) {
            h->close();
        }
        enum_types.clear();
        if (file.close() < 0) detail::fail(path, "", "cannot close");
    }
};

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
    // Validate everything before touching the file system.
    std::set<std::string> names = {"index", "status", "reason_id"};
    for (const auto& c : point_columns) {
        if (!valid_name(c.name)) invalid(path, "invalid point column name '" + c.name + "'");
        if (!names.insert(c.name).second) {
            invalid(path, "duplicate or reserved point column name '" + c.name + "'");
        }
        if (c.type == ColumnSpec::Type::enumeration) {
            if (c.labels.empty() || c.labels.size() > 256) {
                invalid(path,
                        "point column '" + c.name + "': an enumeration needs 1 to 256 labels");
            }
            if (std::set<std::string>(c.labels.begin(), c.labels.end()).size() != c.labels.size()) {
                invalid(path, "point column '" + c.name + "': duplicate enumeration labels");
            }
        } else if (!c.labels.empty()) {
            invalid(path, "point column '" + c.name + "': labels given for a non-enumeration");
        }
    }
    std::set<std::string> metric_names;
    for (const auto& m : metric_schema) {
        if (!valid_name(m.name)) invalid(path, "invalid metric name '" + m.name + "'");
        if (!metric_names.insert(m.name).second) {
            invalid(path, "duplicate metric name '" + m.name + "'");
        }
    }
    if (chunk_rows == 0) invalid(path, "chunk_rows must be positive");

    std::error_code ec;
    if (std::filesystem::exists(path, ec) && !overwrite) {
        invalid(path, "file exists (use --overwrite to replace it)");
    }

    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->header = header;
    impl->columns = point_columns;
    impl->schema = metric_schema;
    impl->chunk = chunk_rows;
    ResultHeader& h = impl->header;
    if (h.program_version.empty()) h.program_version = PRISM_VERSION;
    h.experiment_sha256 = expected_sha(header);
    h.format_version = kResultFormatVersion;
    h.status = "running";
    h.next_index = 0;
    h.rows_committed = 0;
    h.created = h.updated = now_iso8601();

    // The default (earliest) library version bounds keep files readable by older HDF5 and
    // h5py, also after the writer was killed: never "latest".
    Handle fapl = detail::file_access_plist({path, ""});
    Handle fcpl = detail::file_create_plist({path, ""});
    impl->file = detail::file_handle(
        H5Fcreate(path.c_str(), overwrite ? H5F_ACC_TRUNC : H5F_ACC_EXCL, fcpl.get(), fapl.get()));
    if (!impl->file) detail::fail(path, "", "cannot create");
    const hid_t file = impl->file.get();
    const Where root{impl->path, ""};

    detail::write_attribute(file, "format", std::string(kResultFormat), root);
    detail::write_attribute(file, "format_version", kResultFormatVersion, root);
    detail::write_attribute(file, "program_version", h.program_version, root);
    detail::write_attribute(file, "model_version", h.model_version, root);
    detail::write_attribute(file, "experiment_name", h.experiment_name, root);
    detail::write_attribute(file, "experiment_toml", h.experiment_toml, root);
    detail::write_attribute(file, "experiment_sha256", h.experiment_sha256, root);
    detail::write_attribute(file, "seed", h.seed, root);
    detail::write_attribute(file, "space_size", h.space_size, root);
    detail::write_attribute(file, "status", h.status, root);
    detail::write_attribute(file, "next_index", h.next_index, root);
    detail::write_attribute(file, "rows_committed", h.rows_committed, root);
    detail::write_attribute(file, "created", h.created, root);
    detail::write_attribute(file, "updated", h.updated, root);

    impl->index_columns();
    Handle string_type = detail::vlen_string_type(root);
    {
        Handle points = detail::create_group(file, "points", root);
        const Where at_points{impl->path, "/points"};
        std::vector<std::string> column_names;
        for (const auto& c : point_columns) column_names.push_back(c.name);
        detail::write_attribute(points.get(), "columns", column_names, at_points);
        auto make = [&](const std::string& name, hid_t type, const std::string& unit,
                        const std::string& description) {
            const Where where{impl->path, "/points/" + name};
            Handle ds = detail::create_growing(points.get(), name, type, chunk_rows, {}, where);
            write_unit(ds.get(), unit, description, where);
            return ds;
        };
        make("index", H5T_STD_U64LE, "1", "design-space index of the point").reset();
        make("status", impl->status_type.get(), "1", "evaluation outcome").reset();
        make("reason_id", H5T_STD_I32LE, "1",
             "row of /reasons explaining an infeasible or failed point, -1 = none")
            .reset();
        for (std::size_t i = 0; i < point_columns.size(); ++i) {
            const auto& c = point_columns[i];
            const hid_t type = c.type == ColumnSpec::Type::float64 ? H5T_IEEE_F64LE
                               : c.type == ColumnSpec::Type::int64 ? H5T_STD_I64LE
                                                                   : impl->enum_types[i].get();
            make(c.name, type, c.unit, c.description).reset();
        }
    }
    {
        Handle metrics = detail::create_group(file, "metrics", root);
        std::vector<std::string> metric_list;
        for (const auto& m : metric_schema) metric_list.push_back(m.name);
        detail::write_attribute(metrics.get(), "columns", metric_list, {impl->path, "/metrics"});
        for (const auto& m : metric_schema) {
            const Where where{impl->path, "/metrics/" + m.name};
            Handle ds = detail::create_growing(metrics.get(), m.name, H5T_IEEE_F64LE, chunk_rows,
                                               {}, where);
            write_unit(ds.get(), m.unit, m.description, where);
        }
    }
    {
        const Where where{impl->path, "/reasons"};
        Handle ds =
            detail::create_growing(file, "reasons", string_type.get(), 256, {}, where, false);
        detail::write_attribute(ds.get(), "description",
                                std::string("reasons of infeasible or failed points, addressed "
                                            "by /points/reason_id"),
                                where);
    }
    {
        Handle failures = detail::create_group(file, "failures", root);
        const Where where{impl->path, "/failures"};
        detail::create_growing(failures.get(), "index", H5T_STD_U64LE, 256, {}, where, false);
        detail::create_growing(failures.get(), "message", string_type.get(), 256, {}, where, false);
    }
    {
        Handle filtered = detail::create_group(file, "filtered", root);
        const Where where{impl->path, "/filtered"};
        detail::create_growing(filtered.get(), "reason", string_type.get(), 64, {}, where, false);
        detail::create_growing(filtered.get(), "count", H5T_STD_U64LE, 64, {}, where, false);
    }
    detail::create_group(file, "pareto", root);
    if (h.histogram_bins > 0) {
        Handle histograms = detail::create_group(file, "histograms", root);
        const Where where{impl->path, "/histograms"};
        // Chunks of about 256 KiB whatever the bin count.
        const std::size_t rows_per_chunk =
            std::clamp<std::size_t>(65536 / h.histogram_bins, 1, chunk_rows);
        Handle hist = detail::create_growing(histograms.get(), kHistogram, H5T_IEEE_F32LE,
                                             rows_per_chunk, {h.histogram_bins}, where);
        write_unit(hist.get(), "1",
                   "step-time histogram of each point: probability mass per bin, bins of equal "
                   "width between step_time_lo_s and step_time_hi_s",
                   {impl->path, "/histograms/step_time"});
        Handle lo = detail::create_growing(histograms.get(), kHistogramLo, H5T_IEEE_F64LE,
                                           chunk_rows, {}, where);
        write_unit(lo.get(), "s", "lower edge of the first bin",
                   {impl->path, "/histograms/step_time_lo_s"});
        Handle hi = detail::create_growing(histograms.get(), kHistogramHi, H5T_IEEE_F64LE,
                                           chunk_rows, {}, where);
        write_unit(hi.get(), "s", "upper edge of the last bin",
                   {impl->path, "/histograms/step_time_hi_s"});
    }
    impl->open_datasets();
    impl->commit(0);
    return ResultWriter(std::move(impl));
}

namespace {

std::string joined(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

std::string column_text(const ColumnSpec& c) {
    switch (c.type) {
        case ColumnSpec::Type::int64:
            return c.name + " (int64)";
        case ColumnSpec::Type::float64:
            return c.name + " (float64)";
        case ColumnSpec::Type::enumeration:
            return c.name + " (enum " + joined(c.labels) + ")";
    }
    return c.name;
}

void check_same_layout(const std::string& path, const Layout& file,
                       const std::vector<ColumnSpec>& columns, const MetricSchema& metrics) {
    std::vector<std::string> have, want;
    for (const auto& c : file.columns) have.push_back(column_text(c));
    for (const auto& c : columns) want.push_back(column_text(c));
    if (have != want) {
        invalid(path, "/points: columns differ from this program's (file: " + joined(have) +
                          "; expected: " + joined(want) + ")");
    }
    have.clear();
    want.clear();
    for (const auto& m : file.metrics) have.push_back(m.name);
    for (const auto& m : metrics) want.push_back(m.name);
    if (have != want) {
        invalid(path, "/metrics: columns differ from this program's (file: " + joined(have) +
                          "; expected: " + joined(want) + ")");
    }
}

}  // namespace

ResultWriter ResultWriter::open_resume(const std::string& path, const ResultHeader& expected,
                                       const std::vector<ColumnSpec>& point_columns,
                                       const MetricSchema& metric_schema) {
    {
        // Check before open_resume changes anything (it truncates and sets the status).
        Handle file = open_file(path, false);
        const ResultHeader header = read_header(file.get(), path);
        if (header.experiment_sha256 == expected_sha(expected)) {
            check_same_layout(path, read_layout(file.get(), path), point_columns, metric_schema);
        }
    }
    return open_resume(path, expected);
}

ResultWriter ResultWriter::open_resume(const std::string& path, const ResultHeader& expected) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->file = open_file(path, true);
    const hid_t file = impl->file.get();
    impl->header = read_header(file, path);
    const std::string want = expected_sha(expected);
    if (impl->header.experiment_sha256 != want) {
        invalid(path, "made from a different experiment (sha256 " +
                          short_hash(impl->header.experiment_sha256) + " != " + short_hash(want) +
                          ")");
    }
    if (!expected.model_version.empty() && impl->header.model_version != expected.model_version) {
        const std::string had = impl->header.model_version.empty()
                                    ? "none (an older prism)"
                                    : "'" + impl->header.model_version + "'";
        invalid(path, "made under model version " + had + ", this program is '" +
                          expected.model_version +
                          "': resuming would mix results of different numerics (start a new "
                          "file, or resume with the build that made it)");
    }
    Layout layout = read_layout(file, path);
    impl->columns = std::move(layout.columns);
    impl->schema = std::move(layout.metrics);
    impl->header.histogram_bins = layout.histogram_bins;
    impl->index_columns();
    impl->open_datasets();
    impl->chunk = std::max<std::uint64_t>(
        1, detail::chunk_rows(impl->ds_index.get(), impl->at("/points/index")));

    // Rows past rows_committed were written by a writer that stopped before committing them;
    // rows at or past next_index belong to points that will be evaluated again.
    std::uint64_t rows = impl->header.rows_committed;
    for (const auto& [ds, name] : impl->row_datasets()) {
        rows = std::min(rows, detail::row_count(ds, impl->at(name)));
    }
    const auto index = read_u64s(impl->ds_index.get(), rows, impl->at("/points/index"));
    const auto keep = static_cast<std::uint64_t>(
        std::lower_bound(index.begin(), index.end(), impl->header.next_index) - index.begin());
    for (const auto& [ds, name] : impl->row_datasets()) {
        detail::resize_rows(ds, keep, impl->at(name));
    }
    impl->rows_written = keep;
    if (keep > 0) {
        impl->has_last = true;
        impl->last_index = index[keep - 1];
    }

    const Where at_reasons = impl->at("/reasons");
    std::uint64_t reasons =
        detail::has_attribute(impl->ds_reasons.get(), "committed", at_reasons)
            ? detail::read_u64_attribute(impl->ds_reasons.get(), "committed", at_reasons)
            : 0;
    reasons = std::min(reasons, detail::row_count(impl->ds_reasons.get(), at_reasons));
    const auto texts = detail::read_string_rows(impl->ds_reasons.get(), reasons, at_reasons);
    for (std::size_t i = 0; i < texts.size(); ++i) {
        impl->reason_ids.emplace(texts[i], static_cast<std::int32_t>(i));
    }
    detail::resize_rows(impl->ds_reasons.get(), reasons, at_reasons);
    impl->reasons_written = reasons;

    const Where at_failures = impl->at("/failures");
    std::uint64_t failures =
        detail::has_attribute(impl->failures.get(), "committed", at_failures)
            ? detail::read_u64_attribute(impl->failures.get(), "committed", at_failures)
            : 0;
    failures = std::min(
        {failures, detail::row_count(impl->ds_fail_index.get(), impl->at("/failures/index")),
         detail::row_count(impl->ds_fail_message.get(), impl->at("/failures/message"))});
    // Keep the committed failures of points below next_index, whatever order they came in.
    const auto failed_index =
        read_u64s(impl->ds_fail_index.get(), failures, impl->at("/failures/index"));
    const auto failed_message = detail::read_string_rows(impl->ds_fail_message.get(), failures,
                                                         impl->at("/failures/message"));
    std::vector<std::uint64_t> kept_index;
    std::vector<std::string> kept_message;
    for (std::size_t k = 0; k < failed_index.size(); ++k) {
        if (failed_index[k] < impl->header.next_index) {
            kept_index.push_back(failed_index[k]);
            kept_message.push_back(failed_message[k]);
        }
    }
    failures = kept_index.size();
    if (failures != failed_index.size()) {
        detail::write_rows(impl->ds_fail_index.get(), H5T_NATIVE_UINT64, kept_index.data(), 0,
                           failures, impl->at("/failures/index"));
        detail::write_string_rows(impl->ds_fail_message.get(), kept_message, 0,
                                  impl->at("/failures/message"));
    }
    detail::resize_rows(impl->ds_fail_index.get(), failures, impl->at("/failures/index"));
    detail::resize_rows(impl->ds_fail_message.get(), failures, impl->at("/failures/message"));
    impl->failures_written = failures;

    impl->header.status = "running";
    detail::write_attribute(file, "status", impl->header.status, impl->at(""));
    impl->commit(impl->header.next_index);
    return ResultWriter(std::move(impl));
}

const ResultHeader& ResultWriter::header() const { return impl_->header; }
const std::vector<ColumnSpec>& ResultWriter::point_columns() const { return impl_->columns; }
const MetricSchema& ResultWriter::metric_schema() const { return impl_->schema; }
std::uint64_t ResultWriter::next_index() const { return impl_->header.next_index; }
std::uint64_t ResultWriter::rows() const { return impl_->rows_written + impl_->buffered(); }

void ResultWriter::append(const RowBatch& batch) {
    Impl& w = *impl_;
    if (w.closed) invalid(w.path, "append: the file is closed");
    const std::size_t n = batch.size();
    auto need = [&](std::size_t got, std::size_t want, const std::string& what) {
        if (got != want) {
            invalid(w.path, "append: " + what + " has " + std::to_string(got) +
                                " entries, expected " + std::to_string(want));
        }
    };
    need(batch.status.size(), n, "status");
    need(batch.reason.size(), n, "reason");
    need(batch.int_columns.size(), w.int_count, "int_columns");
    need(batch.float_columns.size(), w.float_count, "float_columns");
    need(batch.metrics.size(), w.schema.size(), "metrics");
    for (std::size_t i = 0; i < w.columns.size(); ++i) {
        const auto& c = w.columns[i];
        const std::string what = "column '" + c.name + "'";
        if (c.type == ColumnSpec::Type::float64) {
            need(batch.float_columns[w.slot[i]].size(), n, what);
            continue;
        }
        const auto& values = batch.int_columns[w.slot[i]];
        need(values.size(), n, what);
        if (c.type == ColumnSpec::Type::enumeration) {
            for (const std::int64_t v : values) {
                if (v < 0 || v >= static_cast<std::int64_t>(c.labels.size())) {
                    invalid(w.path, "append: " + what + ": value " + std::to_string(v) +
                                        " is not a label index (0.." +
                                        std::to_string(c.labels.size() - 1) + ")");
                }
            }
        }
    }
    for (std::size_t m = 0; m < w.schema.size(); ++m) {
        need(batch.metrics[m].size(), n, "metric '" + w.schema[m].name + "'");
    }
    const std::size_t bins = w.header.histogram_bins;
    need(batch.histogram.size(), n * bins, "histogram");
    need(batch.histogram_lo_s.size(), bins > 0 ? n : 0, "histogram_lo_s");
    need(batch.histogram_hi_s.size(), bins > 0 ? n : 0, "histogram_hi_s");
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
    for (const auto s : batch.status) {
        if (static_cast<std::size_t>(s) >= kStatusLabels.size()) {
            invalid(w.path, "append: invalid point status " + std::to_string(static_cast<int>(s)));
        }
    }

    w.has_last = has_last;
    w.last_index = last;
    w.b_index.insert(w.b_index.end(), batch.index.begin(), batch.index.end());
    for (std::size_t r = 0; r < n; ++r) {
        w.b_status.push_back(static_cast<std::uint8_t>(batch.status[r]));
        const std::string& reason = batch.reason[r];
        std::int32_t id = -1;
        if (!reason.empty()) {
            auto [it, inserted] = w.reason_ids.emplace(
                reason, static_cast<std::int32_t>(w.reasons_written + w.pending_reasons.size()));
            if (inserted) w.pending_reasons.push_back(reason);
            id = it->second;
        }
        w.b_reason.push_back(id);
    }
    for (std::size_t k = 0; k < w.int_count; ++k) {
        w.b_int[k].insert(w.b_int[k].end(), batch.int_columns[k].begin(),
                          batch.int_columns[k].end());
    }
    for (std::size_t k = 0; k < w.float_count; ++k) {
        w.b_float[k].insert(w.b_float[k].end(), batch.float_columns[k].begin(),
                            batch.float_columns[k].end());
    }
    for (std::size_t m = 0; m < w.schema.size(); ++m) {
        w.b_metrics[m].insert(w.b_metrics[m].end(), batch.metrics[m].begin(),
                              batch.metrics[m].end());
    }
    w.b_hist.insert(w.b_hist.end(), batch.histogram.begin(), batch.histogram.end());
    w.b_lo.insert(w.b_lo.end(), batch.histogram_lo_s.begin(), batch.histogram_lo_s.end());
    w.b_hi.insert(w.b_hi.end(), batch.histogram_hi_s.begin(), batch.histogram_hi_s.end());

    // Whole chunks go to the file at once (bounded memory); they are committed by the next
    // flush, or now if a flush is waiting for them. Flushed to disk so that the file stays
    // consistent if the process is killed.
    if (w.rows_written + w.buffered() >= (w.rows_written / w.chunk + 1) * w.chunk) {
        w.write_full_chunks();
        w.try_commit();
        w.flush_file();
    }
}

void ResultWriter::add_failure(std::uint64_t index, const std::string& message) {
    if (impl_->closed) invalid(impl_->path, "add_failure: the file is closed");
    impl_->pending_failures.push_back({index, message});
}

void ResultWriter::flush(std::uint64_t next_index) {
    Impl& w = *impl_;
    if (w.closed) invalid(w.path, "flush: the file is closed");
    const std::uint64_t previous = w.latest_next_index();
    if (next_index < previous) {
        invalid(w.path, "flush: next_index " + std::to_string(next_index) + " is below " +
                            std::to_string(previous));
    }
    if (w.has_last && next_index <= w.last_index) {
        invalid(w.path, "flush: next_index " + std::to_string(next_index) +
                            " does not pass the last appended index " +
                            std::to_string(w.last_index));
    }
    w.commit(next_index);
}

void ResultWriter::set_filtered(const std::map<std::string, std::uint64_t>& counts) {
    if (impl_->closed) invalid(impl_->path, "set_filtered: the file is closed");
    impl_->filtered = counts;
}

void ResultWriter::write_pareto(const std::string& name, const std::vector<std::string>& objectives,
                                const std::vector<std::string>& senses,
                                const std::vector<std::uint64_t>& indices) {
    Impl& w = *impl_;
    if (w.closed) invalid(w.path, "write_pareto: the file is closed");
    if (!valid_name(name)) invalid(w.path, "invalid pareto set name '" + name + "'");
    const std::string object = "/pareto/" + name;
    if (objectives.empty() || objectives.size() != senses.size()) {
        invalid(w.path, object + ": " + std::to_string(objectives.size()) + " objectives and " +
                            std::to_string(senses.size()) + " senses");
    }
    for (const auto& s : senses) {
        if (s != "min" && s != "max") {
            invalid(w.path, object + ": sense '" + s + "' is neither 'min' nor 'max'");
        }
    }
    std::vector<std::uint64_t> sorted = indices;
    std::sort(sorted.begin(), sorted.end());
    const Where at_pareto = w.at("/pareto");
    if (detail::link_exists(w.pareto.get(), name, at_pareto)) {
        detail::delete_link(w.pareto.get(), name, at_pareto);
    }
    Handle group = detail::create_group(w.pareto.get(), name, at_pareto);
    const Where where = w.at(object);
    detail::write_attribute(group.get(), "objectives", objectives, where);
    detail::write_attribute(group.get(), "senses", senses, where);
    Handle ds =
        detail::create_growing(group.get(), "index", H5T_STD_U64LE,
                               std::clamp<std::size_t>(sorted.size(), 1, w.chunk), {}, where);
    detail::write_attribute(ds.get(), "description",
                            std::string("design-space indices of the non-dominated points"), where);
    detail::write_rows(ds.get(), H5T_NATIVE_UINT64, sorted.data(), 0, sorted.size(),
                       w.at(object + "/index"));
    w.flush_file();
}

void ResultWriter::set_status(const std::string& status) {
    Impl& w = *impl_;
    if (w.closed) invalid(w.path, "set_status: the file is closed");
    if (std::find(kValidStatus.begin(), kValidStatus.end(), status) == kValidStatus.end()) {
        invalid(w.path, "invalid status '" + status +
                            "' (expected running, interrupted, complete or failed)");
    }
    // A final status ("complete", "interrupted") must describe committed data: commit all
    // rows first, with the next_index of the last flush.
    w.commit_all(w.latest_next_index());
    w.header.status = status;
    detail::write_attribute(w.file.get(), "status", status, w.at(""));
    w.header.updated = now_iso8601();
    detail::write_attribute(w.file.get(), "updated", w.header.updated, w.at(""));
    w.flush_file();
}

void ResultWriter::set_max_commit_lag(double seconds) {
    if (!(seconds >= 0)) invalid(impl_->path, "max commit lag must be >= 0 s");
    impl_->max_commit_lag_s = seconds;
}

void ResultWriter::close() {
    if (impl_) impl_->close();
}

// ---------------------------------------------------------------------------------------------
// ResultReader

class ResultReader::Impl {
  public:
    std::string path;
    Handle file;
    ResultHeader header;
    Layout layout;
    std::uint64_t rows = 0;

    Where at(const std::string& object) const { return Where{path, object}; }

    Handle dataset(const std::string& group, const std::string& name) const {
        Handle g = detail::open_group(file.get(), group, at(""));
        return detail::open_dataset(g.get(), name, at("/" + group));
    }

    const ColumnSpec& column(const std::string& name) const {
        for (const auto& c : layout.columns) {
            if (c.name == name) return c;
        }
        invalid(path, "/points: no column '" + name + "'");
    }
};

ResultReader::ResultReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
    impl_->path = path;
    impl_->file = open_file(path, false);
    impl_->header = read_header(impl_->file.get(), path);
    impl_->layout = read_layout(impl_->file.get(), path);
    impl_->header.histogram_bins = impl_->layout.histogram_bins;
    Handle index = impl_->dataset("points", "index");
    impl_->rows = std::min(impl_->header.rows_committed,
                           detail::row_count(index.get(), impl_->at("/points/index")));
}

ResultReader::ResultReader(ResultReader&&) noexcept = default;
ResultReader& ResultReader::operator=(ResultReader&&) noexcept = default;
ResultReader::~ResultReader() = default;

const std::string& ResultReader::path() const { return impl_->path; }
const ResultHeader& ResultReader::header() const { return impl_->header; }
std::uint64_t ResultReader::rows() const { return impl_->rows; }
const std::vector<ColumnSpec>& ResultReader::point_columns() const { return impl_->layout.columns; }
const MetricSchema& ResultReader::metric_schema() const { return impl_->layout.metrics; }

std::vector<std::uint64_t> ResultReader::index() const {
    Handle ds = impl_->dataset("points", "index");
    return read_u64s(ds.get(), impl_->rows, impl_->at("/points/index"));
}

std::vector<PointStatus> ResultReader::status() const {
    Handle ds = impl_->dataset("points", "status");
    const auto raw = read_integers(ds.get(), impl_->rows, impl_->at("/points/status"));
    std::vector<PointStatus> out;
    out.reserve(raw.size());
    for (const auto v : raw) {
        if (v < 0 || v >= static_cast<std::int64_t>(kStatusLabels.size())) {
            invalid(impl_->path, "/points/status: invalid value " + std::to_string(v));
        }
        out.push_back(static_cast<PointStatus>(v));
    }
    return out;
}

std::vector<std::int32_t> ResultReader::reason_ids() const {
    Handle ds = impl_->dataset("points", "reason_id");
    std::vector<std::int32_t> out(impl_->rows, -1);
    detail::read_rows(ds.get(), H5T_NATIVE_INT32, out.data(), impl_->rows,
                      impl_->at("/points/reason_id"));
    return out;
}

std::vector<std::string> ResultReader::reasons() const {
    Handle ds = detail::open_dataset(impl_->file.get(), "reasons", impl_->at(""));
    const Where where = impl_->at("/reasons");
    return detail::read_string_rows(ds.get(), detail::row_count(ds.get(), where), where);
}

std::vector<std::string> ResultReader::row_reasons() const {
    const auto ids = reason_ids();
    const auto table = reasons();
    std::vector<std::string> out;
    out.reserve(ids.size());
    for (const auto id : ids) {
        if (id < -1 || id >= static_cast<std::int64_t>(table.size())) {
            invalid(impl_->path,
                    "/points/reason_id: " + std::to_string(id) + " is not a row of /reasons");
        }
        out.push_back(id < 0 ? std::string() : table[static_cast<std::size_t>(id)]);
    }
    return out;
}

std::vector<std::int64_t> ResultReader::int_column(const std::string& name) const {
    const ColumnSpec& c = impl_->column(name);
    if (c.type == ColumnSpec::Type::float64) {
        invalid(impl_->path, "/points/" + name + ": a float64 column, not int64");
    }
    Handle ds = impl_->dataset("points", name);
    return read_integers(ds.get(), impl_->rows, impl_->at("/points/" + name));
}

std::vector<double> ResultReader::float_column(const std::string& name) const {
    const ColumnSpec& c = impl_->column(name);
    if (c.type != ColumnSpec::Type::float64) {
        invalid(impl_->path, "/points/" + name + ": an integer column, not float64");
    }
    Handle ds = impl_->dataset("points", name);
    return read_doubles(ds.get(), impl_->rows, impl_->at("/points/" + name));
}

std::vector<double> ResultReader::metric(const std::string& name) const {
    const auto& schema = impl_->layout.metrics;
    if (std::none_of(schema.begin(), schema.end(),
                     [&](const MetricInfo& m) { return m.name == name; })) {
        invalid(impl_->path, "/metrics: no metric '" + name + "'");
    }
    Handle ds = impl_->dataset("metrics", name);
    return read_doubles(ds.get(), impl_->rows, impl_->at("/metrics/" + name));
}

std::vector<FailureRecord> ResultReader::failures() const {
    Handle group = detail::open_group(impl_->file.get(), "failures", impl_->at(""));
    const Where where = impl_->at("/failures");
    std::uint64_t n = detail::has_attribute(group.get(), "committed", where)
                          ? detail::read_u64_attribute(group.get(), "committed", where)
                          : 0;
    Handle index = detail::open_dataset(group.get(), "index", where);
    Handle message = detail::open_dataset(group.get(), "message", where);
    n = std::min(n, detail::row_count(index.get(), impl_->at("/failures/index")));
    const auto indices = read_u64s(index.get(), n, impl_->at("/failures/index"));
    const auto messages =
        detail::read_string_rows(message.get(), n, impl_->at("/failures/message"));
    std::vector<FailureRecord> out;
    for (std::uint64_t i = 0; i < n; ++i) out.push_back({indices[i], messages[i]});
    return out;
}

std::map<std::string, std::uint64_t> ResultReader::filtered() const {
    Handle group = detail::open_group(impl_->file.get(), "filtered", impl_->at(""));
    const Where where = impl_->at("/filtered");
    Handle reason = detail::open_dataset(group.get(), "reason", where);
    Handle count = detail::open_dataset(group.get(), "count", where);
    const std::uint64_t n = detail::row_count(reason.get(), impl_->at("/filtered/reason"));
    const auto reasons = detail::read_string_rows(reason.get(), n, impl_->at("/filtered/reason"));
    const auto counts = read_u64s(count.get(), n, impl_->at("/filtered/count"));
    std::map<std::string, std::uint64_t> out;
    for (std::uint64_t i = 0; i < n; ++i) out[reasons[i]] = counts[i];
    return out;
}

std::vector<std::string> ResultReader::pareto_names() const {
    Handle group = detail::open_group(impl_->file.get(), "pareto", impl_->at(""));
    std::vector<std::string> names;
    auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
        static_cast<std::vector<std::string>*>(out)->emplace_back(name);
        return 0;
    };
    hsize_t position = 0;
    if (H5Literate(group.get(), H5_INDEX_NAME, H5_ITER_INC, &position, collect, &names) < 0) {
        detail::fail(impl_->path, "/pareto", "cannot list the pareto sets");
    }
    return names;
}

ParetoSet ResultReader::pareto(const std::string& name) const {
    Handle pareto = detail::open_group(impl_->file.get(), "pareto", impl_->at(""));
    if (!valid_name(name) || !detail::link_exists(pareto.get(), name, impl_->at("/pareto"))) {
        invalid(impl_->path, "/pareto: no pareto set '" + name + "'");
    }
    Handle group = detail::open_group(pareto.get(), name, impl_->at("/pareto"));
    const Where where = impl_->at("/pareto/" + name);
    ParetoSet set;
    set.name = name;
    set.objectives = detail::read_strings_attribute(group.get(), "objectives", where);
    set.senses = detail::read_strings_attribute(group.get(), "senses", where);
    Handle index = detail::open_dataset(group.get(), "index", where);
    const Where at_index = impl_->at("/pareto/" + name + "/index");
    set.indices = read_u64s(index.get(), detail::row_count(index.get(), at_index), at_index);
    return set;
}

std::vector<float> ResultReader::histograms() const {
    const std::size_t bins = impl_->layout.histogram_bins;
    if (bins == 0) return {};
    Handle ds = impl_->dataset("histograms", kHistogram);
    std::vector<float> out(impl_->rows * bins, 0.0F);
    detail::read_rows(ds.get(), H5T_NATIVE_FLOAT, out.data(), impl_->rows,
                      impl_->at("/histograms/step_time"));
    return out;
}

std::vector<double> ResultReader::histogram_lo_s() const {
    if (impl_->layout.histogram_bins == 0) return {};
    Handle ds = impl_->dataset("histograms", kHistogramLo);
    return read_doubles(ds.get(), impl_->rows, impl_->at("/histograms/step_time_lo_s"));
}

std::vector<double> ResultReader::histogram_hi_s() const {
    if (impl_->layout.histogram_bins == 0) return {};
    Handle ds = impl_->dataset("histograms", kHistogramHi);
    return read_doubles(ds.get(), impl_->rows, impl_->at("/histograms/step_time_hi_s"));
}

}  // namespace prism::io
