#include "io/result_salvage.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <utility>

#include <hdf5.h>

#include "io/detail/hdf5_handle.hpp"
#include "io/detail/hdf5_util.hpp"
#include "io/detail/result_format.hpp"
#include "src/common/error.hpp"

namespace prism::io {

namespace {

namespace fs = std::filesystem;
using detail::Handle;
using detail::Where;

/// The superblock fields a diagnosis needs (HDF5 file format specification, section II.A).
struct Superblock {
    bool signature = false;
    int version = -1;
    std::uint64_t end_of_file = 0;  ///< base address + end-of-file address: the size HDF5 expects
};

std::uint64_t little_endian(const unsigned char* bytes, int size) {
    std::uint64_t value = 0;
    for (int i = size - 1; i >= 0; --i) value = (value << 8) | bytes[i];
    return value;
}

Superblock read_superblock(const std::string& path) {
    std::array<unsigned char, 96> head{};
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(head.data()), head.size());
    const auto got = static_cast<std::size_t>(in.gcount());
    Superblock sb;
    static constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    if (got < 9 || std::memcmp(head.data(), kSignature, 8) != 0) return sb;
    sb.signature = true;
    sb.version = head[8];
    // Versions 0 and 1 keep the sizes at bytes 13-14 and the addresses from byte 24 (v0) or
    // 28 (v1); versions 2 and 3 keep them at bytes 9-10 and from byte 12. Addresses: base,
    // (free-space or extension), end of file.
    const int offsets = sb.version >= 2 ? head[9] : head[13];
    const std::size_t first = sb.version >= 2 ? 12 : (sb.version == 1 ? 28 : 24);
    if ((offsets != 4 && offsets != 8) || first + 3 * offsets > got) {
        sb.version = -1;
        return sb;
    }
    const std::uint64_t base = little_endian(head.data() + first, offsets);
    sb.end_of_file = base + little_endian(head.data() + first + 2 * offsets, offsets);
    return sb;
}

/// A private copy of a file cut short, extended to the size HDF5 expects with 0xff bytes:
/// every signature and checksum past the cut fails at once, where zeros can make HDF5 1.10
/// loop forever (a global heap collection of zeros).
class ScratchCopy {
  public:
    ScratchCopy(const std::string& path, const std::string& dir, std::uint64_t size) {
        path_ = (fs::path(dir) / (".prism-salvage-" + std::to_string(::getpid()) + ".h5")).string();
        std::error_code ec;
        fs::copy_file(path, path_, fs::copy_options::overwrite_existing, ec);
        if (!ec) {
            std::ofstream out(path_, std::ios::binary | std::ios::app);
            const std::vector<char> fill(64 * 1024, static_cast<char>(0xff));
            for (std::uint64_t have = fs::file_size(path_, ec); !ec && out && have < size;) {
                const auto n =
                    static_cast<std::streamsize>(std::min<std::uint64_t>(fill.size(), size - have));
                out.write(fill.data(), n);
                have += static_cast<std::uint64_t>(n);
            }
            if (!out) ec = std::make_error_code(std::errc::io_error);
        }
        if (ec) {
            fs::remove(path_, ec);
            throw IoError(path_ + ": cannot make a scratch copy: " + ec.message());
        }
    }
    ScratchCopy(const ScratchCopy&) = delete;
    ScratchCopy& operator=(const ScratchCopy&) = delete;
    ~ScratchCopy() {
        std::error_code ec;
        fs::remove(path_, ec);
    }
    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

/// Rows [0, limit) of a row dataset that read back whole, read chunk by chunk into `out`
/// (row_bytes per row): stops at the first chunk that is missing, lies past `real_size` bytes
/// of the file, or does not decode. Without `out`, only the chunks' places are checked.
std::uint64_t read_whole_rows(hid_t dataset, hid_t mem_type, std::size_t row_bytes,
                              std::uint64_t limit, std::uint64_t real_size, const Where& where,
                              std::vector<unsigned char>* out) {
    const std::uint64_t chunk = std::max<std::uint64_t>(1, detail::chunk_rows(dataset, where));
    limit = std::min(limit, detail::row_count(dataset, where));
    if (out != nullptr) out->assign(limit * row_bytes, 0);
    std::uint64_t rows = 0;
    while (rows < limit) {
        std::array<hsize_t, 2> offset{rows, 0};
        unsigned mask = 0;
        haddr_t address = HADDR_UNDEF;
        hsize_t size = 0;
        if (H5Dget_chunk_info_by_coord(dataset, offset.data(), &mask, &address, &size) < 0 ||
            address == HADDR_UNDEF || address + size > real_size) {
            break;
        }
        const std::uint64_t count = std::min(chunk, limit - rows);
        if (out != nullptr) {
            try {
                detail::read_row_range(dataset, mem_type, out->data() + rows * row_bytes, rows,
                                       count, where);
            } catch (const IoError&) {
                break;
            }
        }
        rows += count;
    }
    H5Eclear2(H5E_DEFAULT);
    if (out != nullptr) out->resize(rows * row_bytes);
    return rows;
}

template <class T>
std::vector<T> as_values(const std::vector<unsigned char>& bytes, std::uint64_t rows,
                         std::size_t per_row = 1) {
    std::vector<T> values(rows * per_row);
    std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
    return values;
}

/// Reads every row dataset's whole prefix into `rows`; returns the common row count.
std::uint64_t read_row_columns(hid_t file, const std::string& path, const SalvagedResults& s,
                               std::uint64_t limit, std::uint64_t real_size, RowBatch& rows,
                               std::vector<std::int32_t>& reason_ids) {
    Handle points = detail::open_group(file, "points", {path, ""});
    Handle metrics = detail::open_group(file, "metrics", {path, ""});
    std::uint64_t common = limit;
    std::vector<unsigned char> bytes;
    auto read = [&](hid_t group, const std::string& object, const std::string& name, hid_t mem_type,
                    std::size_t per_row) {
        Handle ds = detail::open_dataset(group, name, {path, object});
        const std::size_t row_bytes = H5Tget_size(mem_type) * per_row;
        common = std::min(common, read_whole_rows(ds.get(), mem_type, row_bytes, limit, real_size,
                                                  {path, object + "/" + name}, &bytes));
        return common;
    };
    auto enum_values = [&](hid_t group, const std::string& name) {
        Handle ds = detail::open_dataset(group, name, {path, "/points"});
        Handle type = detail::type_handle(H5Dget_type(ds.get()));
        Handle native = detail::type_handle(H5Tget_native_type(type.get(), H5T_DIR_ASCEND));
        read(group, "/points", name, native.get(), 1);
        const auto raw = as_values<std::uint8_t>(bytes, bytes.size());
        return std::vector<std::int64_t>(raw.begin(), raw.end());
    };
    rows.index = as_values<std::uint64_t>(
        bytes, read(points.get(), "/points", "index", H5T_NATIVE_UINT64, 1));
    for (const auto v : enum_values(points.get(), "status")) {
        rows.status.push_back(static_cast<PointStatus>(std::min<std::int64_t>(v, 3)));
    }
    reason_ids = as_values<std::int32_t>(
        bytes, read(points.get(), "/points", "reason_id", H5T_NATIVE_INT32, 1));
    for (const auto& c : s.columns) {
        if (c.type == ColumnSpec::Type::float64) {
            rows.float_columns.push_back(as_values<double>(
                bytes, read(points.get(), "/points", c.name, H5T_NATIVE_DOUBLE, 1)));
        } else if (c.type == ColumnSpec::Type::int64) {
            rows.int_columns.push_back(as_values<std::int64_t>(
                bytes, read(points.get(), "/points", c.name, H5T_NATIVE_INT64, 1)));
        } else {
            rows.int_columns.push_back(enum_values(points.get(), c.name));
        }
    }
    for (const auto& m : s.metrics) {
        rows.metrics.push_back(as_values<double>(
            bytes, read(metrics.get(), "/metrics", m.name, H5T_NATIVE_DOUBLE, 1)));
    }
    const std::size_t bins = s.header.histogram_bins;
    if (bins > 0) {
        Handle group = detail::open_group(file, "histograms", {path, ""});
        rows.histogram = as_values<float>(
            bytes, read(group.get(), "/histograms", detail::kHistogram, H5T_NATIVE_FLOAT, bins),
            bins);
        rows.histogram_lo_s = as_values<double>(
            bytes, read(group.get(), "/histograms", detail::kHistogramLo, H5T_NATIVE_DOUBLE, 1));
        rows.histogram_hi_s = as_values<double>(
            bytes, read(group.get(), "/histograms", detail::kHistogramHi, H5T_NATIVE_DOUBLE, 1));
    }
    return common;
}

/// Rows [0, limit) whose chunks lie within the file in every row dataset.
std::uint64_t rows_within(hid_t file, const std::string& path, const SalvagedResults& s,
                          std::uint64_t limit, std::uint64_t real_size) {
    std::vector<std::pair<std::string, std::string>> datasets = {
        {"points", "index"}, {"points", "status"}, {"points", "reason_id"}};
    for (const auto& c : s.columns) datasets.emplace_back("points", c.name);
    for (const auto& m : s.metrics) datasets.emplace_back("metrics", m.name);
    if (s.header.histogram_bins > 0) {
        for (const char* name : {detail::kHistogram, detail::kHistogramLo, detail::kHistogramHi}) {
            datasets.emplace_back("histograms", name);
        }
    }
    for (const auto& [group_name, name] : datasets) {
        Handle group = detail::open_group(file, group_name, {path, ""});
        Handle ds = detail::open_dataset(group.get(), name, {path, "/" + group_name});
        limit = std::min(limit, read_whole_rows(ds.get(), H5T_NATIVE_UINT8, 1, limit, real_size,
                                                {path, "/" + group_name + "/" + name}, nullptr));
    }
    return limit;
}

/// Keeps the first `n` rows of every vector of the batch.
void keep_rows(RowBatch& rows, std::uint64_t n, std::size_t bins) {
    auto cut = [n](auto& v, std::size_t per_row = 1) {
        v.resize(std::min<std::size_t>(v.size(), n * per_row));
    };
    cut(rows.index);
    cut(rows.status);
    for (auto& c : rows.int_columns) cut(c);
    for (auto& c : rows.float_columns) cut(c);
    for (auto& m : rows.metrics) cut(m);
    cut(rows.histogram, bins);
    cut(rows.histogram_lo_s);
    cut(rows.histogram_hi_s);
}

/// Strings of a vlen string dataset, one by one, as long as they read back.
std::vector<std::string> readable_strings(hid_t dataset, std::uint64_t limit, const Where& where) {
    std::vector<std::string> out;
    limit = std::min(limit, detail::row_count(dataset, where));
    try {
        // One read first (the common case); row by row only when it fails.
        return detail::read_string_rows(dataset, limit, where);
    } catch (const IoError&) {
    }
    for (std::uint64_t r = 0; r < limit; ++r) {
        try {
            std::vector<std::string> one = detail::read_string_rows(dataset, r + 1, where);
            out.push_back(one.back());
        } catch (const IoError&) {
            break;
        }
    }
    H5Eclear2(H5E_DEFAULT);
    return out;
}

/// The reasons the rows refer to, as far as they read back.
std::vector<std::string> read_reasons(hid_t file, const std::string& path,
                                      const detail::CommitRecord& commit,
                                      const std::vector<std::int32_t>& reason_ids) {
    Handle ds_reasons = detail::open_dataset(file, "reasons", {path, ""});
    std::uint64_t wanted = commit.reasons;
    for (const auto id : reason_ids) wanted = std::max<std::uint64_t>(wanted, id + 1);
    return readable_strings(ds_reasons.get(), wanted, {path, "/reasons"});
}

/// Failures and filtered counts of the saved rows (whose reasons are set).
void read_tables(hid_t file, const std::string& path, const detail::CommitRecord& commit,
                 SalvagedResults& s) {
    // Failures are the failed rows; their messages come from /failures where it reads.
    Handle failures = detail::open_group(file, "failures", {path, ""});
    Handle fail_index = detail::open_dataset(failures.get(), "index", {path, "/failures"});
    Handle fail_message = detail::open_dataset(failures.get(), "message", {path, "/failures"});
    std::map<std::uint64_t, std::string> messages;
    try {
        const std::uint64_t n =
            std::min(commit.failures, detail::row_count(fail_index.get(), {path, "/failures"}));
        const auto index = detail::read_u64s(fail_index.get(), n, {path, "/failures/index"});
        const auto text = readable_strings(fail_message.get(), n, {path, "/failures/message"});
        for (std::size_t k = 0; k < text.size(); ++k) messages[index[k]] = text[k];
    } catch (const IoError&) {
        H5Eclear2(H5E_DEFAULT);
    }
    for (std::uint64_t r = 0; r < s.rows.size(); ++r) {
        if (s.rows.status[r] != PointStatus::failed) continue;
        const auto it = messages.find(s.rows.index[r]);
        s.failures.push_back(
            {s.rows.index[r], it != messages.end() ? it->second : s.rows.reason[r]});
    }
    try {
        std::uint64_t sum = 0;
        for (const auto& [reason, count] : detail::read_filtered_rows(file, path)) {
            if (count > 0) s.filtered.emplace_back(reason, count);
            sum += count;
        }
        s.filtered_exact = s.rows.size() == commit.rows && sum == commit.filtered_sum &&
                           commit.rows + sum == commit.next_index;
    } catch (const IoError&) {
        H5Eclear2(H5E_DEFAULT);
        s.filtered.clear();
    }
}

/// The saved prefix ends at the first row that breaks the file's rules or whose reason did
/// not read back.
std::uint64_t consistent_prefix(const RowBatch& rows, const std::vector<std::int32_t>& reason_ids,
                                std::uint64_t rows_read, std::uint64_t next_index,
                                std::size_t reasons_read) {
    for (std::uint64_t r = 0; r < rows_read; ++r) {
        const bool increasing = r == 0 || rows.index[r] > rows.index[r - 1];
        if (!increasing || rows.index[r] >= next_index || static_cast<int>(rows.status[r]) > 2 ||
            reason_ids[r] < -1 || reason_ids[r] >= static_cast<std::int64_t>(reasons_read)) {
            return r;
        }
    }
    return rows_read;
}

void salvage_open_file(const std::string& path, const std::string& open_path,
                       std::uint64_t real_size, SalvageMode mode, SalvagedResults& s) {
    Handle file = detail::open_result_file(open_path, detail::OpenMode::salvage);
    s.header = detail::read_header(file.get(), path, true);
    const detail::CommitRecord commit =
        detail::read_commit(file.get(), path, s.header.format_version);
    detail::Layout layout = detail::read_layout(file.get(), path);
    s.columns = layout.columns;
    s.metrics = layout.metrics;
    s.header.histogram_bins = layout.histogram_bins;
    s.header.pareto_sets = layout.pareto_sets;
    s.header_read = true;
    s.rows_committed = commit.rows;
    if (commit.rows > commit.next_index || commit.next_index > s.header.space_size) {
        s.problem = "its counts do not add up (rows_committed " + std::to_string(commit.rows) +
                    ", next_index " + std::to_string(commit.next_index) + ", space_size " +
                    std::to_string(s.header.space_size) + ")";
        s.rows_committed = std::min(commit.rows, s.header.space_size);
    }
    if (mode == SalvageMode::diagnose) {
        const std::uint64_t within = rows_within(file.get(), path, s, s.rows_committed, real_size);
        if (within < commit.rows) {
            const std::string lost = std::to_string(within) + " of " + std::to_string(commit.rows) +
                                     " committed rows lie within the file";
            s.problem = s.problem.empty() ? lost : s.problem + "; " + lost;
        }
        return;
    }
    std::vector<std::int32_t> reason_ids;
    const std::uint64_t read =
        read_row_columns(file.get(), path, s, s.rows_committed, real_size, s.rows, reason_ids);
    reason_ids.resize(read);
    const auto reasons = read_reasons(file.get(), path, commit, reason_ids);
    const std::uint64_t kept =
        consistent_prefix(s.rows, reason_ids, read, commit.next_index, reasons.size());
    // The next index: the file's when every committed row was saved, else the first lost row's.
    if (kept == commit.rows) {
        s.next_index = commit.next_index;
    } else if (kept < s.rows.index.size()) {
        s.next_index = s.rows.index[kept];
    } else {
        s.next_index = kept > 0 ? s.rows.index[kept - 1] + 1 : 0;
    }
    keep_rows(s.rows, kept, s.header.histogram_bins);
    for (std::uint64_t r = 0; r < kept; ++r) {
        const std::int32_t id = reason_ids[r];
        s.rows.reason.push_back(id < 0 ? std::string() : reasons[static_cast<std::size_t>(id)]);
    }
    read_tables(file.get(), path, commit, s);
    if (kept < commit.rows) {
        const std::string lost = std::to_string(kept) + " of " + std::to_string(commit.rows) +
                                 " committed rows read back whole";
        s.problem = s.problem.empty() ? lost : s.problem + "; " + lost;
    }
}

}  // namespace

SalvagedResults salvage_result_file(const std::string& path, SalvageMode mode,
                                    const std::string& scratch_dir) {
    const bool copy_if_cut = mode == SalvageMode::recover;
    detail::silence_errors();
    SalvagedResults s;
    std::error_code ec;
    if (!fs::exists(path, ec)) {
        s.problem = "no such file";
        return s;
    }
    const std::uint64_t size = fs::file_size(path, ec);
    if (ec) {
        s.problem = "cannot be read: " + ec.message();
        return s;
    }
    if (size == 0) {
        s.problem = "empty (0 bytes)";
        return s;
    }
    const Superblock sb = read_superblock(path);
    if (!sb.signature) {
        s.problem = size < 8
                        ? "cut short before the HDF5 signature (" + std::to_string(size) + " bytes)"
                        : "not an HDF5 file";
        return s;
    }
    if (sb.version < 0) {
        s.problem = "cut short inside its superblock (" + std::to_string(size) + " bytes)";
        return s;
    }
    std::string cut;
    if (size < sb.end_of_file) {
        cut = "cut short: " + std::to_string(size) + " of " + std::to_string(sb.end_of_file) +
              " bytes";
    }
    auto attempt = [&](const std::string& open_path) -> std::string {
        try {
            salvage_open_file(path, open_path, size, mode, s);
            return "";
        } catch (const IoError& e) {
            H5Eclear2(H5E_DEFAULT);
            std::string why = e.what();
            for (const std::string& prefix : {path + ": ", open_path + ": "}) {
                if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
            }
            s = SalvagedResults{};
            return why;
        }
    };
    std::string why = attempt(path);
    if (!why.empty() && !cut.empty() && copy_if_cut) {
        const ScratchCopy copy(path, scratch_dir, sb.end_of_file);
        why = attempt(copy.path());
    }
    if (!why.empty()) {
        // A cut file that HDF5 refuses says so itself ("truncated"): the cut says it better.
        s.problem = cut.empty()   ? "cannot be read: " + why
                    : copy_if_cut ? cut + "; nothing readable: " + why
                                  : cut;
        return s;
    }
    if (!cut.empty()) s.problem = s.problem.empty() ? cut : cut + "; " + s.problem;
    return s;
}

}  // namespace prism::io
