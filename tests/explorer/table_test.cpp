#include "explorer/table.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

#include "src/common/error.hpp"

namespace {

using prism::explorer::Align;
using prism::explorer::Cell;
using prism::explorer::format_number;
using prism::explorer::format_table;
using prism::explorer::TableColumn;
using prism::explorer::TableOptions;

TEST(FormatNumber, UsesFourSignificantDigitsInFixedNotation) {
    EXPECT_EQ(format_number(3.14159265), "3.142");
    EXPECT_EQ(format_number(123.456), "123.5");
    EXPECT_EQ(format_number(1234.5678), "1235");
    EXPECT_EQ(format_number(12345.678), "12346");
    EXPECT_EQ(format_number(0.0123456), "0.01235");
    EXPECT_EQ(format_number(0.001), "0.001");
    EXPECT_EQ(format_number(-42.125), "-42.12");  // round half to even in binary: 42.125 exact
}

TEST(FormatNumber, DropsTrailingZeros) {
    EXPECT_EQ(format_number(2.0), "2");
    EXPECT_EQ(format_number(0.5), "0.5");
    EXPECT_EQ(format_number(100.0), "100");
    EXPECT_EQ(format_number(1.2), "1.2");
}

TEST(FormatNumber, SwitchesToScientificForVeryLargeAndSmall) {
    EXPECT_EQ(format_number(123456.0), "1.235e+05");
    EXPECT_EQ(format_number(1.0e9), "1e+09");
    EXPECT_EQ(format_number(-6.02214076e23), "-6.022e+23");
    EXPECT_EQ(format_number(0.000999), "9.99e-04");
    EXPECT_EQ(format_number(2.5e-5), "2.5e-05");
}

TEST(FormatNumber, DecidesNotationAfterRounding) {
    EXPECT_EQ(format_number(99999.7), "1e+05");
    EXPECT_EQ(format_number(0.99996), "1");
    EXPECT_EQ(format_number(0.00099996), "0.001");
}

TEST(FormatNumber, SpellsSpecialValues) {
    EXPECT_EQ(format_number(0.0), "0");
    EXPECT_EQ(format_number(-0.0), "0");
    EXPECT_EQ(format_number(std::numeric_limits<double>::quiet_NaN()), "nan");
    EXPECT_EQ(format_number(std::numeric_limits<double>::infinity()), "inf");
    EXPECT_EQ(format_number(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(FormatNumber, HonoursTheRequestedDigits) {
    EXPECT_EQ(format_number(3.14159265, 2), "3.1");
    EXPECT_EQ(format_number(3.14159265, 6), "3.14159");
    EXPECT_EQ(format_number(3.14159265, 0), "3");  // at least one digit
}

TEST(FormatNumber, ParsesBackWithinHalfAUnitInTheLastDigit) {
    // Independent check: strtod of the text must be within 0.5 * 10^(1 - digits) relative, the
    // rounding error of `digits` significant digits (fixed notation from 1e4 keeps more).
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> exponent(-12.0, 12.0);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (int i = 0; i < 20000; ++i) {
        const double value = (unit(rng) < 0.5 ? -1 : 1) * std::pow(10.0, exponent(rng));
        const int digits = 1 + static_cast<int>(rng() % 8);

        const std::string text = format_number(value, digits);

        const double back = std::strtod(text.c_str(), nullptr);
        const double tolerance = 0.5 * std::pow(10.0, 1 - digits) * (1 + 1e-12);
        ASSERT_LE(std::abs(back - value), tolerance * std::abs(value))
            << value << " digits=" << digits << " -> " << text;
    }
}

TEST(FormatTable, AlignsNumbersRightAndTextLeft) {
    const std::vector<TableColumn> columns = {
        {"config", ""}, {"tp", ""}, {"step_time", "s"}, {"mfu", ""}};
    const std::vector<std::vector<Cell>> rows = {
        {"tp8-pp4", 8, 12.3456, 0.41234},
        {"tp2-pp16-fsdp", 2, 123456.0, Cell()},
    };

    const std::string table = format_table(columns, rows);

    EXPECT_EQ(table,
              "config         tp  step_time     mfu\n"
              "                           s\n"
              "-------------  --  ---------  ------\n"
              "tp8-pp4         8      12.35  0.4123\n"
              "tp2-pp16-fsdp   2  1.235e+05       -\n");
}

TEST(FormatTable, PrintsIntegersExactly) {
    const std::vector<TableColumn> columns = {{"index", ""}};
    const std::vector<std::vector<Cell>> rows = {{std::uint64_t{18446744073709551615ULL}},
                                                 {std::int64_t{-9223372036854775807LL} - 1},
                                                 {123456789},
                                                 {std::size_t{0}}};

    const std::string table = format_table(columns, rows);

    EXPECT_EQ(table,
              "               index\n"
              "--------------------\n"
              "18446744073709551615\n"
              "-9223372036854775808\n"
              "           123456789\n"
              "                   0\n");
}

TEST(FormatTable, OmitsUnitRowAndRuleOnRequest) {
    const std::vector<TableColumn> columns = {{"name", "", Align::right}, {"x", "m"}};
    TableOptions options;
    options.unit_row = false;
    options.rule = false;
    options.separator = " | ";
    options.indent = "  ";

    const std::string table = format_table(columns, {{"a", 1.5}, {"bbb", -2}}, options);

    EXPECT_EQ(table,
              "  name |   x\n"
              "     a | 1.5\n"
              "   bbb |  -2\n");
}

TEST(FormatTable, LeavesNoUnitRowWhenNoColumnHasAUnit) {
    const std::vector<TableColumn> columns = {{"metric", ""}, {"value", "", Align::left, 6}};

    const std::string table = format_table(columns, {{"pi", 3.14159265}, {"ok", true}, {"e"}});

    EXPECT_EQ(table,
              "metric  value\n"
              "------  -------\n"
              "pi      3.14159\n"
              "ok      true\n"
              "e       -\n");
}

TEST(FormatTable, PrintsHeadersOfAnEmptyTable) {
    const std::string table = format_table({{"a", ""}, {"bb", "GiB"}}, {});

    EXPECT_EQ(table,
              "a  bb\n"
              "   GiB\n"
              "-  ---\n");
}

TEST(FormatTable, RejectsRowsWiderThanTheColumns) {
    try {
        format_table({{"a", ""}}, {{1}, {1, 2}});
        FAIL() << "expected prism::Error";
    } catch (const prism::Error& e) {
        EXPECT_STREQ(e.what(), "format_table: row 1 has 2 cells, expected at most 1");
    }
}

}  // namespace
