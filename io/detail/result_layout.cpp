// Creation of a result file's objects (detail/result_format.hpp: create_layout). Everything the
// writer will ever touch is made here, before the file enters SWMR mode.

#include <string>
#include <vector>

#include "io/detail/result_format.hpp"

namespace prism::io::detail {

namespace {

void write_unit(hid_t dataset, const std::string& unit, const std::string& description,
                const Where& where) {
    write_attribute(dataset, "unit", unit, where);
    write_attribute(dataset, "description", description, where);
}

void write_root_attributes(hid_t file, const std::string& path, const ResultHeader& h) {
    const Where root{path, ""};
    write_attribute(file, "format", std::string(kResultFormat), root);
    write_attribute(file, "format_version", kResultFormatVersion, root);
    write_attribute(file, "program_version", h.program_version, root);
    write_attribute(file, "model_version", h.model_version, root);
    write_attribute(file, "experiment_name", h.experiment_name, root);
    write_attribute(file, "experiment_toml", h.experiment_toml, root);
    write_attribute(file, "experiment_sha256", h.experiment_sha256, root);
    if (!h.included_files.empty()) {
        std::vector<std::string> names, texts;
        for (const auto& [name, text] : h.included_files) {
            names.push_back(name);
            texts.push_back(text);
        }
        write_attribute(file, "included_file_names", names, root);
        write_attribute(file, "included_file_texts", texts, root);
    }
    write_attribute(file, "seed", h.seed, root);
    write_attribute(file, "space_size", h.space_size, root);
    write_attribute(file, "status", h.status, root);
    write_attribute(file, "next_index", h.next_index, root);
    write_attribute(file, "rows_committed", h.rows_committed, root);
    write_attribute(file, "created", h.created, root);
    write_attribute(file, "updated", h.updated, root);
    write_commit(file, path, CommitRecord{h.next_index, h.rows_committed, 0, 0, 0});
}

Handle column_type(const ColumnSpec& c, const Where& where) {
    if (c.type == ColumnSpec::Type::float64) return type_handle(H5Tcopy(H5T_IEEE_F64LE));
    if (c.type == ColumnSpec::Type::int64) return type_handle(H5Tcopy(H5T_STD_I64LE));
    return enum_type(c.labels, where);
}

void create_points(hid_t file, const std::string& path, const std::vector<ColumnSpec>& columns,
                   std::size_t chunk_rows) {
    Handle points = create_group(file, "points", {path, ""});
    std::vector<std::string> names;
    for (const auto& c : columns) names.push_back(c.name);
    write_attribute(points.get(), "columns", names, {path, "/points"});
    auto make = [&](const std::string& name, hid_t type, const std::string& unit,
                    const std::string& description) {
        const Where where{path, "/points/" + name};
        Handle ds = create_growing(points.get(), name, type, chunk_rows, {}, where);
        write_unit(ds.get(), unit, description, where);
    };
    make("index", H5T_STD_U64LE, "1", "design-space index of the point");
    Handle status_type = enum_type(kStatusLabels, {path, "/points/status"});
    make("status", status_type.get(), "1", "evaluation outcome");
    make("reason_id", H5T_STD_I32LE, "1",
         "row of /reasons explaining an infeasible or failed point, -1 = none");
    for (const auto& c : columns) {
        Handle type = column_type(c, {path, "/points/" + c.name});
        make(c.name, type.get(), c.unit, c.description);
    }
}

void create_metrics(hid_t file, const std::string& path, const MetricSchema& metrics,
                    std::size_t chunk_rows) {
    Handle group = create_group(file, "metrics", {path, ""});
    std::vector<std::string> names;
    for (const auto& m : metrics) names.push_back(m.name);
    write_attribute(group.get(), "columns", names, {path, "/metrics"});
    for (const auto& m : metrics) {
        const Where where{path, "/metrics/" + m.name};
        Handle ds = create_growing(group.get(), m.name, H5T_IEEE_F64LE, chunk_rows, {}, where);
        write_unit(ds.get(), m.unit, m.description, where);
    }
}

/// /reasons, /failures and /filtered: small and uncompressed (rewritten in place); the root
/// attribute `commit` counts their committed rows.
void create_tables(hid_t file, const std::string& path) {
    const Where root{path, ""};
    Handle strings = vlen_string_type(root);
    {
        const Where where{path, "/reasons"};
        Handle ds = create_growing(file, "reasons", strings.get(), 256, {}, where, false);
        write_attribute(ds.get(), "description",
                        std::string("reasons of infeasible or failed points, addressed by "
                                    "/points/reason_id"),
                        where);
    }
    {
        Handle failures = create_group(file, "failures", root);
        const Where where{path, "/failures"};
        create_growing(failures.get(), "index", H5T_STD_U64LE, 256, {}, where, false);
        create_growing(failures.get(), "message", strings.get(), 256, {}, where, false);
    }
    {
        Handle filtered = create_group(file, "filtered", root);
        const Where where{path, "/filtered"};
        create_growing(filtered.get(), "reason", strings.get(), 64, {}, where, false);
        create_growing(filtered.get(), "count", H5T_STD_U64LE, 64, {}, where, false);
    }
}

void create_pareto_sets(hid_t file, const std::string& path, const std::vector<ParetoSpec>& sets) {
    Handle pareto = create_group(file, "pareto", {path, ""});
    for (const auto& set : sets) {
        const Where where{path, "/pareto/" + set.name};
        Handle group = create_group(pareto.get(), set.name, {path, "/pareto"});
        write_attribute(group.get(), "objectives", set.objectives, where);
        write_attribute(group.get(), "senses", set.senses, where);
        if (!set.scenarios.empty()) write_attribute(group.get(), "scenarios", set.scenarios, where);
        Handle ds = create_growing(group.get(), "index", H5T_STD_U64LE, 1024, {}, where, false);
        write_attribute(ds.get(), "description",
                        std::string("design-space indices of the non-dominated points"), where);
    }
}

void create_histograms(hid_t file, const std::string& path, std::size_t bins,
                       std::size_t chunk_rows) {
    Handle histograms = create_group(file, "histograms", {path, ""});
    const Where where{path, "/histograms"};
    Handle hist = create_growing(histograms.get(), kHistogram, H5T_IEEE_F32LE,
                                 histogram_chunk_rows(bins, chunk_rows), {bins}, where);
    write_unit(hist.get(), "1",
               "step-time histogram of each point: probability mass per bin, bins of equal width "
               "between step_time_lo_s and step_time_hi_s",
               {path, "/histograms/step_time"});
    Handle lo =
        create_growing(histograms.get(), kHistogramLo, H5T_IEEE_F64LE, chunk_rows, {}, where);
    write_unit(lo.get(), "s", "lower edge of the first bin", {path, "/histograms/step_time_lo_s"});
    Handle hi =
        create_growing(histograms.get(), kHistogramHi, H5T_IEEE_F64LE, chunk_rows, {}, where);
    write_unit(hi.get(), "s", "upper edge of the last bin", {path, "/histograms/step_time_hi_s"});
}

}  // namespace

void create_layout(hid_t file, const std::string& path, const ResultHeader& header,
                   const std::vector<ColumnSpec>& columns, const MetricSchema& metrics,
                   std::size_t chunk_rows) {
    write_root_attributes(file, path, header);
    create_points(file, path, columns, chunk_rows);
    create_metrics(file, path, metrics, chunk_rows);
    create_tables(file, path);
    create_pareto_sets(file, path, header.pareto_sets);
    if (header.histogram_bins > 0) {
        create_histograms(file, path, header.histogram_bins, chunk_rows);
    }
}

}  // namespace prism::io::detail
