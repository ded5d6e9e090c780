// ResultWriter::open_resume: continuing a result file (format and crash safety:
// result_store.hpp).

#include <fcntl.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "io/detail/result_writer.hpp"
#include "io/result_salvage.hpp"
#include "io/result_store.hpp"
#include "io/sha256.hpp"
#include "src/common/error.hpp"

namespace prism::io {

namespace {

namespace fs = std::filesystem;

/// The checks that come before anything changes: format, experiment, model version, columns.
detail::Layout check_resumable(const std::string& path, const ResultHeader& expected,
                               const std::vector<ColumnSpec>* point_columns,
                               const MetricSchema* metric_schema) {
    Handle file = detail::open_result_file(path, detail::OpenMode::read);
    const ResultHeader header = detail::read_header(file.get(), path);
    if (header.format_version < kResultFormatVersion) {
        invalid(path, "made in result format " + std::to_string(header.format_version) +
                          " by an older prism, which cannot be continued; convert it with "
                          "`prism recover " +
                          path + " -o NEW.h5` and resume NEW.h5");
    }
    // Files of older versions hash the TOML text; this one hashes the parsed experiment.
    const std::string want = detail::expected_sha(expected);
    if (header.experiment_sha256 != want &&
        header.experiment_sha256 != sha256_hex(expected.experiment_toml)) {
        invalid(path, "made from a different experiment (sha256 " +
                          detail::short_hash(header.experiment_sha256) +
                          " != " + detail::short_hash(want) + ")");
    }
    if (!expected.model_version.empty() && header.model_version != expected.model_version) {
        const std::string had = header.model_version.empty() ? "none (an older prism)"
                                                             : "'" + header.model_version + "'";
        invalid(path, "made under model version " + had + ", this program is '" +
                          expected.model_version +
                          "': resuming would mix results of different numerics (start a new "
                          "file, or resume with the build that made it)");
    }
    detail::Layout layout = detail::read_layout(file.get(), path);
    if (point_columns != nullptr) {
        detail::check_same_layout(path, layout, *point_columns, *metric_schema);
    }
    return layout;
}

}  // namespace

/// What a resume keeps of a file, read in a session of its own before the file is opened for
/// writing: the writing session then reads no string (HDF5 1.10 reuses free space in the
/// global heap collections it has read, and a collection that a writer stopped by an I/O error
/// left behind is not safe to write into), it only shrinks datasets and appends.
struct detail::ResumeState {
    detail::CommitRecord committed;
    std::uint64_t next_index = 0;
    std::uint64_t keep = 0;  ///< rows of /points kept: the committed ones below next_index
    std::uint64_t last_index = 0;
    std::vector<std::string> reasons;          ///< the committed ones and any a kept row uses
    std::uint64_t failures = 0;                ///< committed failures, the first of them kept...
    bool failures_prefix = true;               ///< ...all of them, when those below next_index lead
    std::vector<FailureRecord> kept_failures;  ///< else these (not in index order: rewritten)
    std::vector<std::pair<std::string, std::uint64_t>> filtered;  ///< /filtered in file order
};

namespace {

using detail::ResumeState;

ResumeState read_resume_state(const std::string& path, const detail::Layout& layout) {
    Handle file = detail::open_result_file(path, detail::OpenMode::read);
    const ResultHeader header = detail::read_header(file.get(), path);
    ResumeState state;
    state.committed = detail::read_commit(file.get(), path, header.format_version);
    detail::check_commit(path, state.committed, header.space_size);
    state.next_index = state.committed.next_index;
    const Where root{path, ""};
    Handle points = detail::open_group(file.get(), "points", root);
    std::uint64_t rows = state.committed.rows;
    auto limit_by = [&](hid_t group, const std::string& object, const std::string& name) {
        Handle ds = detail::open_dataset(group, name, {path, object});
        rows = std::min(rows, detail::row_count(ds.get(), {path, object + "/" + name}));
    };
    for (const char* name : {"index", "status", "reason_id"})
        limit_by(points.get(), "/points", name);
    for (const auto& c : layout.columns) limit_by(points.get(), "/points", c.name);
    Handle metrics = detail::open_group(file.get(), "metrics", root);
    for (const auto& m : layout.metrics) limit_by(metrics.get(), "/metrics", m.name);
    if (layout.histogram_bins > 0) {
        Handle group = detail::open_group(file.get(), "histograms", root);
        for (const char* name : {detail::kHistogram, detail::kHistogramLo, detail::kHistogramHi}) {
            limit_by(group.get(), "/histograms", name);
        }
    }
    Handle index_ds = detail::open_dataset(points.get(), "index", {path, "/points"});
    const auto index = detail::read_u64s(index_ds.get(), rows, {path, "/points/index"});
    state.keep = static_cast<std::uint64_t>(
        std::lower_bound(index.begin(), index.end(), state.next_index) - index.begin());
    if (state.keep > 0) state.last_index = index[state.keep - 1];

    Handle reason_ds = detail::open_dataset(points.get(), "reason_id", {path, "/points"});
    std::uint64_t reasons = state.committed.reasons;
    for (const auto id :
         detail::read_integers(reason_ds.get(), state.keep, {path, "/points/reason_id"})) {
        reasons = std::max<std::uint64_t>(reasons, id + 1);
    }
    Handle reasons_ds = detail::open_dataset(file.get(), "reasons", root);
    reasons = std::min(reasons, detail::row_count(reasons_ds.get(), {path, "/reasons"}));
    state.reasons = detail::read_string_rows(reasons_ds.get(), reasons, {path, "/reasons"});

    // A sweep records failures with their rows, in index order: those below next_index lead.
    Handle failures = detail::open_group(file.get(), "failures", root);
    Handle fail_index = detail::open_dataset(failures.get(), "index", {path, "/failures"});
    Handle fail_message = detail::open_dataset(failures.get(), "message", {path, "/failures"});
    const std::uint64_t committed_failures = std::min(
        {state.committed.failures, detail::row_count(fail_index.get(), {path, "/failures/index"}),
         detail::row_count(fail_message.get(), {path, "/failures/message"})});
    const auto failed =
        detail::read_u64s(fail_index.get(), committed_failures, {path, "/failures/index"});
    state.failures = static_cast<std::uint64_t>(
        std::find_if(failed.begin(), failed.end(),
                     [&](std::uint64_t i) { return i >= state.next_index; }) -
        failed.begin());
    state.failures_prefix =
        std::all_of(failed.begin() + static_cast<long>(state.failures), failed.end(),
                    [&](std::uint64_t i) { return i >= state.next_index; });
    if (!state.failures_prefix) {
        const auto messages = detail::read_string_rows(fail_message.get(), committed_failures,
                                                       {path, "/failures/message"});
        for (std::size_t k = 0; k < failed.size(); ++k) {
            if (failed[k] < state.next_index)
                state.kept_failures.push_back({failed[k], messages[k]});
        }
    }
    // Reasons are appended with count 0 in phase 1 of a commit and counted in phase 2: rows
    // past the last counted one were not committed (and their strings may be torn).
    state.filtered = detail::read_filtered_rows(file.get(), path);
    while (!state.filtered.empty() && state.filtered.back().second == 0) state.filtered.pop_back();
    return state;
}

}  // namespace

/// Drops what the file holds past the resume state: rows, reasons, failures that were written
/// but not committed (or lie at or past next_index); reads back the rows of each dataset's
/// partly filled last chunk (numbers only).
void ResultWriter::Impl::trim_to(const detail::ResumeState& state) {
    header.next_index = state.next_index;
    for (auto& c : row_columns) {
        detail::resize_rows(c.file.dataset(), state.keep, at(c.file.object()));
        c.file.resume_at(state.keep);
    }
    total_rows = buffer_base = state.keep;
    has_last = state.keep > 0;
    last_index = state.last_index;
    for (std::size_t i = 0; i < state.reasons.size(); ++i) {
        reason_ids.emplace(state.reasons[i], static_cast<std::int32_t>(i));
    }
    detail::resize_rows(ds_reasons.get(), state.reasons.size(), at("/reasons"));
    reasons_written = state.reasons.size();
    detail::resize_rows(ds_fail_index.get(), state.failures, at("/failures/index"));
    detail::resize_rows(ds_fail_message.get(), state.failures, at("/failures/message"));
    failures_written = state.failures;
    if (!state.failures_prefix) {
        // Out of index order (only through this API, not a sweep): written again, after them.
        detail::resize_rows(ds_fail_index.get(), 0, at("/failures/index"));
        detail::resize_rows(ds_fail_message.get(), 0, at("/failures/message"));
        failures_written = 0;
        pending_failures = state.kept_failures;
    }
    detail::resize_rows(ds_filtered_reason.get(), state.filtered.size(), at("/filtered/reason"));
    detail::resize_rows(ds_filtered_count.get(), state.filtered.size(), at("/filtered/count"));
    for (const auto& [reason, count] : state.filtered) {
        filtered_order.push_back(reason);
        filtered_counts.push_back(count);
        if (count > 0) filtered.emplace_back(reason, count);
    }
}

/// The filtered counts go with next_index when they sum to the committed sum and, with the
/// rows, account for every index below next_index. A writer killed between writing the counts
/// and the commit record breaks that: recount them (below next_index, or below the last row
/// when even the rows do not add up).
void ResultWriter::Impl::repair_filtered(const FilteredRecount& recount) {
    const std::uint64_t sum =
        std::accumulate(filtered_counts.begin(), filtered_counts.end(), std::uint64_t{0});
    const bool counts_match = sum == committed.filtered_sum;
    const bool rows_match = total_rows + committed.filtered_sum == header.next_index;
    if ((counts_match && rows_match) || !recount) return;
    // Failures belong to rows, all of which lie below the earlier next_index.
    if (!rows_match) header.next_index = has_last ? last_index + 1 : 0;
    filtered = recount(header.next_index);
    filtered_replace = true;
}

namespace {

/// Opens a checked file for writing and makes it ready to continue: drops what was not
/// committed, loads the tables, recounts torn filtered counts, marks it running.
void continue_file(ResultWriter::Impl& w, detail::Layout layout, const FilteredRecount& recount) {
    const std::string& path = w.path;
    const ResumeState state = read_resume_state(path, layout);
    w.file = detail::open_result_file(path, detail::OpenMode::write_swmr);
    w.reserve_fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    const hid_t file = w.file.get();
    // Allocate past the file's end: a writer that stopped in the middle of a flush may have
    // allocated space past the end it recorded, which its metadata may still point to; its
    // reservations (Impl::reserve) keep the file's size past all of it.
    if (H5Fincrement_filesize(file, 0) < 0) detail::fail(path, "", "cannot extend the file");
    w.header = detail::read_header(file, path);
    w.committed = state.committed;
    w.columns = std::move(layout.columns);
    w.schema = std::move(layout.metrics);
    w.header.histogram_bins = layout.histogram_bins;
    w.header.pareto_sets = std::move(layout.pareto_sets);
    w.make_types();
    w.open_datasets();
    w.writing([&] {
        w.trim_to(state);
        w.repair_filtered(recount);
    });
    w.latest_next_index = w.header.next_index;
    w.write_status("running");
    w.commit(w.header.next_index);
}

/// Replaces a file that cannot be continued as it is (a writer stopped by an I/O error in the
/// middle of a flush can leave metadata that points past the end of the file) with a new one
/// holding the committed rows that read back whole (io/result_salvage.hpp). Returns what was
/// wrong and what was kept.
std::string rebuild(const std::string& path, const FilteredRecount& recount) {
    const fs::path p(path);
    const std::string scratch = fs::absolute(p).parent_path().string();
    const SalvagedResults s = salvage_result_file(path, SalvageMode::recover, scratch);
    if (!s.header_read) {
        invalid(path, "damaged: " + (s.problem.empty() ? std::string("unreadable") : s.problem) +
                          "; nothing can be saved: start again with --overwrite");
    }
    const std::string temporary = (p.parent_path() / ("." + p.filename().string() + ".rebuild." +
                                                      std::to_string(::getpid()) + ".tmp"))
                                      .string();
    {
        ResultWriter w = ResultWriter::create(temporary, s.header, s.columns, s.metrics, true,
                                              chunk_rows_for(s.header.space_size));
        w.append(s.rows);
        for (const auto& f : s.failures) w.add_failure(f.index, f.message);
        w.set_filtered(s.filtered_exact || !recount ? s.filtered : recount(s.next_index));
        w.flush(s.next_index);
        w.set_status("interrupted");
        w.close();
    }
    std::error_code ec;
    fs::rename(temporary, path, ec);
    if (ec) {
        fs::remove(temporary, ec);
        invalid(path, "cannot replace it with its rebuilt copy: " + ec.message());
    }
    return "rebuilt from the " + std::to_string(s.rows.size()) + " of " +
           std::to_string(s.rows_committed) + " committed rows that read back whole" +
           (s.problem.empty() ? std::string() : " (" + s.problem + ")");
}

}  // namespace

ResultWriter ResultWriter::resume(const std::string& path, const ResultHeader& expected,
                                  const std::vector<ColumnSpec>* point_columns,
                                  const MetricSchema* metric_schema,
                                  const FilteredRecount& recount) {
    detail::silence_errors();
    auto impl = std::make_unique<ResultWriter::Impl>();
    impl->path = path;
    impl->lock = detail::FileLock::acquire(path);
    const detail::Layout layout = check_resumable(path, expected, point_columns, metric_schema);
    try {
        continue_file(*impl, layout, recount);
    } catch (const IoError& first) {
        // The checks above passed: the file is ours but damaged. Let the attempt go without
        // flushing anything, rebuild the file from what reads back whole, and try once more.
        impl->abandon();
        if (impl->reserve_fd >= 0) ::close(impl->reserve_fd);
        auto fresh = std::make_unique<ResultWriter::Impl>();
        fresh->path = path;
        fresh->lock = std::move(impl->lock);
        impl->closed = true;
        fresh->rebuilt = std::string(first.what()) + "; " + rebuild(path, recount);
        continue_file(*fresh, check_resumable(path, expected, point_columns, metric_schema),
                      recount);
        impl = std::move(fresh);
    }
    return ResultWriter(std::move(impl));
}

ResultWriter ResultWriter::open_resume(const std::string& path, const ResultHeader& expected,
                                       const FilteredRecount& recount) {
    return resume(path, expected, nullptr, nullptr, recount);
}

ResultWriter ResultWriter::open_resume(const std::string& path, const ResultHeader& expected,
                                       const std::vector<ColumnSpec>& point_columns,
                                       const MetricSchema& metric_schema,
                                       const FilteredRecount& recount) {
    return resume(path, expected, &point_columns, &metric_schema, recount);
}

}  // namespace prism::io
