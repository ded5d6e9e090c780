#include "explorer/progress.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "src/common/error.hpp"

namespace {

using prism::explorer::format_duration;
using prism::explorer::Progress;

// A clock the test moves by hand.
struct FakeClock {
    double now_s = 0.0;
    std::function<double()> fn() {
        return [this] { return now_s; };
    }
};

TEST(Progress, ComputesRateEtaAndElapsedFromTheMeanRate) {
    FakeClock clock{100.0};
    std::ostringstream out;
    Progress progress(1000, out, false, clock.fn());

    clock.now_s = 110.0;
    progress.update(250);

    // 250 points in 10 s: 25 points/s; 750 left at 25 points/s: 30 s.
    EXPECT_DOUBLE_EQ(progress.elapsed_s(), 10.0);
    EXPECT_DOUBLE_EQ(progress.rate_per_s(), 25.0);
    EXPECT_DOUBLE_EQ(progress.eta_s(), 30.0);
    EXPECT_EQ(out.str(), "progress: 250/1000 points (25.0%), 25 points/s, ETA 30s, elapsed 10s\n");
}

TEST(Progress, CountsOnlyPointsDoneSinceAResume) {
    FakeClock clock{100.0};
    std::ostringstream out;
    Progress progress(1000, out, false, clock.fn());
    progress.start_at(200);

    clock.now_s = 110.0;
    progress.update(450);

    // 250 new points in 10 s: 25 points/s; 550 left: 22 s.
    EXPECT_DOUBLE_EQ(progress.rate_per_s(), 25.0);
    EXPECT_DOUBLE_EQ(progress.eta_s(), 22.0);
    EXPECT_EQ(out.str(), "progress: 450/1000 points (45.0%), 25 points/s, ETA 22s, elapsed 10s\n");
}

TEST(Progress, ReportsUnknownEtaBeforeAnyRate) {
    FakeClock clock{5.0};
    std::ostringstream out;
    Progress progress(10, out, false, clock.fn());

    progress.update(0);

    EXPECT_EQ(progress.rate_per_s(), 0.0);
    EXPECT_TRUE(std::isnan(progress.eta_s()));
    EXPECT_EQ(progress.plain_line(),
              "progress: 0/10 points (0.0%), 0 points/s, ETA --, elapsed 0.0s");
}

TEST(Progress, TruncatesThePercentage) {
    FakeClock clock;
    std::ostringstream out;
    Progress progress(10000, out, false, clock.fn());
    clock.now_s = 1.0;

    progress.update(9999);

    // 99.99% must not be shown as 100.0% while a point is missing.
    EXPECT_EQ(progress.plain_line(),
              "progress: 9999/10000 points (99.9%), 9999 points/s, ETA 0.0s, elapsed 1.0s");
}

TEST(Progress, PrintsPlainLinesOncePerInterval) {
    FakeClock clock;
    std::ostringstream out;
    Progress progress(100, out, false, clock.fn(), 5.0);

    // Prints when at least 5 s passed since the last line (or the start): at 5, 10.25, 15.25.
    for (const double t : {1.0, 4.5, 5.0, 9.5, 10.25, 15.0, 15.25}) {
        clock.now_s = t;
        progress.update(static_cast<std::uint64_t>(t * 4));
    }
    clock.now_s = 16.0;
    progress.finish();

    EXPECT_EQ(out.str(),
              "progress: 20/100 points (20.0%), 4 points/s, ETA 20s, elapsed 5.0s\n"
              "progress: 41/100 points (41.0%), 4 points/s, ETA 15s, elapsed 10s\n"
              "progress: 61/100 points (61.0%), 4 points/s, ETA 9.8s, elapsed 15s\n"
              "finished: 61/100 points in 16s, 3.812 points/s\n");
}

TEST(Progress, RedrawsTheTerminalLineAtMostFiveTimesPerSecond) {
    FakeClock clock;
    std::ostringstream out;
    Progress progress(1000, out, true, clock.fn());

    // Draws at 0 (first), 0.25, 0.5 and 0.75: each at least 0.2 s after the previous draw.
    for (const double t : {0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.6875, 0.75}) {
        clock.now_s = t;
        progress.update(static_cast<std::uint64_t>(t * 1000));
    }

    const std::string text = out.str();
    EXPECT_EQ(std::count(text.begin(), text.end(), '\r'), 4);
    EXPECT_EQ(text.find('\n'), std::string::npos);
}

TEST(Progress, BoundsRedrawsUnderAFloodOfUpdates) {
    FakeClock clock;
    std::ostringstream out;
    Progress progress(100000, out, true, clock.fn());

    for (int ms = 0; ms <= 10000; ++ms) {  // an update every millisecond for 10 s
        clock.now_s = ms / 1000.0;
        progress.update(static_cast<std::uint64_t>(ms));
    }

    // At most one draw per 0.2 s window plus the first: 51; at least 10 s / (0.2 s + 1 ms).
    const std::string text = out.str();
    const auto draws = std::count(text.begin(), text.end(), '\r');
    EXPECT_LE(draws, 51);
    EXPECT_GE(draws, 49);
}

TEST(Progress, DrawsALiveLineAndBlanksLeftoversOnTheTerminal) {
    FakeClock clock;
    std::ostringstream out;
    Progress progress(100, out, true, clock.fn());

    progress.update(0);
    clock.now_s = 2.0;
    progress.update(50);
    clock.now_s = 4.0;
    progress.update(100);
    clock.now_s = 4.5;
    progress.finish();
    progress.finish();  // only once
    progress.update(100);

    // The final line is 26 characters shorter than the last live line: 26 blanks follow it.
    EXPECT_EQ(out.str(),
              "\r[....................] 0/100 0.0%  0 points/s  ETA --  elapsed 0.0s"
              "\r[##########..........] 50/100 50.0%  25 points/s  ETA 2.0s  elapsed 2.0s"
              "\r[####################] 100/100 100.0%  25 points/s  ETA 0.0s  elapsed 4.0s"
              "\rfinished: 100/100 points in 4.5s, 22.22 points/s" +
                  std::string(26, ' ') + "\n");
}

TEST(Progress, RejectsANonPositiveInterval) {
    std::ostringstream out;
    FakeClock clock;

    try {
        Progress progress(1, out, false, clock.fn(), 0.0);
        FAIL() << "expected prism::Error";
    } catch (const prism::Error& e) {
        EXPECT_STREQ(e.what(), "progress: interval must be positive, got 0");
    }
}

TEST(FormatDuration, PicksUnitsByMagnitude) {
    EXPECT_EQ(format_duration(0.44), "0.4s");
    EXPECT_EQ(format_duration(9.94), "9.9s");
    EXPECT_EQ(format_duration(9.96), "10s");
    EXPECT_EQ(format_duration(42.4), "42s");
    EXPECT_EQ(format_duration(59.6), "1m00s");
    EXPECT_EQ(format_duration(3 * 60 + 7), "3m07s");
    EXPECT_EQ(format_duration(2 * 3600 + 5 * 60 + 9), "2h05m09s");
    EXPECT_EQ(format_duration(3 * 86400 + 4 * 3600 + 12 * 60 + 30), "3d04h12m");
    EXPECT_EQ(format_duration(1e20), ">99999d");
}

TEST(FormatDuration, ShowsUnknownForInvalidDurations) {
    EXPECT_EQ(format_duration(std::numeric_limits<double>::quiet_NaN()), "--");
    EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "--");
    EXPECT_EQ(format_duration(-1.0), "--");
}

}  // namespace
