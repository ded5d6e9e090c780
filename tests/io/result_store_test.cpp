#include "io/result_store.hpp"

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <hdf5.h>

#include "src/common/error.hpp"
#include "tests/io/result_test_data.hpp"

namespace {

namespace fs = std::filesystem;
using prism::IoError;
using prism::MetricSchema;
using prism::PointStatus;
using prism::io::ColumnSpec;
using prism::io::ParetoSet;
using prism::io::ResultHeader;
using prism::io::ResultReader;
using prism::io::ResultWriter;
using prism::io::RowBatch;
using namespace prism::io::test_data;  // NOLINT(google-build-using-namespace): the test data set

#define EXPECT_THROW_MSG(statement, exception, message)                \
    do {                                                               \
        try {                                                          \
            statement;                                                 \
            ADD_FAILURE() << "expected " #exception ": " << (message); \
        } catch (const exception& e) {                                 \
            EXPECT_EQ(std::string(e.what()), message);                 \
        }                                                              \
    } while (false)

/// A fresh scratch directory per test, removed afterwards.
class ResultStore : public ::testing::Test {
  protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = fs::temp_directory_path() /
               ("prism_result_store_" + std::to_string(::getpid()) + "_" + info->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::string path(const std::string& name) const { return (dir_ / name).string(); }

    fs::path dir_;
};

/// Checks that the reader holds exactly rows [0, n) of the test data set.
void expect_rows(const ResultReader& reader, std::size_t n) {
    EXPECT_EQ(check_rows(reader, n), "");
}

/// Runs a shell command; returns its exit status and its output (stdout + stderr).
std::pair<int, std::string> run(const std::string& command, const fs::path& out_file) {
    const int rc = std::system((command + " > " + out_file.string() + " 2>&1").c_str());
    std::ifstream in(out_file);
    std::stringstream text;
    text << in.rdbuf();
    return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, text.str()};
}

/// What a reader in another process sees of `file` (result_probe.cpp's line, no newline).
std::string run_reader(const std::string& file) {
    const fs::path out = fs::path(file).parent_path() / "probe.txt";
    auto [rc, text] = run(std::string(PRISM_RESULT_PROBE) + " " + file, out);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return rc == 0 ? text : "probe exited " + std::to_string(rc) + ": " + text;
}

/// Why /usr/bin/python3 cannot check files, or "" when it can.
std::string python_missing() {
    if (std::system("/usr/bin/python3 -c 'import h5py, numpy' > /dev/null 2>&1") != 0) {
        return "/usr/bin/python3 with h5py and numpy is not available";
    }
    return "";
}

/// Writes the 17-row test file in three appends and flushes, with a failure, filtered counts
/// and a Pareto front; status "complete".
void write_complete_file(const std::string& file) {
    // chunk_rows = 4 makes appends of 3, 5 and 9 rows write several chunks.
    ResultWriter w =
        ResultWriter::create(file, test_header(), test_columns(), test_metrics(), false, 4);
    w.append(batch_rows(0, 3));
    w.flush(index_of(3));
    w.append(batch_rows(3, 5));
    w.add_failure(index_of(4), "kernel exploded");
    w.flush(index_of(8));
    w.append(batch_rows(8, 9));
    w.set_filtered({{"tp does not divide heads", 12}, {"too many gpus", 3}});
    w.write_pareto("time_vs_tokens", {"step_time_p95_s", "tokens_per_s"}, {"min", "max"},
                   {index_of(5), index_of(1), index_of(2)});
    w.flush(60);
    w.set_status("complete");
    w.close();
}

// ---------------------------------------------------------------------------------------------

TEST_F(ResultStore, WritesInSeveralAppendsAndReadsBackEveryValue) {
    const std::string file = path("results.h5");
    write_complete_file(file);

    const ResultReader reader(file);

    const ResultHeader& h = reader.header();
    EXPECT_EQ(h.format_version, 2);
    EXPECT_EQ(h.program_version, "9.8.7");
    EXPECT_EQ(h.experiment_name, "unit");
    EXPECT_EQ(h.experiment_toml, kToml);
    // sha256 of kToml, from coreutils sha256sum.
    EXPECT_EQ(h.experiment_sha256,
              "b72c329743d8931c55b9093e875672a5971cfd1f90e8f616d16d811a20a8c425");
    EXPECT_EQ(h.seed, 18446744073709551557ULL);
    EXPECT_EQ(h.space_size, 100U);
    EXPECT_EQ(h.status, "complete");
    EXPECT_EQ(h.next_index, 60U);
    EXPECT_EQ(h.rows_committed, 17U);
    EXPECT_EQ(h.created.size(), 20U);
    EXPECT_EQ(h.created[10], 'T');
    EXPECT_EQ(h.updated.back(), 'Z');
    expect_rows(reader, 17);
    const auto& columns = reader.point_columns();
    ASSERT_EQ(columns.size(), 4U);
    EXPECT_EQ(columns[1].name, "placement");
    EXPECT_EQ(columns[1].type, ColumnSpec::Type::enumeration);
    EXPECT_EQ(columns[1].labels, (std::vector<std::string>{"tp_inner", "dp_inner", "spread"}));
    EXPECT_EQ(columns[1].description, "rank placement");
    EXPECT_EQ(columns[2].type, ColumnSpec::Type::float64);
    EXPECT_EQ(columns[3].type, ColumnSpec::Type::int64);
    ASSERT_EQ(reader.metric_schema().size(), 2U);
    EXPECT_EQ(reader.metric_schema()[1].unit, "tokens/s");
    EXPECT_EQ(reader.metric_schema()[0].description, "95th percentile of step time");
    ASSERT_EQ(reader.failures().size(), 1U);
    EXPECT_EQ(reader.failures()[0].index, index_of(4));
    EXPECT_EQ(reader.failures()[0].message, "kernel exploded");
    EXPECT_EQ(reader.filtered(), (std::map<std::string, std::uint64_t>{
                                     {"too many gpus", 3}, {"tp does not divide heads", 12}}));
    EXPECT_EQ(reader.pareto_names(), std::vector<std::string>{"time_vs_tokens"});
    const ParetoSet front = reader.pareto("time_vs_tokens");
    EXPECT_EQ(front.objectives, (std::vector<std::string>{"step_time_p95_s", "tokens_per_s"}));
    EXPECT_EQ(front.senses, (std::vector<std::string>{"min", "max"}));
    EXPECT_EQ(front.indices, (std::vector<std::uint64_t>{4, 7, 16}));
    EXPECT_TRUE(reader.histograms().empty());
}

TEST_F(ResultStore, RefusesToOverwriteAnExistingFileUnlessAsked) {
    const std::string file = path("x.h5");
    write_complete_file(file);

    EXPECT_THROW_MSG(
        ResultWriter::create(file, test_header(), test_columns(), test_metrics(), false), IoError,
        file + ": file exists (use --overwrite to replace it)");
    ResultWriter::create(file, test_header(), test_columns(), test_metrics(), true).close();
    EXPECT_EQ(ResultReader(file).rows(), 0U);
    EXPECT_EQ(ResultReader(file).header().status, "running");
}

TEST_F(ResultStore, ResumeDropsRowsPastNextIndexAndContinues) {
    const std::string file = path("resume.h5");
    {
        ResultWriter w =
            ResultWriter::create(file, test_header(), test_columns(), test_metrics(), false, 4);
        w.append(batch_rows(0, 6));
        w.add_failure(40, "ahead of next_index");
        w.add_failure(index_of(4), "kernel exploded");
        w.flush(index_of(6));
        w.set_status("interrupted");
    }  // the destructor commits rows 6..9 too, as close() does
    ResultHeader expected = test_header();

    ResultWriter w = ResultWriter::open_resume(file, expected);

    EXPECT_EQ(w.next_index(), index_of(6));
    EXPECT_EQ(w.rows(), 6U);
    EXPECT_EQ(w.header().status, "running");
    EXPECT_EQ(w.committed().rows(), 6U);
    w.append(batch_rows(6, 11));
    w.flush(index_of(17));
    w.close();
    expect_rows(ResultReader(file), 17);
    const auto failures = ResultReader(file).failures();
    ASSERT_EQ(failures.size(), 1U);
    EXPECT_EQ(failures[0].index, index_of(4));
    EXPECT_EQ(failures[0].message, "kernel exploded");
    // Reasons stay interned once: "memory: 0 GiB" appears before and after the resume.
    const auto reasons = ResultReader(file).reasons();
    EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "memory: 0 GiB"), 1);
}

TEST_F(ResultStore, ResumeDropsRowsWrittenButNotCommittedByAKilledWriter) {
    const std::string file = path("killed.h5");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // Rows 0..4 committed; rows 5..13 appended (two chunks of 4 reach the file) and a
        // failure recorded, then the process dies without closing anything.
        ResultWriter w =
            ResultWriter::create(file, test_header(), test_columns(), test_metrics(), false, 4);
        w.append(batch_rows(0, 5));
        w.flush(index_of(5));
        w.append(batch_rows(5, 9));
        w.add_failure(index_of(7), "lost");
        std::raise(SIGKILL);
    }
    int wait_status = 0;
    ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(wait_status));

    {
        // HDF5 refuses to open a file for writing that this process has open read-only.
        const ResultReader killed(file);
        EXPECT_EQ(killed.header().status, "running");
        EXPECT_EQ(killed.header().rows_committed, 5U);
        expect_rows(killed, 5);
    }
    ResultWriter w = ResultWriter::open_resume(file, test_header());
    EXPECT_EQ(w.rows(), 5U);
    w.append(batch_rows(5, 12));
    w.flush(index_of(17));
    w.set_status("complete");
    w.close();

    expect_rows(ResultReader(file), 17);
    EXPECT_TRUE(ResultReader(file).failures().empty());
}

TEST_F(ResultStore, RefusesToResumeAFileOfAnotherExperiment) {
    const std::string file = path("x.h5");
    ResultHeader a = test_header();
    a.experiment_toml = "a";
    ResultWriter::create(file, a, test_columns(), test_metrics(), false).close();
    ResultHeader b = test_header();
    b.experiment_toml = "b";

    // sha256("a") and sha256("b"), from coreutils sha256sum.
    EXPECT_THROW_MSG(ResultWriter::open_resume(file, b), IoError,
                     file +
                         ": made from a different experiment (sha256 ca978112ca1b... != "
                         "3e23e8160039...)");
    EXPECT_EQ(ResultReader(file).header().experiment_sha256,
              "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb");
}

TEST_F(ResultStore, StoresTheFilesTheExperimentReadsAndReadsThemBack) {
    const std::string file = path("x.h5");
    ResultHeader h = test_header();
    const std::string profile = "name = \"fitted\"\n# a comment\ngemm = {cv = 0.03}\n";
    h.included_files = {{"fitted.variability.toml", profile}, {"b.toml", ""}};
    ResultWriter::create(file, h, test_columns(), test_metrics(), false).close();
    {
        ResultWriter plain = ResultWriter::create(path("plain.h5"), test_header(), test_columns(),
                                                  test_metrics(), false);
        plain.close();
    }

    const ResultHeader back = ResultReader(file).header();
    ASSERT_EQ(back.included_files.size(), 2U);
    EXPECT_EQ(back.included_files[0].first, "fitted.variability.toml");
    EXPECT_EQ(back.included_files[0].second, profile);
    EXPECT_EQ(back.included_files[1].first, "b.toml");
    EXPECT_EQ(back.included_files[1].second, "");
    EXPECT_TRUE(ResultReader(path("plain.h5")).header().included_files.empty());
}

TEST_F(ResultStore, RefusesToResumeAFileOfAnotherModelVersionAndLeavesItAlone) {
    const std::string file = path("x.h5");
    ResultHeader a = test_header();
    a.model_version = "m1";
    ResultWriter::create(file, a, test_columns(), test_metrics(), false).close();
    const ResultHeader before = ResultReader(file).header();
    ResultHeader b = test_header();
    b.model_version = "m2";

    EXPECT_THROW_MSG(ResultWriter::open_resume(file, b), IoError,
                     file +
                         ": made under model version 'm1', this program is 'm2': resuming would "
                         "mix results of different numerics (start a new file, or resume with "
                         "the build that made it)");
    EXPECT_EQ(ResultReader(file).header().model_version, "m1");
    EXPECT_EQ(ResultReader(file).header().status, before.status);
    EXPECT_EQ(ResultReader(file).header().updated, before.updated);
    // the same version resumes
    b.model_version = "m1";
    ResultWriter::open_resume(file, b).close();
}

TEST_F(ResultStore, RefusesToResumeWithOtherColumnsOrMetricsAndLeavesTheFileAlone) {
    const std::string file = path("x.h5");
    write_complete_file(file);
    auto columns = test_columns();
    columns[1].labels.push_back("ring");
    MetricSchema metrics = test_metrics();
    metrics.push_back({"mfu", "1", "model FLOPs utilization"});

    EXPECT_THROW_MSG(
        ResultWriter::open_resume(file, test_header(), columns, test_metrics()), IoError,
        file +
            ": /points: columns differ from this program's (file: tp (int64), placement (enum "
            "tp_inner, dp_inner, spread), lr (float64), zero_stage (int64); expected: tp "
            "(int64), placement (enum tp_inner, dp_inner, spread, ring), lr (float64), "
            "zero_stage (int64))");
    EXPECT_THROW_MSG(ResultWriter::open_resume(file, test_header(), test_columns(), metrics),
                     IoError,
                     file +
                         ": /metrics: columns differ from this program's (file: "
                         "step_time_p95_s, tokens_per_s; expected: step_time_p95_s, "
                         "tokens_per_s, mfu)");
    EXPECT_EQ(ResultReader(file).header().status, "complete");
    ResultWriter::open_resume(file, test_header(), test_columns(), test_metrics()).close();
    expect_rows(ResultReader(file), 17);
}

TEST_F(ResultStore, RefusesAnotherFormatOrFormatVersion) {
    const std::string file = path("x.h5");
    write_complete_file(file);
    const std::string other = path("other.h5");
    write_complete_file(other);
    const std::string old = path("old.h5");
    write_complete_file(old);
    // Rewrite the attributes with the raw C API, as another program would have written them.
    auto set_attribute = [](const std::string& f, const char* name, hid_t type, const void* v) {
        const hid_t id = H5Fopen(f.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        H5Adelete(id, name);
        const hid_t space = H5Screate(H5S_SCALAR);
        const hid_t attr = H5Acreate2(id, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(attr, type, v);
        H5Aclose(attr);
        H5Sclose(space);
        H5Fclose(id);
    };
    const std::int64_t version = 3;
    set_attribute(file, "format_version", H5T_NATIVE_INT64, &version);
    const std::int64_t old_version = 1;
    set_attribute(old, "format_version", H5T_NATIVE_INT64, &old_version);
    const hid_t fixed = H5Tcopy(H5T_C_S1);
    H5Tset_size(fixed, 8);
    set_attribute(other, "format", fixed, "netcdf4\0");
    H5Tclose(fixed);

    EXPECT_THROW_MSG(ResultReader{file}, IoError,
                     file + ": unsupported format_version 3 (this program reads 1 to 2)");
    EXPECT_THROW_MSG(ResultWriter::open_resume(file, test_header()), IoError,
                     file + ": unsupported format_version 3 (this program reads 1 to 2)");
    EXPECT_THROW_MSG(ResultWriter::open_resume(old, test_header()), IoError,
                     old +
                         ": made in result format 1 by an older prism, which cannot be "
                         "continued; convert it with `prism recover " +
                         old + " -o NEW.h5` and resume NEW.h5");
    EXPECT_THROW_MSG(ResultReader{other}, IoError,
                     other + ": not a prism result file (format 'netcdf4')");
}

TEST_F(ResultStore, RefusesAForeignHdf5File) {
    const std::string file = path("foreign.h5");
    const hid_t f = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t g = H5Gcreate2(f, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(g);
    H5Fclose(f);

    EXPECT_THROW_MSG(ResultReader{file}, IoError,
                     file + ": not a prism result file (no 'format' attribute)");
    EXPECT_THROW_MSG(ResultWriter::open_resume(file, test_header()), IoError,
                     file + ": not a prism result file (no 'format' attribute)");
}

TEST_F(ResultStore, RefusesAGarbageFileAndAMissingFile) {
    const std::string file = path("garbage.h5");
    std::ofstream(file) << "this is not HDF5\n" << std::string(4096, 'x');

    EXPECT_THROW_MSG(ResultReader{file}, IoError, file + ": cannot open: not an HDF5 file");
    EXPECT_THROW_MSG(ResultWriter::open_resume(file, test_header()), IoError,
                     file + ": cannot open: not an HDF5 file");
    EXPECT_THROW_MSG(ResultReader{path("missing.h5")}, IoError,
                     path("missing.h5") + ": cannot open: no such file");
}

TEST_F(ResultStore, KeepsHdf5DiagnosticsOffStderr) {
    const std::string file = path("garbage.h5");
    std::ofstream(file) << std::string(4096, '\0');
    write_complete_file(path("ok.h5"));

    ::testing::internal::CaptureStderr();
    EXPECT_THROW(ResultReader{file}, IoError);
    EXPECT_THROW((void)ResultReader(path("ok.h5")).int_column("lr"), IoError);
    EXPECT_THROW((void)ResultReader(path("ok.h5")).pareto("nope"), IoError);
    const std::string printed = ::testing::internal::GetCapturedStderr();

    EXPECT_EQ(printed, "");
}

TEST_F(ResultStore, NamesTheFileAndDatasetInErrors) {
    const std::string file = path("x.h5");
    write_complete_file(file);
    const ResultReader reader(file);

    EXPECT_THROW_MSG((void)reader.int_column("lr"), IoError,
                     file + ": /points/lr: a float64 column, not int64");
    EXPECT_THROW_MSG((void)reader.metric("mfu"), IoError, file + ": /metrics: no metric 'mfu'");
    EXPECT_THROW_MSG((void)reader.pareto("nope"), IoError,
                     file + ": /pareto: no pareto set 'nope'");
}

TEST_F(ResultStore, RejectsInconsistentBatches) {
    const std::string file = path("x.h5");
    ResultWriter w =
        ResultWriter::create(file, test_header(), test_columns(), test_metrics(), false);
    RowBatch bad_enum = batch_rows(0, 2);
    bad_enum.int_columns[1][1] = 3;
    RowBatch short_metric = batch_rows(0, 2);
    short_metric.metrics[1].pop_back();

    EXPECT_THROW_MSG(w.append(bad_enum), IoError,
                     file + ": append: column 'placement': value 3 is not a label index (0..2)");
    EXPECT_THROW_MSG(w.append(short_metric), IoError,
                     file + ": append: metric 'tokens_per_s' has 1 entries, expected 2");
    w.append(batch_rows(0, 2));
    EXPECT_THROW_MSG(w.append(batch_rows(1, 1)), IoError,
                     file + ": append: index 4 does not follow 4");
    EXPECT_THROW_MSG(w.flush(3), IoError,
                     file + ": flush: next_index 3 does not pass the last appended index 4");
    EXPECT_THROW_MSG(w.set_status("done"), IoError,
                     file +
                         ": invalid status 'done' (expected running, interrupted, complete or "
                         "failed)");
    EXPECT_THROW_MSG(ResultWriter::create(path("y.h5"), test_header(),
                                          {{"status", ColumnSpec::Type::int64, "1", "", {}}},
                                          test_metrics(), false),
                     IoError, path("y.h5") + ": duplicate or reserved point column name 'status'");
}

TEST_F(ResultStore, StoresHistogramsAlignedWithRows) {
    const std::string file = path("hist.h5");
    ResultHeader h = test_header();
    h.histogram_bins = 5;
    {
        ResultWriter w = ResultWriter::create(file, h, test_columns(), test_metrics(), false, 4);
        w.append(batch_rows(0, 3, 5));
        w.flush(index_of(3));
        w.append(batch_rows(3, 4, 5));
        w.close();
    }

    auto reader = std::make_unique<ResultReader>(file);

    EXPECT_EQ(reader->header().histogram_bins, 5U);
    const auto counts = reader->histograms();
    const auto lo = reader->histogram_lo_s();
    const auto hi = reader->histogram_hi_s();
    ASSERT_EQ(counts.size(), 7U * 5U);
    ASSERT_EQ(lo.size(), 7U);
    for (std::size_t r = 0; r < 7; ++r) {
        const std::uint64_t i = index_of(r);
        for (std::size_t b = 0; b < 5; ++b) EXPECT_EQ(counts[r * 5 + b], bin_of(i, b));
        EXPECT_EQ(lo[r], 0.25 * static_cast<double>(i));
        EXPECT_EQ(hi[r], 0.25 * static_cast<double>(i) + 1.0);
    }
    reader.reset();
    EXPECT_THROW_MSG(ResultWriter::open_resume(file, h).append(batch_rows(7, 1)), IoError,
                     file + ": append: histogram has 0 entries, expected 5");
}

TEST_F(ResultStore, WritesOnlyParetoSetsDeclaredAtCreationAndReplacesTheirIndices) {
    const std::string file = path("x.h5");
    ResultHeader header = test_header();
    header.pareto_sets.push_back({"front", {"tokens_per_s"}, {"max"}, {}});
    {
        ResultWriter w = ResultWriter::create(file, header, test_columns(), test_metrics(), false);
        w.write_pareto("front", {"tokens_per_s"}, {"max"}, {9, 3, 12});
        w.write_pareto("front", {"tokens_per_s"}, {"max"}, {5});
        EXPECT_THROW_MSG(w.write_pareto("other", {"tokens_per_s"}, {"max"}, {}), IoError,
                         file + ": /pareto/other: not declared when the file was created");
        EXPECT_THROW_MSG(w.write_pareto("front", {"tokens_per_s"}, {"min"}, {}), IoError,
                         file +
                             ": /pareto/front: objectives or senses differ from the declared "
                             "ones");
    }
    ResultHeader bad = test_header();
    bad.pareto_sets.push_back({"bad", {"tokens_per_s"}, {"up"}, {}});

    const ResultReader reader(file);

    EXPECT_EQ(reader.pareto_names(), (std::vector<std::string>{"front", "time_vs_tokens"}));
    EXPECT_EQ(reader.pareto("front").indices, std::vector<std::uint64_t>{5});
    EXPECT_EQ(reader.pareto("front").senses, std::vector<std::string>{"max"});
    EXPECT_TRUE(reader.pareto("time_vs_tokens").indices.empty());
    EXPECT_THROW_MSG(ResultWriter::create(path("y.h5"), bad, test_columns(), test_metrics(), false),
                     IoError,
                     path("y.h5") + ": /pareto/bad: sense 'up' is neither 'min' nor 'max'");
}

TEST_F(ResultStore, EveryFlushCommitsItsRowsFailuresAndFilteredCounts) {
    // chunk_rows = 4: a flush after 3 rows commits a partly filled chunk.
    const std::string file = path("x.h5");
    ResultWriter w =
        ResultWriter::create(file, test_header(), test_columns(), test_metrics(), false, 4);
    w.append(batch_rows(0, 3));
    w.set_filtered({{"too many gpus", 2}});
    w.add_failure(index_of(1), "boom");
    w.flush(index_of(3));

    const auto after_first = run_reader(file);
    if (python_missing().empty()) {
        const std::string script =
            std::string(PRISM_SOURCE_DIR) + "/tests/python/check_result_file.py";
        const auto [rc, out] =
            run("/usr/bin/python3 " + script + " " + file + " --rows 3 --status running",
                dir_ / "h5py.txt");
        EXPECT_EQ(rc, 0) << out;  // h5py reads it while the writer holds it
    }
    w.append(batch_rows(3, 6));
    w.set_filtered({{"too many gpus", 5}, {"a tp that does not divide", 1}});
    w.flush(index_of(9));
    const auto after_second = run_reader(file);
    w.close();

    EXPECT_EQ(after_first, "rows 3 next_index 10 filtered too many gpus=2 failures 1 ok");
    EXPECT_EQ(after_second,
              "rows 9 next_index 28 filtered a tp that does not divide=1,too many gpus=5 "
              "failures 1 ok");
    expect_rows(ResultReader(file), 9);
}

TEST_F(ResultStore, RewritesAPartlyFilledChunkInPlaceAsItFills) {
    // A commit stores the last partly filled chunk raw (filters skipped) at its full size and
    // rewrites it in place as rows arrive: 63 commits of one row each leave a file no larger
    // than one commit of the 63 rows, give or take a little metadata (rewritten chunks that
    // moved would leave ~63 dead chunks of 9 datasets: 150 KiB here).
    ResultHeader header = test_header();
    header.space_size = 1000;
    const std::string many = path("many.h5");
    const std::string one = path("one.h5");
    ResultWriter w = ResultWriter::create(many, header, test_columns(), test_metrics(), false, 64);
    for (std::size_t r = 0; r < 63; ++r) {
        w.append(batch_rows(r, 1));
        w.flush(index_of(r) + 1);
    }
    const std::string seen_by_reader = run_reader(many);
    w.close();
    ResultWriter single =
        ResultWriter::create(one, header, test_columns(), test_metrics(), false, 64);
    single.append(batch_rows(0, 63));
    single.flush(index_of(62) + 1);
    single.close();

    EXPECT_EQ(seen_by_reader, "rows 63 next_index 188 filtered  failures 0 ok");
    EXPECT_LT(fs::file_size(many), fs::file_size(one) + 8192)
        << "one commit: " << fs::file_size(one);
    expect_rows(ResultReader(many), 63);
}

TEST_F(ResultStore, RefusesASecondWriterBeforeTouchingTheFile) {
    const std::string file = path("x.h5");
    ResultWriter first =
        ResultWriter::create(file, test_header(), test_columns(), test_metrics(), false, 4);
    first.append(batch_rows(0, 5));
    first.flush(index_of(5));
    const std::string holder = "pid " + std::to_string(::getpid()) + " on host ";

    for (const bool overwrite : {false, true}) {
        try {
            ResultWriter::create(file, test_header(), test_columns(), test_metrics(), overwrite);
            ADD_FAILURE() << "a second writer was let in";
        } catch (const prism::io::FileInUseError& e) {
            EXPECT_EQ(
                std::string(e.what()).rfind(file + ": in use by another prism sweep (" + holder, 0),
                0U)
                << e.what();
        } catch (const IoError& e) {
            // without --overwrite the existing file is named first; both leave it alone
            EXPECT_FALSE(overwrite) << e.what();
            EXPECT_EQ(std::string(e.what()),
                      file + ": file exists (use --overwrite to replace it)");
        }
    }
    EXPECT_THROW((void)ResultWriter::open_resume(file, test_header()), prism::io::FileInUseError);

    EXPECT_EQ(run_reader(file), "rows 5 next_index 16 filtered  failures 0 ok");
    first.append(batch_rows(5, 4));
    first.flush(index_of(9));
    first.close();
    EXPECT_FALSE(fs::exists(file + ".lock"));
    expect_rows(ResultReader(file), 9);
}

TEST_F(ResultStore, TakesOverTheLockOfAKilledWriterAndItsTemporaryFile) {
    const std::string file = path("killed.h5");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ResultWriter w =
            ResultWriter::create(file, test_header(), test_columns(), test_metrics(), false, 4);
        w.append(batch_rows(0, 6));
        w.flush(index_of(6));
        std::ofstream(path(".killed.h5.99999.tmp")) << "a half-built file of a killed writer";
        std::raise(SIGKILL);
    }
    int wait_status = 0;
    ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
    ASSERT_TRUE(fs::exists(file + ".lock"));  // stale: its holder is gone

    ResultWriter w = ResultWriter::open_resume(file, test_header());
    w.append(batch_rows(6, 3));
    w.flush(index_of(9));
    w.close();
    ResultWriter::create(file, test_header(), test_columns(), test_metrics(), true).close();

    EXPECT_FALSE(fs::exists(file + ".lock"));
    EXPECT_FALSE(fs::exists(path(".killed.h5.99999.tmp")));
    EXPECT_EQ(run_reader(file), "rows 0 next_index 0 filtered  failures 0 ok");
}

TEST_F(ResultStore, RefusesToReplaceSomethingThatIsNotARegularFile) {
    fs::create_directories(path("dir.h5"));

    EXPECT_THROW_MSG(
        ResultWriter::create(path("dir.h5"), test_header(), test_columns(), test_metrics(), true),
        IoError, path("dir.h5") + ": not a regular file (a result file must be one)");
    EXPECT_THROW_MSG(
        ResultWriter::create("/dev/null", test_header(), test_columns(), test_metrics(), true),
        IoError, "/dev/null: not a regular file (a result file must be one)");
    EXPECT_TRUE(fs::is_directory(path("dir.h5")));
}

TEST_F(ResultStore, ReportsATruncatedFileWithoutLibraryInternals) {
    const std::string file = path("x.h5");
    write_complete_file(file);
    const auto size = fs::file_size(file);
    fs::resize_file(file, size / 2);

    try {
        ResultReader reader(file);
        ADD_FAILURE() << "a truncated file opened";
    } catch (const IoError& e) {
        const std::string message = e.what();
        EXPECT_EQ(message, file + ": cannot open: the file is truncated (" +
                               std::to_string(size / 2) + " bytes; its superblock says " +
                               std::to_string(size) + ")");
        for (const char* internal : {"0x", "sblock", "=", "\n", "addr"}) {
            EXPECT_EQ(message.find(internal), std::string::npos) << message;
        }
    }
}

TEST_F(ResultStore, ResumeRecountsFilteredCountsThatDoNotGoWithNextIndex) {
    // A writer killed between writing the filtered counts and the commit record leaves counts
    // one commit ahead: resume recounts them (here: a recount that knows the truth).
    const std::string file = path("x.h5");
    {
        ResultWriter w =
            ResultWriter::create(file, test_header(), test_columns(), test_metrics(), false, 4);
        w.append(batch_rows(0, 4));
        // rows 0..3 have indices 1, 4, 7, 10: indices 0, 2, 3, 5, 6, 8, 9 were filtered
        w.set_filtered({{"filtered", 7}});
        w.flush(index_of(3) + 1);
        w.set_status("interrupted");
    }
    {
        const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        const hid_t ds = H5Dopen2(f, "filtered/count", H5P_DEFAULT);
        const std::uint64_t ahead = 9;
        H5Dwrite(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &ahead);
        H5Dclose(ds);
        H5Fclose(f);
    }
    EXPECT_FALSE(ResultReader(file).filtered_consistent());
    std::vector<std::uint64_t> asked;
    const prism::io::FilteredRecount recount = [&](std::uint64_t next_index) {
        asked.push_back(next_index);
        prism::io::FilteredCounts counts;
        for (std::uint64_t i = 0; i < next_index; ++i) {
            if (i % 3 != 1) prism::io::add_filtered(counts, "filtered", 1);
        }
        return counts;
    };

    ResultWriter w = ResultWriter::open_resume(file, test_header(), recount);
    w.close();

    EXPECT_EQ(asked, std::vector<std::uint64_t>{11});
    const ResultReader reader(file);
    EXPECT_EQ(reader.filtered(), (std::map<std::string, std::uint64_t>{{"filtered", 7}}));
    EXPECT_TRUE(reader.filtered_consistent());
    expect_rows(reader, 4);
}

TEST_F(ResultStore, RefusesCountsThatDoNotAddUpBeforeSizingAnythingByThem) {
    // A damaged (or hand-edited) commit record: rows past next_index, next_index past the
    // space. Nothing is read or allocated by those counts.
    const std::string file = path("x.h5");
    write_complete_file(file);
    {
        const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        const hid_t attr = H5Aopen(f, "commit", H5P_DEFAULT);
        const std::uint64_t record[5] = {60, std::uint64_t{1} << 62, 0, 0, 0};
        H5Awrite(attr, H5T_NATIVE_UINT64, record);
        H5Aclose(attr);
        H5Fclose(f);
    }
    const std::string message =
        file +
        ": damaged: its counts do not add up (rows_committed 4611686018427387904, "
        "next_index 60, filtered 0, space_size 100)";

    EXPECT_THROW_MSG(ResultReader{file}, IoError, message);
    EXPECT_EQ(run_reader(file), "error: " + message);
}

TEST_F(ResultStore, IsReadableByH5pyWithNoKnowledgeOfTheFormat) {
    if (const std::string why = python_missing(); !why.empty()) GTEST_SKIP() << why;
    const std::string file = path("x.h5");
    write_complete_file(file);
    const std::string script = std::string(PRISM_SOURCE_DIR) + "/tests/python/check_result_file.py";

    const auto [rc, out] =
        run("/usr/bin/python3 " + script + " " + file + " --rows 17 --status complete",
            dir_ / "out.txt");

    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(out, "ok: 17 rows\n");
    // The checker itself fails on a file that breaks its rules: a foreign file.
    const std::string foreign = path("foreign.h5");
    H5Fclose(H5Fcreate(foreign.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    EXPECT_EQ(run("/usr/bin/python3 " + script + " " + foreign, dir_ / "out2.txt").first, 1);
}

TEST_F(ResultStore, FileOfAKilledWriterOpensWithH5py) {
    if (const std::string why = python_missing(); !why.empty()) GTEST_SKIP() << why;
    const std::string file = path("killed.h5");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ResultWriter w =
            ResultWriter::create(file, test_header(), test_columns(), test_metrics(), false, 4);
        w.append(batch_rows(0, 5));
        w.flush(index_of(5));
        w.append(batch_rows(5, 8));
        std::raise(SIGKILL);
    }
    int wait_status = 0;
    ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
    const std::string script = std::string(PRISM_SOURCE_DIR) + "/tests/python/check_result_file.py";

    const auto [rc, out] = run(
        "/usr/bin/python3 " + script + " " + file + " --rows 5 --status running", dir_ / "out.txt");

    EXPECT_EQ(rc, 0) << out;
}

TEST_F(ResultStore, H5dumpShowsEnumsUnitsAndRootAttributes) {
    if (std::system("command -v h5dump > /dev/null 2>&1") != 0) {
        GTEST_SKIP() << "h5dump is not installed (Debian package hdf5-tools)";
    }
    const std::string file = path("x.h5");
    write_complete_file(file);

    const auto [rc, out] = run("h5dump -H " + file, dir_ / "dump.txt");

    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("ATTRIBUTE \"format\""), std::string::npos) << out;
    EXPECT_NE(out.find("DATASET \"placement\""), std::string::npos) << out;
    EXPECT_NE(out.find("H5T_ENUM"), std::string::npos) << out;
    EXPECT_NE(out.find("\"dp_inner\""), std::string::npos) << out;
    EXPECT_NE(out.find("ATTRIBUTE \"unit\""), std::string::npos) << out;
    EXPECT_NE(out.find("DATASET \"tokens_per_s\""), std::string::npos) << out;
    EXPECT_EQ(out.find("HDF5-DIAG"), std::string::npos) << out;
}

TEST_F(ResultStore, PythonModuleLoadsSummarizesAndPlots) {
    if (const std::string why = python_missing(); !why.empty()) GTEST_SKIP() << why;
    if (std::system("/usr/bin/python3 -c 'import matplotlib' > /dev/null 2>&1") != 0) {
        GTEST_SKIP() << "/usr/bin/python3 lacks matplotlib";
    }
    const std::string file = path("x.h5");
    write_complete_file(file);
    const std::string script =
        std::string(PRISM_SOURCE_DIR) + "/tests/python/test_prism_results.py";

    const auto [rc, out] =
        run("MPLBACKEND=Agg /usr/bin/python3 " + script + " " + file + " " + dir_.string(),
            dir_ / "out.txt");

    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(out, "ok\n");
}

}  // namespace
