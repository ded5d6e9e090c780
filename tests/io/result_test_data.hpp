#pragma once

// The test data set of the result-store tests: row r of it is a closed form of its design-space
// index, the truth every read-back is compared with. Shared by result_store_test.cpp and
// result_probe.cpp (a reader in another process).

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "io/result_store.hpp"
#include "src/model/metrics.hpp"

namespace prism::io::test_data {

using prism::MetricSchema;
using prism::PointStatus;

inline const char* const kToml = "name = \"unit\"\n[space]\ntp = [1, 2]\n";

inline ResultHeader test_header() {
    ResultHeader h;
    h.program_version = "9.8.7";
    h.experiment_name = "unit";
    h.experiment_toml = kToml;
    h.seed = 18446744073709551557ULL;  // largest 64-bit prime: every bit of the uint64 matters
    h.space_size = 100;
    h.pareto_sets = {{"time_vs_tokens", {"step_time_p95_s", "tokens_per_s"}, {"min", "max"}, {}}};
    return h;
}

inline std::vector<ColumnSpec> test_columns() {
    return {{"tp", ColumnSpec::Type::int64, "1", "tensor-parallel degree", {}},
            {"placement",
             ColumnSpec::Type::enumeration,
             "1",
             "rank placement",
             {"tp_inner", "dp_inner", "spread"}},
            {"lr", ColumnSpec::Type::float64, "1", "learning rate", {}},
            {"zero_stage", ColumnSpec::Type::int64, "1", "ZeRO stage", {}}};
}

inline MetricSchema test_metrics() {
    return {{"step_time_p95_s", "s", "95th percentile of step time"},
            {"tokens_per_s", "tokens/s", "throughput"}};
}

// The content of row r of the test data set, as a closed form of the design-space index: the
// truth the read-back is compared with.
inline std::uint64_t index_of(std::size_t r) { return 3 * r + 1; }
inline PointStatus status_of(std::uint64_t i) {
    return i % 7 == 0    ? PointStatus::infeasible
           : i % 11 == 0 ? PointStatus::failed
                         : PointStatus::ok;
}
inline std::string reason_of(std::uint64_t i) {
    if (status_of(i) == PointStatus::infeasible) return "memory: " + std::to_string(i % 2) + " GiB";
    if (status_of(i) == PointStatus::failed) return "boom " + std::to_string(i);
    return "";
}
inline std::int64_t tp_of(std::uint64_t i) { return std::int64_t{1} << (i % 4); }
inline std::int64_t placement_of(std::uint64_t i) { return static_cast<std::int64_t>(i % 3); }
inline double lr_of(std::uint64_t i) { return 1e-4 * static_cast<double>(i) + 0.125; }
inline std::int64_t zero_of(std::uint64_t i) { return -static_cast<std::int64_t>(i % 4); }
inline double p95_of(std::uint64_t i) {
    return status_of(i) == PointStatus::ok ? 0.5 + static_cast<double>(i) / 1024.0 : prism::kNaN;
}
inline double tokens_of(std::uint64_t i) { return 1e6 * static_cast<double>(i) + 0.25; }
inline float bin_of(std::uint64_t i, std::size_t b) { return static_cast<float>(i) + 0.5F * b; }

/// Rows [first, first+n) of the test data set; int columns in declaration order: tp,
/// placement (label index), zero_stage.
inline RowBatch batch_rows(std::size_t first, std::size_t n, std::size_t bins = 0) {
    RowBatch b;
    b.int_columns.resize(3);
    b.float_columns.resize(1);
    b.metrics.resize(2);
    for (std::size_t r = first; r < first + n; ++r) {
        const std::uint64_t i = index_of(r);
        b.index.push_back(i);
        b.status.push_back(status_of(i));
        b.reason.push_back(reason_of(i));
        b.int_columns[0].push_back(tp_of(i));
        b.int_columns[1].push_back(placement_of(i));
        b.int_columns[2].push_back(zero_of(i));
        b.float_columns[0].push_back(lr_of(i));
        b.metrics[0].push_back(p95_of(i));
        b.metrics[1].push_back(tokens_of(i));
        for (std::size_t k = 0; k < bins; ++k) b.histogram.push_back(bin_of(i, k));
        if (bins > 0) {
            b.histogram_lo_s.push_back(0.25 * static_cast<double>(i));
            b.histogram_hi_s.push_back(0.25 * static_cast<double>(i) + 1.0);
        }
    }
    return b;
}

/// "" when the reader holds exactly rows [0, n) of the test data set, else the first
/// difference.
inline std::string check_rows(const ResultReader& reader, std::size_t n) {
    if (reader.rows() != n) {
        return "rows " + std::to_string(reader.rows()) + " != " + std::to_string(n);
    }
    const auto index = reader.index();
    const auto status = reader.status();
    const auto reasons = reader.row_reasons();
    const auto tp = reader.int_column("tp");
    const auto placement = reader.int_column("placement");
    const auto zero = reader.int_column("zero_stage");
    const auto lr = reader.float_column("lr");
    const auto p95 = reader.metric("step_time_p95_s");
    const auto tokens = reader.metric("tokens_per_s");
    for (std::size_t r = 0; r < n; ++r) {
        const std::uint64_t i = index_of(r);
        const bool same_p95 = std::isnan(p95_of(i)) ? std::isnan(p95[r]) : p95[r] == p95_of(i);
        if (index[r] != i || status[r] != status_of(i) || reasons[r] != reason_of(i) ||
            tp[r] != tp_of(i) || placement[r] != placement_of(i) || zero[r] != zero_of(i) ||
            lr[r] != lr_of(i) || !same_p95 || tokens[r] != tokens_of(i)) {
            return "row " + std::to_string(r) + " differs";
        }
    }
    return "";
}

}  // namespace prism::io::test_data
