#include "io/units.hpp"

#include <string>

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace {

using prism::io::parse_quantity;
using prism::io::Quantity;

std::string error_of(const std::string& text, Quantity quantity, bool bare = false) {
    try {
        parse_quantity(text, quantity, bare);
    } catch (const prism::ConfigError& e) {
        return e.what();
    }
    return "no error";
}

TEST(Units, TimesConvertToSeconds) {
    EXPECT_DOUBLE_EQ(parse_quantity("2 us", Quantity::time), 2e-6);
    EXPECT_DOUBLE_EQ(parse_quantity("500 ns", Quantity::time), 5e-7);
    EXPECT_DOUBLE_EQ(parse_quantity("3 ms", Quantity::time), 3e-3);
    EXPECT_DOUBLE_EQ(parse_quantity("30 min", Quantity::time), 1800.0);
    EXPECT_DOUBLE_EQ(parse_quantity("1.5 h", Quantity::time), 5400.0);
    EXPECT_DOUBLE_EQ(parse_quantity("1 day", Quantity::time), 86400.0);
    EXPECT_DOUBLE_EQ(parse_quantity("30 days", Quantity::time), 2592000.0);
    EXPECT_DOUBLE_EQ(parse_quantity("50000 h", Quantity::time), 1.8e8);
}

TEST(Units, BytesUseDecimalAndBinaryPrefixes) {
    EXPECT_DOUBLE_EQ(parse_quantity("80 GB", Quantity::bytes), 8e10);
    EXPECT_DOUBLE_EQ(parse_quantity("80 GiB", Quantity::bytes), 85899345920.0);
    EXPECT_DOUBLE_EQ(parse_quantity("1 TiB", Quantity::bytes), 1099511627776.0);
    EXPECT_DOUBLE_EQ(parse_quantity("2 KB", Quantity::bytes), 2000.0);
    EXPECT_DOUBLE_EQ(parse_quantity("2 KiB", Quantity::bytes), 2048.0);
    EXPECT_DOUBLE_EQ(parse_quantity("141GB", Quantity::bytes), 1.41e11);
}

TEST(Units, BitRatesAreDividedByEight) {
    EXPECT_DOUBLE_EQ(parse_quantity("400 Gb/s", Quantity::bandwidth), 5e10);
    EXPECT_DOUBLE_EQ(parse_quantity("100 Gbit/s", Quantity::bandwidth), 1.25e10);
    EXPECT_DOUBLE_EQ(parse_quantity("1.6 Tb/s", Quantity::bandwidth), 2e11);
    EXPECT_DOUBLE_EQ(parse_quantity("450 GB/s", Quantity::bandwidth), 4.5e11);
    EXPECT_DOUBLE_EQ(parse_quantity("3.35 TB/s", Quantity::bandwidth), 3.35e12);
    EXPECT_DOUBLE_EQ(parse_quantity("1 GiB/s", Quantity::bandwidth), 1073741824.0);
}

TEST(Units, FlopRatesConvertToFlopPerSecond) {
    EXPECT_DOUBLE_EQ(parse_quantity("989 TFLOP/s", Quantity::flop_rate), 9.89e14);
    EXPECT_DOUBLE_EQ(parse_quantity("2.25 PFLOP/s", Quantity::flop_rate), 2.25e15);
    EXPECT_DOUBLE_EQ(parse_quantity("19.5 GFLOP/s", Quantity::flop_rate), 1.95e10);
}

TEST(Units, BareNumbersOnlyWhereAllowed) {
    EXPECT_DOUBLE_EQ(parse_quantity("1.5e12", Quantity::dimensionless), 1.5e12);
    EXPECT_DOUBLE_EQ(parse_quantity("1800", Quantity::time, true), 1800.0);

    EXPECT_EQ(error_of("1800", Quantity::time),
              "expected a time (e.g. \"30 min\"), got \"1800\"; a bare number is not accepted "
              "here, give a unit");
}

TEST(Units, WrongDimensionNamesWhatWasExpected) {
    EXPECT_EQ(error_of("80 GB", Quantity::bandwidth),
              "expected a bandwidth (e.g. \"400 Gb/s\"), got \"80 GB\"");
    EXPECT_EQ(error_of("2 us", Quantity::bytes),
              "expected a size in bytes (e.g. \"80 GB\"), got \"2 us\"");
}

TEST(Units, UnknownUnitIsNamed) {
    EXPECT_EQ(error_of("400 Gbps", Quantity::bandwidth),
              "unknown unit 'Gbps' in \"400 Gbps\"; expected a bandwidth (e.g. \"400 Gb/s\")");
    EXPECT_EQ(error_of("5 m", Quantity::time),
              "unknown unit 'm' in \"5 m\"; expected a time (e.g. \"30 min\")");
}

TEST(Units, TextWithoutNumberIsRejected) {
    EXPECT_EQ(error_of("fast", Quantity::bandwidth),
              "expected a bandwidth (e.g. \"400 Gb/s\"), got \"fast\"");
    EXPECT_EQ(error_of("inf s", Quantity::time),
              "expected a time (e.g. \"30 min\"), got \"inf s\"");
}

}  // namespace
