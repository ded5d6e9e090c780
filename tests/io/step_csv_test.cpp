#include "io/step_csv.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <regex>
#include <sstream>
#include <string>

#include "io/work_limits.hpp"
#include "src/common/error.hpp"

namespace prism::io {
namespace {

namespace fs = std::filesystem;

std::string scratch(const std::string& name, const std::string& text) {
    const fs::path dir = fs::temp_directory_path() / "prism_step_csv_test";
    fs::create_directories(dir);
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::trunc) << text;
    return path;
}

std::string message_of(const std::string& path) {
    try {
        read_step_csv(path);
    } catch (const ConfigError& e) {  // bad input: exit 2
        return e.what();
    }
    return "no error";
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Every MLPerf run's selection against the summary its .md file states (written when the data
// were extracted from the MLPerf logs): "after dropping first 5 and first-step-after-eval:
// n=271 mean=18.3728 p50=18.3722 ..." (4 decimals).
TEST(StepCsv, SelectsTheStepsEachRunsSummaryStates) {
    const fs::path dir = fs::path(PRISM_TEST_DATA_DIR) / "steps";
    int files = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() != ".csv") continue;
        fs::path md = entry.path();
        md.replace_extension(".md");
        std::ifstream in(md);
        std::stringstream text;
        text << in.rdbuf();
        std::smatch m;
        const std::string s = text.str();
        ASSERT_TRUE(std::regex_search(
            s, m,
            std::regex("after dropping first 5 and first-step-after-eval: n=(\\d+) "
                       "mean=([0-9.]+) p50=([0-9.]+)")))
            << md;

        const StepRun run = read_step_csv(entry.path());

        EXPECT_EQ(run.step_time_s.size(), std::stoul(m[1].str())) << entry.path();
        const double mean = std::accumulate(run.step_time_s.begin(), run.step_time_s.end(), 0.0) /
                            static_cast<double>(run.step_time_s.size());
        EXPECT_NEAR(mean, std::stod(m[2].str()), 5e-5) << entry.path();
        EXPECT_NEAR(median(run.step_time_s), std::stod(m[3].str()), 5e-5) << entry.path();
        EXPECT_EQ(run.dropped_warmup, 5);
        EXPECT_EQ(run.rows, run.dropped_warmup + run.dropped_after_eval +
                                static_cast<int>(run.step_time_s.size()));
        ++files;
    }
    // GPT-3 on Eos (6), Nyx (3) and Oracle (3); Llama 3.1 405B on Eos-dfw (6), Nebius (3),
    // UF B200 (3) and Carina GB200 (3); Llama 3.1 8B on UF B200 (10)
    EXPECT_EQ(files, 37);
}

TEST(StepCsv, SelectionIsOptional) {
    const std::string path = scratch("run.csv",
                                     "step,step_time_s,first_step_after_eval\n1,2.5,0\n2,2.0,0\n"
                                     "3,2.1,1\n4,2.2,0\n");
    StepSelection keep_all;
    keep_all.warmup_steps = 0;
    keep_all.drop_first_after_eval = false;
    StepSelection one;
    one.warmup_steps = 1;

    EXPECT_EQ(read_step_csv(path, keep_all).step_time_s, (std::vector<double>{2.5, 2.0, 2.1, 2.2}));
    EXPECT_EQ(read_step_csv(path, one).step_time_s, (std::vector<double>{2.0, 2.2}));
}

TEST(StepCsv, BadFilesNameTheFileLineAndColumn) {
    const std::string no_column = scratch("no_column.csv", "step,time\n1,2.0\n");
    const std::string not_number =
        scratch("not_number.csv", "step,step_time_s,first_step_after_eval\n1,2.0,0\n2,fast,0\n");
    const std::string negative =
        scratch("negative.csv", "step,step_time_s,first_step_after_eval\n1,-2.0,0\n");
    const std::string short_row =
        scratch("short_row.csv", "step,step_time_s,first_step_after_eval\n1,2.0\n");
    const std::string all_warmup =
        scratch("all_warmup.csv", "step,step_time_s,first_step_after_eval\n1,2.0,0\n2,2.0,0\n");
    const std::string empty = scratch("empty.csv", "");

    EXPECT_EQ(message_of(no_column),
              no_column +
                  ":1: no column 'step_time_s' in the header (need step, step_time_s, "
                  "first_step_after_eval)");
    EXPECT_EQ(message_of(not_number),
              not_number + ":3: column 'step_time_s': 'fast' is not a number");
    EXPECT_EQ(message_of(negative),
              negative + ":2: column 'step_time_s': -2.0 is not a finite positive time");
    EXPECT_EQ(message_of(short_row), short_row + ":2: 2 columns, the header has 3");
    EXPECT_EQ(message_of(all_warmup),
              all_warmup +
                  ": no step left after dropping 2 warm-up and 0 first steps after "
                  "evaluation (of 2)");
    EXPECT_EQ(message_of(empty), empty + ": empty file (no header)");
    EXPECT_EQ(message_of(scratch("x", "") + ".missing"),
              scratch("x", "") + ".missing: no such step file");
}

// Issue 33, items 1 and 11: an infinite step time gave an infinite median and a segfault in
// `steps compare` (the parser rejected only NaN, 0 and negatives).
TEST(StepCsv, RefusesInfiniteStepTimes) {
    const std::string inf =
        scratch("inf.csv", "step,step_time_s,first_step_after_eval\n1,2.0,0\n2,inf,0\n");
    const std::string huge =
        scratch("huge.csv", "step,step_time_s,first_step_after_eval\n1,2.0,0\n2,1e999,0\n");

    EXPECT_EQ(message_of(inf), inf + ":3: column 'step_time_s': inf is not a finite positive time");
    EXPECT_NE(message_of(huge).find(":3: column 'step_time_s'"), std::string::npos)
        << message_of(huge);
}

// Issue 33, item 20: a UTF-8 byte-order mark before the header gave "no column 'step'".
TEST(StepCsv, SkipsAUtf8ByteOrderMark) {
    const std::string path = scratch(
        "bom.csv", "\xEF\xBB\xBFstep,step_time_s,first_step_after_eval\n1,2.0,0\n2,3.0,0\n");
    StepSelection all;
    all.warmup_steps = 0;

    EXPECT_EQ(read_step_csv(path, all).step_time_s, (std::vector<double>{2.0, 3.0}));
}

// Issue 33, item 7: the readers had no size limit (a device or a huge file filled memory).
TEST(StepCsv, RefusesDirectoriesDevicesAndFilesPastTheLimit) {
    const std::string big = scratch("big.csv", "step,step_time_s,first_step_after_eval\n");
    fs::resize_file(big, kMaxCsvFileBytes + 1);  // sparse
    const std::string dir = (fs::temp_directory_path() / "prism_step_csv_test").string();

    EXPECT_EQ(message_of(big), big +
                                   ": larger than 67108864 bytes, the limit for a step file (is "
                                   "it the right file?)");
    EXPECT_EQ(message_of(dir), dir + ": is a directory, not a step file");
    EXPECT_EQ(message_of("/dev/zero"),
              "/dev/zero: larger than 67108864 bytes, the limit for a "
              "step file (is it the right file?)");
    fs::remove(big);
}

}  // namespace
}  // namespace prism::io
