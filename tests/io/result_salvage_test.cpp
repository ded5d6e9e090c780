#include "io/result_salvage.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/result_store.hpp"
#include "src/common/error.hpp"
#include "tests/io/result_test_data.hpp"

namespace {

namespace fs = std::filesystem;
using prism::PointStatus;
using prism::io::ResultWriter;
using prism::io::salvage_result_file;
using prism::io::SalvagedResults;
using prism::io::SalvageMode;
using namespace prism::io::test_data;  // NOLINT(google-build-using-namespace): the test data set

class ResultSalvage : public ::testing::Test {
  protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = fs::temp_directory_path() /
               ("prism_result_salvage_" + std::to_string(::getpid()) + "_" + info->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::string path(const std::string& name) const { return (dir_ / name).string(); }
    fs::path dir_;
};

constexpr std::size_t kRows = 2400;

/// The indices below `next_index` that are not rows of the test data set (3 r + 1).
std::uint64_t filtered_below(std::uint64_t next_index) { return next_index - (next_index + 1) / 3; }

/// kRows rows in commits of 400, chunks of 16 rows, filtered counts that go with next_index.
void write_file(const std::string& file, bool close) {
    prism::io::ResultHeader header = test_header();
    header.space_size = 10000;
    ResultWriter w = ResultWriter::create(file, header, test_columns(), test_metrics(), false, 16);
    for (std::size_t r = 0; r < kRows; r += 400) {
        w.append(batch_rows(r, 400));
        const std::uint64_t next = index_of(r + 400 - 1) + 1;
        w.set_filtered({{"filtered", filtered_below(next)}});
        w.flush(next);
    }
    w.set_status("complete");
    if (close) w.close();
}

/// "" when the salvaged rows are exactly rows [0, n) of the test data set.
std::string check_salvaged(const SalvagedResults& s) {
    const std::size_t n = s.rows.size();
    for (std::size_t r = 0; r < n; ++r) {
        const std::uint64_t i = index_of(r);
        const double p95 = s.rows.metrics[0][r];
        const bool same_p95 = std::isnan(p95_of(i)) ? std::isnan(p95) : p95 == p95_of(i);
        if (s.rows.index[r] != i || s.rows.status[r] != status_of(i) ||
            s.rows.reason[r] != reason_of(i) || s.rows.int_columns[0][r] != tp_of(i) ||
            s.rows.int_columns[1][r] != placement_of(i) || s.rows.int_columns[2][r] != zero_of(i) ||
            s.rows.float_columns[0][r] != lr_of(i) || !same_p95 ||
            s.rows.metrics[1][r] != tokens_of(i)) {
            return "row " + std::to_string(r) + " differs";
        }
    }
    return "";
}

TEST_F(ResultSalvage, ASoundFileSavesEveryRowAndItsCounts) {
    const std::string file = path("x.h5");
    write_file(file, true);

    const SalvagedResults s = salvage_result_file(file, SalvageMode::recover, dir_.string());

    EXPECT_EQ(s.problem, "");
    ASSERT_TRUE(s.header_read);
    EXPECT_EQ(s.rows.size(), kRows);
    EXPECT_EQ(check_salvaged(s), "");
    EXPECT_EQ(s.next_index, index_of(kRows - 1) + 1);
    EXPECT_TRUE(s.filtered_exact);
    EXPECT_EQ(s.filtered, (prism::io::FilteredCounts{{"filtered", filtered_below(s.next_index)}}));
    EXPECT_EQ(s.failures.size(),
              static_cast<std::size_t>(
                  std::count(s.rows.status.begin(), s.rows.status.end(), PointStatus::failed)));
}

TEST_F(ResultSalvage, AFileCutAtAnySizeSavesOnlyRowsThatAreExactlyRight) {
    // Copies cut at 60 sizes from 0 bytes to the whole file: the diagnosis names the cut, and
    // whatever is saved is a prefix of the test data set, value for value (never a zero read
    // past the cut), with a next_index that does not claim a lost row.
    const std::string file = path("whole.h5");
    write_file(file, true);
    const std::uint64_t size = fs::file_size(file);
    std::vector<std::uint64_t> sizes = {0, 1, 7, 8, 9, 40, 47, 48, 100, 512, 1024};
    for (int k = 1; k <= 49; ++k) sizes.push_back(size * k / 50);
    std::size_t nothing = 0;
    std::size_t some = 0;
    std::size_t all = 0;
    for (const std::uint64_t cut : sizes) {
        SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(size));
        const std::string copy = path("cut.h5");
        fs::copy_file(file, copy, fs::copy_options::overwrite_existing);
        fs::resize_file(copy, cut);

        const SalvagedResults s = salvage_result_file(copy, SalvageMode::recover, dir_.string());

        EXPECT_FALSE(s.problem.empty());
        for (const char* internal : {"0x", "sblock", "=", "\n", "addr"}) {
            EXPECT_EQ(s.problem.find(internal), std::string::npos) << s.problem;
        }
        if (cut >= 9) {
            EXPECT_NE(s.problem.find("cut short"), std::string::npos) << s.problem;
        }
        EXPECT_EQ(check_salvaged(s), "");
        const std::size_t n = s.rows.size();
        if (n > 0) {
            EXPECT_LE(s.next_index, n < kRows ? index_of(n) : index_of(kRows - 1) + 1);
            EXPECT_GT(s.next_index, index_of(n - 1));
        }
        for (const auto& f : s.failures) EXPECT_LT(f.index, s.next_index);
        if (s.filtered_exact) {
            EXPECT_EQ(s.filtered,
                      (prism::io::FilteredCounts{{"filtered", filtered_below(s.next_index)}}));
        }
        (n == 0 ? nothing : n < kRows ? some : all)++;
        EXPECT_FALSE(fs::exists(path(".prism-salvage-" + std::to_string(::getpid()) + ".h5")));
    }
    std::cout << "cut copies: " << sizes.size() << ", nothing saved " << nothing << ", some rows "
              << some << ", every row " << all << "\n";
    EXPECT_GT(some + all, 0U);
}

TEST_F(ResultSalvage, DiagnosesWithoutACopyWhenAskedTo) {
    const std::string file = path("x.h5");
    write_file(file, true);
    const std::uint64_t size = fs::file_size(file);
    fs::resize_file(file, size - 100);

    const SalvagedResults s = salvage_result_file(file, SalvageMode::diagnose, dir_.string());

    EXPECT_EQ(s.problem, "cut short: " + std::to_string(size - 100) + " of " +
                             std::to_string(size) + " bytes");
    EXPECT_TRUE(s.rows.index.empty());
}

TEST_F(ResultSalvage, NamesFilesThatAreNotResultFilesAtAll) {
    std::ofstream(path("empty.h5")).close();
    std::ofstream(path("text.h5")) << "not an HDF5 file at all, just text\n";

    EXPECT_EQ(salvage_result_file(path("empty.h5"), SalvageMode::recover, dir_.string()).problem,
              "empty (0 bytes)");
    EXPECT_EQ(salvage_result_file(path("text.h5"), SalvageMode::recover, dir_.string()).problem,
              "not an HDF5 file");
    EXPECT_EQ(salvage_result_file(path("none.h5"), SalvageMode::recover, dir_.string()).problem,
              "no such file");
}

}  // namespace
