// ResultReader: the committed content of a result file (format: result_store.hpp).

#include <algorithm>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <hdf5.h>

#include "io/detail/hdf5_handle.hpp"
#include "io/detail/hdf5_util.hpp"
#include "io/detail/result_format.hpp"
#include "io/result_store.hpp"
#include "src/common/error.hpp"

namespace prism::io {

using detail::Handle;
using detail::invalid;
using detail::Where;

class ResultReader::Impl {
  public:
    std::string path;
    Handle file;
    ResultHeader header;
    detail::CommitRecord commit;
    detail::Layout layout;
    std::uint64_t rows = 0;

    void load();

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

static_assert(std::is_same_v<hid_t, std::int64_t>, "hid_t is int64_t since HDF5 1.10");

void ResultReader::Impl::load() {
    header = detail::read_header(file.get(), path);
    commit = detail::read_commit(file.get(), path, header.format_version);
    if (header.format_version >= 2) {
        detail::check_commit(path, commit, header.space_size);
    } else if (!(commit.rows <= commit.next_index && commit.next_index <= header.space_size)) {
        // format 1 keeps its filtered counts apart (they may lag), but its rows and next index
        // must still fit the space ("1000000000000 of 960" was taken as it stood, issue 33)
        invalid(path, "damaged: its counts do not add up (rows_committed " +
                          std::to_string(commit.rows) + ", next_index " +
                          std::to_string(commit.next_index) + ", space_size " +
                          std::to_string(header.space_size) + ")");
    }
    header.next_index = commit.next_index;
    header.rows_committed = commit.rows;
    layout = detail::read_layout(file.get(), path);
    header.histogram_bins = layout.histogram_bins;
    header.pareto_sets = layout.pareto_sets;
    Handle index = dataset("points", "index");
    rows = std::min(commit.rows, detail::row_count(index.get(), at("/points/index")));
}

ResultReader::ResultReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
    impl_->path = path;
    impl_->file = detail::open_result_file(path, detail::OpenMode::read);
    impl_->load();
}

ResultReader::ResultReader(const std::string& path, std::int64_t open_file)
    : impl_(std::make_unique<Impl>()) {
    impl_->path = path;
    impl_->file = detail::file_handle(open_file);
    impl_->load();
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
    return detail::read_u64s(ds.get(), impl_->rows, impl_->at("/points/index"));
}

std::vector<PointStatus> ResultReader::status() const {
    Handle ds = impl_->dataset("points", "status");
    const auto raw = detail::read_integers(ds.get(), impl_->rows, impl_->at("/points/status"));
    std::vector<PointStatus> out;
    out.reserve(raw.size());
    for (const auto v : raw) {
        if (v < 0 || v >= static_cast<std::int64_t>(detail::kStatusLabels.size())) {
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
    // The committed reasons, and any a committed row uses (a commit that was cut short).
    std::uint64_t n = impl_->commit.reasons;
    for (const auto id : reason_ids()) n = std::max<std::uint64_t>(n, id + 1);
    return detail::read_string_rows(ds.get(), std::min(n, detail::row_count(ds.get(), where)),
                                    where);
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
    return detail::read_integers(ds.get(), impl_->rows, impl_->at("/points/" + name));
}

std::vector<double> ResultReader::float_column(const std::string& name) const {
    const ColumnSpec& c = impl_->column(name);
    if (c.type != ColumnSpec::Type::float64) {
        invalid(impl_->path, "/points/" + name + ": an integer column, not float64");
    }
    Handle ds = impl_->dataset("points", name);
    return detail::read_doubles(ds.get(), impl_->rows, impl_->at("/points/" + name));
}

std::vector<double> ResultReader::metric(const std::string& name) const {
    const auto& schema = impl_->layout.metrics;
    if (std::none_of(schema.begin(), schema.end(),
                     [&](const MetricInfo& m) { return m.name == name; })) {
        invalid(impl_->path, "/metrics: no metric '" + name + "'");
    }
    Handle ds = impl_->dataset("metrics", name);
    return detail::read_doubles(ds.get(), impl_->rows, impl_->at("/metrics/" + name));
}

std::vector<FailureRecord> ResultReader::failures() const {
    Handle group = detail::open_group(impl_->file.get(), "failures", impl_->at(""));
    const Where where = impl_->at("/failures");
    std::uint64_t n = impl_->commit.failures;
    Handle index = detail::open_dataset(group.get(), "index", where);
    Handle message = detail::open_dataset(group.get(), "message", where);
    n = std::min(n, detail::row_count(index.get(), impl_->at("/failures/index")));
    const auto indices = detail::read_u64s(index.get(), n, impl_->at("/failures/index"));
    const auto messages =
        detail::read_string_rows(message.get(), n, impl_->at("/failures/message"));
    std::vector<FailureRecord> out;
    for (std::uint64_t i = 0; i < n; ++i) out.push_back({indices[i], messages[i]});
    return out;
}

std::map<std::string, std::uint64_t> ResultReader::filtered() const {
    std::map<std::string, std::uint64_t> out;
    for (const auto& [reason, count] : detail::read_filtered_rows(impl_->file.get(), impl_->path)) {
        if (count > 0) out[reason] = count;
    }
    return out;
}

bool ResultReader::filtered_consistent() const {
    std::uint64_t sum = 0;
    for (const auto& [reason, count] : filtered()) sum += count;
    return sum == impl_->commit.filtered_sum &&
           impl_->rows + impl_->commit.filtered_sum == impl_->commit.next_index;
}

std::vector<std::string> ResultReader::pareto_names() const {
    std::vector<std::string> names;
    for (const auto& set : impl_->layout.pareto_sets) names.push_back(set.name);
    return names;
}

ParetoSet ResultReader::pareto(const std::string& name) const {
    Handle pareto = detail::open_group(impl_->file.get(), "pareto", impl_->at(""));
    if (!detail::valid_name(name) ||
        !detail::link_exists(pareto.get(), name, impl_->at("/pareto"))) {
        invalid(impl_->path, "/pareto: no pareto set '" + name + "'");
    }
    Handle group = detail::open_group(pareto.get(), name, impl_->at("/pareto"));
    const Where where = impl_->at("/pareto/" + name);
    ParetoSet set;
    set.name = name;
    set.objectives = detail::read_strings_attribute(group.get(), "objectives", where);
    set.senses = detail::read_strings_attribute(group.get(), "senses", where);
    if (detail::has_attribute(group.get(), "scenarios", where))
        set.scenarios = detail::read_strings_attribute(group.get(), "scenarios", where);
    Handle index = detail::open_dataset(group.get(), "index", where);
    const Where at_index = impl_->at("/pareto/" + name + "/index");
    set.indices =
        detail::read_u64s(index.get(), detail::row_count(index.get(), at_index), at_index);
    return set;
}

std::vector<float> ResultReader::histograms() const {
    const std::size_t bins = impl_->layout.histogram_bins;
    if (bins == 0) return {};
    Handle ds = impl_->dataset("histograms", detail::kHistogram);
    std::vector<float> out(impl_->rows * bins, 0.0F);
    detail::read_rows(ds.get(), H5T_NATIVE_FLOAT, out.data(), impl_->rows,
                      impl_->at("/histograms/step_time"));
    return out;
}

std::vector<double> ResultReader::histogram_lo_s() const {
    if (impl_->layout.histogram_bins == 0) return {};
    Handle ds = impl_->dataset("histograms", detail::kHistogramLo);
    return detail::read_doubles(ds.get(), impl_->rows, impl_->at("/histograms/step_time_lo_s"));
}

std::vector<double> ResultReader::histogram_hi_s() const {
    if (impl_->layout.histogram_bins == 0) return {};
    Handle ds = impl_->dataset("histograms", detail::kHistogramHi);
    return detail::read_doubles(ds.get(), impl_->rows, impl_->at("/histograms/step_time_hi_s"));
}

}  // namespace prism::io
