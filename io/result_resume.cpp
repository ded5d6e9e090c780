// ResultWriter::open_resume: continuing a result file (format and crash safety:
// result_store.hpp).

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "io/detail/result_writer.hpp"
#include "io/result_store.hpp"
#include "io/sha256.hpp"
#include "src/common/error.hpp"

namespace prism::io {

namespace {

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

/// Rows past the commit were written by a writer that stopped before committing them; rows at
/// or past next_index belong to points that will be evaluated again.
void ResultWriter::Impl::trim_rows() {
    std::uint64_t rows = committed.rows;
    for (const auto& c : row_columns) {
        rows = std::min(rows, detail::row_count(c.file.dataset(), at(c.file.object())));
    }
    const auto index = detail::read_u64s(row_columns[0].file.dataset(), rows, at("/points/index"));
    const auto keep = static_cast<std::uint64_t>(
        std::lower_bound(index.begin(), index.end(), header.next_index) - index.begin());
    for (auto& c : row_columns) {
        detail::resize_rows(c.file.dataset(), keep, at(c.file.object()));
        c.file.resume_at(keep);
    }
    total_rows = buffer_base = keep;
    if (keep > 0) {
        has_last = true;
        last_index = index[keep - 1];
    }
}

/// Keeps the committed reasons (at least those the kept rows use), the committed failures
/// below next_index, and /filtered as it is.
void ResultWriter::Impl::load_tables() {
    const Where at_reasons = at("/reasons");
    std::uint64_t reasons = committed.reasons;
    const auto ids =
        detail::read_integers(row_columns[2].file.dataset(), total_rows, at("/points/reason_id"));
    for (const auto id : ids) reasons = std::max<std::uint64_t>(reasons, id + 1);
    reasons = std::min(reasons, detail::row_count(ds_reasons.get(), at_reasons));
    const auto texts = detail::read_string_rows(ds_reasons.get(), reasons, at_reasons);
    for (std::size_t i = 0; i < texts.size(); ++i) {
        reason_ids.emplace(texts[i], static_cast<std::int32_t>(i));
    }
    detail::resize_rows(ds_reasons.get(), reasons, at_reasons);
    reasons_written = reasons;

    std::uint64_t failures =
        std::min({committed.failures, detail::row_count(ds_fail_index.get(), at("/failures/index")),
                  detail::row_count(ds_fail_message.get(), at("/failures/message"))});
    const auto failed_index =
        detail::read_u64s(ds_fail_index.get(), failures, at("/failures/index"));
    const auto failed_message =
        detail::read_string_rows(ds_fail_message.get(), failures, at("/failures/message"));
    std::vector<std::uint64_t> kept_index;
    std::vector<std::string> kept_message;
    for (std::size_t k = 0; k < failed_index.size(); ++k) {
        if (failed_index[k] < header.next_index) {
            kept_index.push_back(failed_index[k]);
            kept_message.push_back(failed_message[k]);
        }
    }
    failures = kept_index.size();
    if (failures != failed_index.size()) {
        detail::write_rows(ds_fail_index.get(), H5T_NATIVE_UINT64, kept_index.data(), 0, failures,
                           at("/failures/index"));
        detail::write_string_rows(ds_fail_message.get(), kept_message, 0, at("/failures/message"));
    }
    detail::resize_rows(ds_fail_index.get(), failures, at("/failures/index"));
    detail::resize_rows(ds_fail_message.get(), failures, at("/failures/message"));
    failures_written = failures;

    for (const auto& [reason, count] : detail::read_filtered_rows(file.get(), path)) {
        filtered_order.push_back(reason);
        filtered_counts.push_back(count);
        if (count > 0) filtered[reason] = count;
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
}

ResultWriter ResultWriter::resume(const std::string& path, const ResultHeader& expected,
                                  const std::vector<ColumnSpec>* point_columns,
                                  const MetricSchema* metric_schema,
                                  const FilteredRecount& recount) {
    detail::silence_errors();
    auto impl = std::make_unique<ResultWriter::Impl>();
    impl->path = path;
    impl->lock = detail::FileLock::acquire(path);
    detail::Layout layout = check_resumable(path, expected, point_columns, metric_schema);

    impl->file = detail::open_result_file(path, detail::OpenMode::write_swmr);
    const hid_t file = impl->file.get();
    impl->header = detail::read_header(file, path);
    impl->committed = detail::read_commit(file, path, impl->header.format_version);
    impl->header.next_index = impl->committed.next_index;
    impl->columns = std::move(layout.columns);
    impl->schema = std::move(layout.metrics);
    impl->header.histogram_bins = layout.histogram_bins;
    impl->header.pareto_sets = std::move(layout.pareto_sets);
    impl->make_types();
    impl->open_datasets();
    impl->writing([&] {
        impl->trim_rows();
        impl->load_tables();
        impl->repair_filtered(recount);
    });
    impl->latest_next_index = impl->header.next_index;
    impl->write_status("running");
    impl->commit(impl->header.next_index);
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
