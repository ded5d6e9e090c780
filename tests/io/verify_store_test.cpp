#include "io/verify_store.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/result_store.hpp"
#include "src/common/error.hpp"

namespace prism::io {
namespace {

namespace fs = std::filesystem;

class VerifyStore : public ::testing::Test {
  protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = fs::temp_directory_path() /
               ("prism_verify_store_" + std::to_string(::getpid()) + "_" + info->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::string path(const std::string& name) const { return (dir_ / name).string(); }

    /// An empty, closed result file.
    std::string result_file() const {
        ResultHeader h;
        h.program_version = "1";
        h.experiment_name = "unit";
        h.experiment_toml = "name = \"unit\"\n";
        h.space_size = 10;
        const std::string file = path("r.h5");
        ResultWriter::create(file, h, {{"tp", ColumnSpec::Type::int64, "1", "tp", {}}},
                             {{"step_time_s", "s", "step"}}, false)
            .close();
        return file;
    }
    fs::path dir_;
};

/// Row k's figures: distinct closed forms, so a swapped column or row shows.
VerifiedPoint point(std::uint64_t index, double k) {
    VerifiedPoint p;
    p.index = index;
    auto& v = p.verification;
    v.ks = 0.01 * k;
    v.analytic_mean_s = 10 + k;
    v.analytic_p50_s = 11 + k;
    v.analytic_p95_s = 12 + k;
    v.analytic_p99_s = 13 + k;
    v.mc_mean_s = 20 + k;
    v.mc_p50_s = 21 + k;
    v.mc_p95_s = 22 + k;
    v.mc_p99_s = 23 + k;
    return p;
}

TEST_F(VerifyStore, RowsComeBackInIndexOrderAndASecondWriteReplacesTheFirst) {
    const std::string file = result_file();
    EXPECT_FALSE(read_verification(file).has_value());

    write_verification(file, 500, {point(7, 2), point(3, 1)});
    write_verification(file, 1000, {point(9, 3), point(4, 1), point(8, 2)});

    const auto rows = read_verification(file);
    ASSERT_TRUE(rows.has_value());
    ASSERT_EQ(rows->size(), 3U);
    const std::uint64_t index[] = {4, 8, 9};
    for (std::size_t r = 0; r < 3; ++r) {
        const double k = static_cast<double>(r + 1);
        const auto& v = (*rows)[r].verification;
        EXPECT_EQ((*rows)[r].index, index[r]);
        EXPECT_EQ(v.samples, 1000);
        EXPECT_EQ(v.ks, 0.01 * k);
        EXPECT_EQ(v.analytic_mean_s, 10 + k);
        EXPECT_EQ(v.analytic_p50_s, 11 + k);
        EXPECT_EQ(v.analytic_p95_s, 12 + k);
        EXPECT_EQ(v.analytic_p99_s, 13 + k);
        EXPECT_EQ(v.mc_mean_s, 20 + k);
        EXPECT_EQ(v.mc_p50_s, 21 + k);
        EXPECT_EQ(v.mc_p95_s, 22 + k);
        EXPECT_EQ(v.mc_p99_s, 23 + k);
    }
    // the result file itself still reads
    EXPECT_EQ(ResultReader(file).header().experiment_name, "unit");
}

TEST_F(VerifyStore, NaNRowsOfPointsThatFailedStayNaN) {
    const std::string file = result_file();
    VerifiedPoint failed;
    failed.index = 5;
    failed.verification.ks = failed.verification.mc_p95_s =
        std::numeric_limits<double>::quiet_NaN();
    write_verification(file, 100, {failed});
    const auto rows = read_verification(file);
    ASSERT_TRUE(rows.has_value());
    EXPECT_TRUE(std::isnan((*rows)[0].verification.ks));
    EXPECT_TRUE(std::isnan((*rows)[0].verification.mc_p95_s));
}

// Issue 33, item 5: a complete file without /verify is an unfinished verification (`prism
// status` exit 3), so an empty front is written as an empty /verify, not left out.
TEST_F(VerifyStore, AnEmptyFrontIsAnEmptyGroupNotAMissingOne) {
    const std::string file = result_file();

    write_verification(file, 100, {});

    const auto rows = read_verification(file);
    ASSERT_TRUE(rows.has_value());
    EXPECT_TRUE(rows->empty());
}

TEST(VerificationRequested, ReadsEvaluationVerifyFromTheStoredExperiment) {
    EXPECT_TRUE(verification_requested("[evaluation]\nverify = \"montecarlo\"\n"));
    EXPECT_FALSE(verification_requested("[evaluation]\nverify = \"none\"\n"));
    EXPECT_FALSE(verification_requested("[evaluation]\nmethod = \"analytic\"\n"));
    EXPECT_FALSE(verification_requested("not = [toml"));
}

TEST_F(VerifyStore, AFileThatIsNotAPrismResultIsAnIoErrorNamingIt) {
    const std::string text = path("not.h5");
    std::ofstream(text) << "plain text\n";
    try {
        write_verification(text, 10, {point(1, 1)});
        ADD_FAILURE() << "expected IoError";
    } catch (const IoError& e) {
        EXPECT_EQ(std::string(e.what()), text + ": cannot open: not an HDF5 file");
    }
    EXPECT_THROW(read_verification(path("missing.h5")), IoError);
}

}  // namespace
}  // namespace prism::io
