#include "io/verify_store.hpp"

#include <algorithm>
#include <array>
#include <filesystem>

#include <hdf5.h>
#include <toml++/toml.h>

#include "io/detail/hdf5_util.hpp"
#include "io/result_store.hpp"
#include "src/common/error.hpp"

namespace prism::io {

namespace {

using detail::Handle;
using detail::Where;

constexpr const char* kGroup = "verify";

/// The figures compared per point: name, what it is, and where it lives in Verification.
struct Figure {
    const char* name;
    const char* what;
    double stochastic::Verification::*analytic;
    double stochastic::Verification::*mc;
};

constexpr std::array<Figure, 4> kFigures{{
    {"mean", "mean step time", &stochastic::Verification::analytic_mean_s,
     &stochastic::Verification::mc_mean_s},
    {"p50", "median step time", &stochastic::Verification::analytic_p50_s,
     &stochastic::Verification::mc_p50_s},
    {"p95", "95th percentile step time", &stochastic::Verification::analytic_p95_s,
     &stochastic::Verification::mc_p95_s},
    {"p99", "99th percentile step time", &stochastic::Verification::analytic_p99_s,
     &stochastic::Verification::mc_p99_s},
}};

Handle open_result_file(const std::string& path, bool write) {
    detail::silence_errors();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw IoError(path + ": cannot open: no such file");
    if (detail::is_hdf5_file(path) <= 0) throw IoError(path + ": cannot open: not an HDF5 file");
    Handle fapl = detail::file_access_plist({path, ""});
    Handle file = detail::file_handle(
        H5Fopen(path.c_str(), write ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl.get()));
    if (!file) detail::fail(path, "", write ? "cannot open for writing" : "cannot open");
    const Where root{path, ""};
    if (!detail::has_attribute(file.get(), "format", root) ||
        detail::read_string_attribute(file.get(), "format", root) != kResultFormat) {
        throw IoError(path + ": not a prism result file");
    }
    return file;
}

void write_column(hid_t group, const std::string& name, hid_t file_type, hid_t mem_type,
                  const void* data, std::size_t rows, const std::string& unit,
                  const std::string& description, const Where& where) {
    Handle ds = detail::create_growing(group, name, file_type, std::max<std::size_t>(rows, 1), {},
                                       where, false);
    detail::write_attribute(ds.get(), "unit", unit, where);
    detail::write_attribute(ds.get(), "description", description, where);
    detail::write_rows(ds.get(), mem_type, data, 0, rows, where);
}

std::vector<double> read_doubles(hid_t group, const std::string& name, std::size_t rows,
                                 const Where& where) {
    Handle ds = detail::open_dataset(group, name, where);
    if (detail::row_count(ds.get(), where) != rows) {
        detail::fail(where.file, where.object + "/" + name, "row count differs from /verify/index");
    }
    std::vector<double> out(rows);
    detail::read_rows(ds.get(), H5T_NATIVE_DOUBLE, out.data(), rows, where);
    return out;
}

}  // namespace

void write_verification(const std::string& path, int samples, std::vector<VerifiedPoint> rows) {
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.index < b.index; });
    Handle file = open_result_file(path, true);
    const Where root{path, ""};
    if (detail::link_exists(file.get(), kGroup, root))
        detail::delete_link(file.get(), kGroup, root);
    Handle group = detail::create_group(file.get(), kGroup, root);
    const Where where{path, "/verify"};
    detail::write_attribute(group.get(), "method", std::string("montecarlo"), where);
    detail::write_attribute(group.get(), "samples", static_cast<std::int64_t>(samples), where);
    detail::write_attribute(
        group.get(), "description",
        std::string("the Pareto front's points re-evaluated by Monte Carlo after the analytic "
                    "sweep: KS distance and step-time figures of both evaluators"),
        where);
    const std::size_t n = rows.size();
    std::vector<std::uint64_t> index(n);
    std::vector<double> ks(n);
    for (std::size_t r = 0; r < n; ++r) {
        index[r] = rows[r].index;
        ks[r] = rows[r].verification.ks;
    }
    write_column(group.get(), "index", H5T_STD_U64LE, H5T_NATIVE_UINT64, index.data(), n, "",
                 "design-space index of a Pareto-front point", where);
    write_column(group.get(), "ks", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, ks.data(), n, "",
                 "Kolmogorov-Smirnov distance of the analytic CDF to the Monte Carlo draws", where);
    for (const Figure& f : kFigures) {
        std::vector<double> analytic(n), mc(n), diff(n);
        for (std::size_t r = 0; r < n; ++r) {
            analytic[r] = rows[r].verification.*f.analytic;
            mc[r] = rows[r].verification.*f.mc;
            diff[r] = analytic[r] - mc[r];
        }
        const std::string base = f.name;
        write_column(group.get(), base + "_analytic_s", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                     analytic.data(), n, "s", std::string(f.what) + ", analytic evaluator", where);
        write_column(group.get(), base + "_mc_s", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, mc.data(), n,
                     "s", std::string(f.what) + ", Monte Carlo", where);
        write_column(group.get(), base + "_diff_s", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, diff.data(),
                     n, "s", std::string(f.what) + ", analytic minus Monte Carlo", where);
    }
    if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) detail::fail(path, "/verify", "cannot flush");
    if (file.close() < 0) detail::fail(path, "", "cannot close");
}

bool verification_requested(const std::string& experiment_toml) {
    toml::table parsed;
    try {
        parsed = toml::parse(experiment_toml);
    } catch (const toml::parse_error&) {
        return false;
    }
    const std::optional<std::string_view> verify =
        parsed["evaluation"]["verify"].value<std::string_view>();
    return verify && *verify == "montecarlo";
}

std::optional<std::vector<VerifiedPoint>> read_verification(const std::string& path) {
    Handle file = open_result_file(path, false);
    const Where root{path, ""};
    if (!detail::link_exists(file.get(), kGroup, root)) return std::nullopt;
    Handle group = detail::open_group(file.get(), kGroup, root);
    const Where where{path, "/verify"};
    const auto samples = detail::read_i64_attribute(group.get(), "samples", where);
    Handle index_ds = detail::open_dataset(group.get(), "index", where);
    const std::size_t n = detail::row_count(index_ds.get(), where);
    std::vector<std::uint64_t> index(n);
    detail::read_rows(index_ds.get(), H5T_NATIVE_UINT64, index.data(), n, where);
    std::vector<VerifiedPoint> rows(n);
    const auto ks = read_doubles(group.get(), "ks", n, where);
    for (std::size_t r = 0; r < n; ++r) {
        rows[r].index = index[r];
        rows[r].verification.samples = static_cast<int>(samples);
        rows[r].verification.ks = ks[r];
    }
    for (const Figure& f : kFigures) {
        const auto analytic =
            read_doubles(group.get(), std::string(f.name) + "_analytic_s", n, where);
        const auto mc = read_doubles(group.get(), std::string(f.name) + "_mc_s", n, where);
        for (std::size_t r = 0; r < n; ++r) {
            rows[r].verification.*f.analytic = analytic[r];
            rows[r].verification.*f.mc = mc[r];
        }
    }
    return rows;
}

}  // namespace prism::io
