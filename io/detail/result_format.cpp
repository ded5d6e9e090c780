#include "io/detail/result_format.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <set>
#include <utility>

#include "io/sha256.hpp"
#include "src/common/error.hpp"

namespace prism::io::detail {

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

bool valid_name(const std::string& name) {
    return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

void invalid(const std::string& path, const std::string& what) {
    throw IoError(path + ": " + what);
}

// Opening
// ------------------------------------------------------------------------------------------

namespace {

/// SWMR readers read a metadata block again when its checksum fails (the writer may be
/// rewriting it), sleeping 2^k ns before attempt k: HDF5's default of 100 attempts never ends
/// on a block that is really damaged. 28 attempts wait at most ~0.27 s in all, far longer than
/// a writer takes to write a block.
constexpr unsigned kMetadataReadAttempts = 28;

Handle read_access_plist(const Where& where, unsigned attempts) {
    Handle fapl = plist_handle(H5Pcreate(H5P_FILE_ACCESS));
    if (!fapl) fail(where.file, "", "cannot create file access properties");
    if (H5Pset_metadata_read_attempts(fapl.get(), attempts) < 0) {
        fail(where.file, "", "cannot set the metadata read attempts");
    }
#if (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7) || H5_VERSION_GE(1, 12, 1)
    if (H5Pset_file_locking(fapl.get(), true, true) < 0) {
        fail(where.file, "", "cannot set file locking");
    }
#endif
    return fapl;
}

}  // namespace

Handle writer_access_plist(const Where& where) {
    Handle fapl = file_access_plist(where);
    if (H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V110, H5F_LIBVER_V110) < 0) {
        fail(where.file, "", "cannot set the file format");
    }
    return fapl;
}

Handle open_result_file(const std::string& path, OpenMode mode) {
    silence_errors();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) invalid(path, "cannot open: no such file");
    if (!std::filesystem::is_regular_file(path, ec)) invalid(path, "cannot open: not a file");
    const htri_t is_hdf5 = is_hdf5_file(path);
    if (is_hdf5 == 0) invalid(path, "cannot open: not an HDF5 file");
    if (is_hdf5 < 0) fail(path, "", "cannot open");
    const Where where{path, ""};
    if (mode == OpenMode::write_swmr) {
        Handle fapl = writer_access_plist(where);
        // A killed writer leaves the superblock marked "open for SWMR writing"; this writer
        // holds the claim (file_lock.hpp), so it clears the mark, as h5clear -s would.
        hbool_t clear = true;
        if (H5Pset(fapl.get(), "clear_status_flags", &clear) < 0) {
            fail(path, "", "cannot set the file access properties");
        }
        Handle file =
            file_handle(H5Fopen(path.c_str(), H5F_ACC_RDWR | H5F_ACC_SWMR_WRITE, fapl.get()));
        if (!file) fail(path, "", "cannot open for writing");
        return file;
    }
    Handle fapl = read_access_plist(where, mode == OpenMode::salvage ? 1 : kMetadataReadAttempts);
    Handle file =
        file_handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl.get()));
    if (file) return file;
    // Not a SWMR file (format 1): open it plainly, reporting the more telling of both errors.
    const LibraryError swmr_error = library_error();
    H5Eclear2(H5E_DEFAULT);
    file = file_handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()));
    if (file) return file;
    const LibraryError plain_error = library_error();
    H5Eclear2(H5E_DEFAULT);
    const bool write_mark = plain_error.text.find("already open") != std::string::npos;
    const LibraryError& why = write_mark && !swmr_error.text.empty() ? swmr_error : plain_error;
    invalid(path, "cannot open" + (why.text.empty() ? std::string() : ": " + why.text));
}

// Root attributes
// ----------------------------------------------------------------------------------

ResultHeader read_header(hid_t file, const std::string& path, bool tolerant) {
    const Where root{path, ""};
    if (!has_attribute(file, "format", root)) {
        invalid(path, "not a prism result file (no 'format' attribute)");
    }
    const std::string format = read_string_attribute(file, "format", root);
    if (format != kResultFormat) {
        invalid(path, "not a prism result file (format '" + format + "')");
    }
    ResultHeader h;
    h.format_version = read_i64_attribute(file, "format_version", root);
    if (h.format_version < kOldestReadableFormatVersion ||
        h.format_version > kResultFormatVersion) {
        invalid(path, "unsupported format_version " + std::to_string(h.format_version) +
                          " (this program reads " + std::to_string(kOldestReadableFormatVersion) +
                          " to " + std::to_string(kResultFormatVersion) + ")");
    }
    auto descriptive = [&](const char* name) {
        try {
            return read_string_attribute(file, name, root);
        } catch (const IoError&) {
            if (!tolerant) throw;
            return std::string();
        }
    };
    h.program_version = descriptive("program_version");
    // files from before the attribute existed have none
    h.model_version = has_attribute(file, "model_version", root)
                          ? read_string_attribute(file, "model_version", root)
                          : std::string();
    h.experiment_name = read_string_attribute(file, "experiment_name", root);
    h.experiment_toml = read_string_attribute(file, "experiment_toml", root);
    h.experiment_sha256 = read_string_attribute(file, "experiment_sha256", root);
    if (has_attribute(file, "included_file_names", root)) {
        const auto names = read_strings_attribute(file, "included_file_names", root);
        const auto texts = read_strings_attribute(file, "included_file_texts", root);
        if (names.size() != texts.size()) {
            throw IoError(path + ": included_file_names and included_file_texts differ in length");
        }
        for (std::size_t i = 0; i < names.size(); ++i)
            h.included_files.emplace_back(names[i], texts[i]);
    }
    h.seed = read_u64_attribute(file, "seed", root);
    h.space_size = read_u64_attribute(file, "space_size", root);
    h.status = descriptive("status");
    h.next_index = read_u64_attribute(file, "next_index", root);
    h.rows_committed = read_u64_attribute(file, "rows_committed", root);
    h.created = descriptive("created");
    h.updated = descriptive("updated");
    return h;
}

std::uint64_t optional_u64_attribute(hid_t obj, const std::string& name, const Where& where) {
    return has_attribute(obj, name, where) ? read_u64_attribute(obj, name, where) : 0;
}

CommitRecord read_commit(hid_t file, const std::string& path, std::int64_t format_version) {
    const Where root{path, ""};
    CommitRecord record;
    if (format_version >= 2) {
        const std::vector<std::uint64_t> values = read_u64s_attribute(file, "commit", root);
        if (values.size() != 5) invalid(path, "attribute 'commit' has the wrong size");
        record = {values[0], values[1], values[2], values[3], values[4]};
        return record;
    }
    record.next_index = read_u64_attribute(file, "next_index", root);
    record.rows = read_u64_attribute(file, "rows_committed", root);
    Handle reasons = open_dataset(file, "reasons", root);
    record.reasons = optional_u64_attribute(reasons.get(), "committed", {path, "/reasons"});
    Handle failures = open_group(file, "failures", root);
    record.failures = optional_u64_attribute(failures.get(), "committed", {path, "/failures"});
    for (const auto& [reason, count] : read_filtered_rows(file, path)) record.filtered_sum += count;
    return record;
}

void write_commit(hid_t file, const std::string& path, const CommitRecord& record) {
    write_attribute(file, "commit",
                    std::vector<std::uint64_t>{record.next_index, record.rows, record.reasons,
                                               record.failures, record.filtered_sum},
                    {path, ""});
}

void check_commit(const std::string& path, const CommitRecord& record, std::uint64_t space_size) {
    if (record.rows <= record.next_index && record.next_index <= space_size &&
        record.filtered_sum <= record.next_index - record.rows) {
        return;
    }
    invalid(path, "damaged: its counts do not add up (rows_committed " +
                      std::to_string(record.rows) + ", next_index " +
                      std::to_string(record.next_index) + ", filtered " +
                      std::to_string(record.filtered_sum) + ", space_size " +
                      std::to_string(space_size) + ")");
}

std::vector<std::pair<std::string, std::uint64_t>> read_filtered_rows(hid_t file,
                                                                      const std::string& path) {
    Handle group = open_group(file, "filtered", {path, ""});
    const Where where{path, "/filtered"};
    Handle reason = open_dataset(group.get(), "reason", where);
    Handle count = open_dataset(group.get(), "count", where);
    const Where at_reason{path, "/filtered/reason"};
    const Where at_count{path, "/filtered/count"};
    const std::uint64_t n =
        std::min(row_count(reason.get(), at_reason), row_count(count.get(), at_count));
    const auto reasons = read_string_rows(reason.get(), n, at_reason);
    const auto counts = read_u64s(count.get(), n, at_count);
    std::vector<std::pair<std::string, std::uint64_t>> rows;
    for (std::uint64_t i = 0; i < n; ++i) rows.emplace_back(reasons[i], counts[i]);
    return rows;
}

// Layout
// -------------------------------------------------------------------------------------------

namespace {

std::string optional_string_attribute(hid_t obj, const std::string& name, const Where& where) {
    return has_attribute(obj, name, where) ? read_string_attribute(obj, name, where)
                                           : std::string();
}

ColumnSpec read_column(hid_t points, const std::string& path, const std::string& name) {
    const Where where{path, "/points/" + name};
    Handle dataset = open_dataset(points, name, {path, "/points"});
    Handle type = type_handle(H5Dget_type(dataset.get()));
    if (!type) fail(path, where.object, "cannot get the type");
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
            column.labels = enum_labels(type.get(), where);
            break;
        default:
            invalid(path, where.object + ": unsupported column type");
    }
    column.unit = optional_string_attribute(dataset.get(), "unit", where);
    column.description = optional_string_attribute(dataset.get(), "description", where);
    return column;
}

std::vector<std::string> child_names(hid_t group, const Where& where) {
    std::vector<std::string> names;
    auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
        static_cast<std::vector<std::string>*>(out)->emplace_back(name);
        return 0;
    };
    hsize_t position = 0;
    if (H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &position, collect, &names) < 0) {
        fail(where.file, where.object, "cannot list the members");
    }
    return names;
}

}  // namespace

Layout read_layout(hid_t file, const std::string& path) {
    Layout layout;
    const Where root{path, ""};
    Handle points = open_group(file, "points", root);
    for (const auto& name : read_strings_attribute(points.get(), "columns", {path, "/points"})) {
        layout.columns.push_back(read_column(points.get(), path, name));
    }
    Handle metrics = open_group(file, "metrics", root);
    const Where at_metrics{path, "/metrics"};
    for (const auto& name : read_strings_attribute(metrics.get(), "columns", at_metrics)) {
        const Where where{path, "/metrics/" + name};
        Handle dataset = open_dataset(metrics.get(), name, at_metrics);
        layout.metrics.push_back({name, optional_string_attribute(dataset.get(), "unit", where),
                                  optional_string_attribute(dataset.get(), "description", where)});
    }
    if (link_exists(file, "histograms", root)) {
        Handle histograms = open_group(file, "histograms", root);
        Handle dataset = open_dataset(histograms.get(), kHistogram, {path, "/histograms"});
        Handle space = space_handle(H5Dget_space(dataset.get()));
        std::array<hsize_t, 2> dims{};
        if (!space || H5Sget_simple_extent_ndims(space.get()) != 2 ||
            H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
            invalid(path, "/histograms/step_time: expected a 2-D dataset");
        }
        layout.histogram_bins = dims[1];
    }
    if (link_exists(file, "pareto", root)) {
        Handle pareto = open_group(file, "pareto", root);
        for (const auto& name : child_names(pareto.get(), {path, "/pareto"})) {
            Handle group = open_group(pareto.get(), name, {path, "/pareto"});
            const Where where{path, "/pareto/" + name};
            layout.pareto_sets.push_back(
                {name, read_strings_attribute(group.get(), "objectives", where),
                 read_strings_attribute(group.get(), "senses", where),
                 has_attribute(group.get(), "scenarios", where)
                     ? read_strings_attribute(group.get(), "scenarios", where)
                     : std::vector<std::string>{}});
        }
    }
    return layout;
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

}  // namespace

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

void check_declarations(const std::string& path, const std::vector<ColumnSpec>& columns,
                        const MetricSchema& metrics, const std::vector<ParetoSpec>& pareto_sets,
                        std::size_t chunk_rows) {
    std::set<std::string> names = {"index", "status", "reason_id"};
    for (const auto& c : columns) {
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
    for (const auto& m : metrics) {
        if (!valid_name(m.name)) invalid(path, "invalid metric name '" + m.name + "'");
        if (!metric_names.insert(m.name).second) {
            invalid(path, "duplicate metric name '" + m.name + "'");
        }
    }
    std::set<std::string> set_names;
    for (const auto& p : pareto_sets) {
        if (!valid_name(p.name)) invalid(path, "invalid pareto set name '" + p.name + "'");
        if (!set_names.insert(p.name).second) {
            invalid(path, "duplicate pareto set name '" + p.name + "'");
        }
        const std::string object = "/pareto/" + p.name;
        if (p.objectives.empty() || p.objectives.size() != p.senses.size()) {
            invalid(path, object + ": " + std::to_string(p.objectives.size()) + " objectives and " +
                              std::to_string(p.senses.size()) + " senses");
        }
        for (const auto& s : p.senses) {
            if (s != "min" && s != "max") {
                invalid(path, object + ": sense '" + s + "' is neither 'min' nor 'max'");
            }
        }
    }
    if (chunk_rows == 0) invalid(path, "chunk_rows must be positive");
}

std::size_t histogram_chunk_rows(std::size_t bins, std::size_t chunk_rows) {
    return std::clamp<std::size_t>(65536 / std::max<std::size_t>(bins, 1), 1, chunk_rows);
}

// Reading rows
// -------------------------------------------------------------------------------------

std::vector<std::int64_t> read_integers(hid_t dataset, std::uint64_t count, const Where& where) {
    std::vector<std::int64_t> out(count, 0);
    if (count == 0) return out;
    Handle type = type_handle(H5Dget_type(dataset));
    if (!type) fail(where.file, where.object, "cannot get the type");
    const H5T_class_t type_class = H5Tget_class(type.get());
    if (type_class == H5T_INTEGER) {
        read_rows(dataset, H5T_NATIVE_INT64, out.data(), count, where);
    } else if (type_class == H5T_ENUM) {
        // HDF5 converts enums only to enums: read the raw values in the native enum type,
        // then widen its integer base in place (the buffer has 8 bytes per value).
        Handle native = type_handle(H5Tget_native_type(type.get(), H5T_DIR_ASCEND));
        Handle base = type_handle(H5Tget_super(native.get()));
        if (!native || !base) fail(where.file, where.object, "cannot get the type");
        read_rows(dataset, native.get(), out.data(), count, where);
        if (H5Tconvert(base.get(), H5T_NATIVE_INT64, count, out.data(), nullptr, H5P_DEFAULT) < 0) {
            fail(where.file, where.object, "cannot convert enumeration values");
        }
    } else {
        invalid(where.file, where.object + ": not an integer column");
    }
    return out;
}

std::vector<double> read_doubles(hid_t dataset, std::uint64_t count, const Where& where) {
    std::vector<double> out(count, 0.0);
    read_rows(dataset, H5T_NATIVE_DOUBLE, out.data(), count, where);
    return out;
}

std::vector<std::uint64_t> read_u64s(hid_t dataset, std::uint64_t count, const Where& where) {
    std::vector<std::uint64_t> out(count, 0);
    read_rows(dataset, H5T_NATIVE_UINT64, out.data(), count, where);
    return out;
}

}  // namespace prism::io::detail
