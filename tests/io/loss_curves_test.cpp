// The loss-curve CSV of `prism fit-lr` (io/loss_curves.hpp).

#include "io/loss_curves.hpp"

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace prism::io {
namespace {

std::string error_of(const std::string& text) {
    try {
        parse_loss_curves(text, "curves.csv");
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "no error";
}

std::string rows(double lr, int n, int first_line_step = 0) {
    std::string out;
    for (int i = 0; i < n; ++i) {
        out += std::to_string(lr) + "," + std::to_string(first_line_step + 10 * i) + "," +
               std::to_string(5.0 - 0.1 * i) + "\n";
    }
    return out;
}

TEST(LossCurves, ReadsInterleavedCurvesInAnyColumnOrder) {
    const std::string text =
        "# a comment\n"
        "\n"
        "step, loss, run, learning_rate\n"
        "0, 10.5, x, 1e-4\n"
        "0, 10.6, x, 3e-4\n"
        "10, 9.5, x, 1e-4\n"
        "10, 9.0, x, 3e-4\n"
        "20, 8.5, x, 1e-4\n"
        "30, 8.0, x, 1e-4\n"
        "40, 7.9, x, 1e-4\n"
        "20, 8.0, x, 3e-4\n"
        "30, 7.5, x, 3e-4\n"
        "40, 7.4, x, 3e-4\n";

    const std::vector<LossCurve> curves = parse_loss_curves(text, "curves.csv");

    ASSERT_EQ(curves.size(), 2u);
    EXPECT_EQ(curves[0].learning_rate, 1e-4);
    EXPECT_EQ(curves[0].steps, (std::vector<double>{0, 10, 20, 30, 40}));
    EXPECT_EQ(curves[0].losses, (std::vector<double>{10.5, 9.5, 8.5, 8.0, 7.9}));
    EXPECT_EQ(curves[0].first_line, 4u);
    EXPECT_EQ(curves[1].learning_rate, 3e-4);
    EXPECT_EQ(curves[1].losses, (std::vector<double>{10.6, 9.0, 8.0, 7.5, 7.4}));
}

TEST(LossCurves, MalformedRowsNameFileAndLine) {
    const std::string header = "learning_rate,step,loss\n";

    EXPECT_EQ(error_of("lr,step,loss\n"),
              "curves.csv:1: header: no 'learning_rate' column (the header must name "
              "learning_rate, step and loss)");
    EXPECT_EQ(error_of(header + "1e-4,0,abc\n"),
              "curves.csv:2: loss: 'abc' is not a finite number");
    EXPECT_EQ(error_of(header + "1e-4,0\n"), "curves.csv:2: 2 fields, but the header has 3");
    EXPECT_EQ(error_of(header + "1e-4,0,nan\n"),
              "curves.csv:2: loss: 'nan' is not a finite number");
    EXPECT_EQ(error_of(header + "0,0,1.0\n"), "curves.csv:2: learning_rate: 0 must be > 0");
    EXPECT_EQ(error_of(header + "1e-4,10,2.0\n1e-4,10,1.9\n"),
              "curves.csv:3: step: 10 is not after step 10 of learning_rate 0.0001 (line 2)");
    EXPECT_EQ(error_of(header + rows(1e-4, 4)),
              "curves.csv: learning_rate 0.0001: 4 points; a fit needs at least 5");
    EXPECT_EQ(error_of("# only a comment\n"),
              "curves.csv: no header line (learning_rate,step,loss) and no data");
    EXPECT_EQ(error_of(header), "curves.csv: no data rows after the header");
    EXPECT_EQ(error_of(header + rows(1e-4, 5)), "no error");
}

TEST(LossCurves, MissingFileIsNamed) {
    try {
        read_loss_curves("/nonexistent/curves.csv");
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_STREQ(e.what(), "/nonexistent/curves.csv: no such loss-curve file");
    }
}

// Issue 33, item 17: losses near 1e154 overflowed the fit's squares and gave negative
// predictions; they are refused as not a training loss.
TEST(LossCurves, RefusesLossesNoTrainingRunHas) {
    const std::string header = "learning_rate,step,loss\n";

    EXPECT_EQ(error_of(header + "1e-4,0,1e154\n"),
              "curves.csv:2: loss: 1e154 is not a training loss (at most 1e+06 in magnitude)");
    EXPECT_EQ(error_of(header + "1e-4,0,-2e6\n"),
              "curves.csv:2: loss: -2e6 is not a training loss (at most 1e+06 in magnitude)");
}

// Issue 33, items 7 and 20: the file is read with a limit, and a byte-order mark before the
// header is not part of the first column's name.
TEST(LossCurves, ReadsWithALimitAndSkipsAByteOrderMark) {
    const std::string dir = ::testing::TempDir();
    const std::string bom = dir + "/prism_bom_curves.csv";
    {
        std::ofstream out(bom, std::ios::binary | std::ios::trunc);
        out << "\xEF\xBB\xBFlearning_rate,step,loss\n" << rows(1e-4, 5);
    }

    EXPECT_EQ(read_loss_curves(bom).size(), 1u);
    try {
        read_loss_curves("/dev/zero");
        FAIL() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_STREQ(e.what(),
                     "/dev/zero: larger than 67108864 bytes, the limit for a loss-curve file (is "
                     "it the right file?)");
    }
}

}  // namespace
}  // namespace prism::io
