#include "explorer/design_space.hpp"

#include <set>

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace prism::explorer {
namespace {

Dimension int_dimension(const std::string& name, std::initializer_list<std::int64_t> values) {
    Dimension d{name, {}};
    for (auto v : values) {
        DimensionValue x;
        x.type = DimensionValue::Type::integer;
        x.i = v;
        d.values.push_back(x);
    }
    return d;
}

Experiment small_experiment() {
    Experiment e;
    e.model.layers = 32;
    e.model.hidden = 4096;
    e.model.heads = 32;
    e.model.kv_heads = 8;
    e.model.ffn = 14336;
    e.model.seq = 8192;
    e.model.vocab = 128256;
    e.training.global_batch_seqs = 512;
    e.hardware.emplace_back();
    e.space.dimensions = {int_dimension("tp", {1, 2, 4, 8}), int_dimension("pp", {1, 2, 4}),
                          int_dimension("gpus", {64, 80}), int_dimension("microbatch", {1, 2})};
    return e;
}

TEST(DesignSpace, SizeIsTheProductOfTheListLengths) {
    const Experiment e = small_experiment();

    const DesignSpace space(e);

    EXPECT_EQ(space.size(), 4u * 3u * 2u * 2u);
}

TEST(DesignSpace, IndicesFollowNestedLoopsWithTheLastDimensionFastest) {
    const Experiment e = small_experiment();
    const DesignSpace space(e);

    // Brute force: the nested loops a user would write, in file order.
    std::uint64_t expected = 0;
    for (std::size_t a = 0; a < 4; ++a) {
        for (std::size_t b = 0; b < 3; ++b) {
            for (std::size_t c = 0; c < 2; ++c) {
                for (std::size_t d = 0; d < 2; ++d) {
                    const std::vector<std::size_t> digits{a, b, c, d};
                    EXPECT_EQ(space.index_of(digits), expected);
                    EXPECT_EQ(space.digits(expected), digits);
                    ++expected;
                }
            }
        }
    }
}

TEST(DesignSpace, GpusDimensionSetsDataParallelDegree) {
    const Experiment e = small_experiment();
    const DesignSpace space(e);

    const auto d = space.decode(space.index_of({2, 1, 0, 1}));  // tp 4, pp 2, gpus 64, mb 2

    EXPECT_FALSE(d.filtered.has_value());
    EXPECT_EQ(d.point.tp, 4);
    EXPECT_EQ(d.point.pp, 2);
    EXPECT_EQ(d.point.dp, 8);
    EXPECT_EQ(d.point.microbatch, 2);
    EXPECT_EQ(d.point.gpus(), 64);
}

TEST(DesignSpace, FiltersPointsWhoseGpusAreNotAMultipleOfTheModelParallelSize) {
    const Experiment e = small_experiment();
    const DesignSpace space(e);

    const auto d = space.decode(space.index_of({3, 2, 1, 0}));  // tp 8 pp 4 = 32 does not divide 80

    ASSERT_TRUE(d.filtered.has_value());
    EXPECT_EQ(*d.filtered, "gpus is not a multiple of tp * pp * cp");
}

TEST(DesignSpace, FiltersBatchThatDoesNotSplitIntoMicrobatches) {
    const Experiment e = small_experiment();
    const DesignSpace space(e);

    const auto d = space.decode(space.index_of({0, 0, 1, 1}));  // dp 80, mb 2: 512 % 160 != 0

    ASSERT_TRUE(d.filtered.has_value());
    EXPECT_EQ(*d.filtered, "global_batch is not a multiple of dp * microbatch");
}

TEST(DesignSpace, EmptyListIsAConfigError) {
    Experiment e = small_experiment();
    e.space.dimensions.push_back(Dimension{"cp", {}});

    EXPECT_THROW(
        {
            try {
                DesignSpace space(e);
            } catch (const ConfigError& err) {
                EXPECT_STREQ(err.what(), "space.cp: the list is empty");
                throw;
            }
        },
        ConfigError);
}

TEST(DesignSpace, ApplyDimensionRejectsOutOfRangeValuesWithTheirName) {
    Experiment e = small_experiment();
    DesignPoint p;
    const Dimension zero = int_dimension("zero_stage", {4});

    try {
        apply_dimension(e, zero, 0, p);
        FAIL() << "expected ConfigError";
    } catch (const ConfigError& err) {
        EXPECT_STREQ(err.what(), "zero_stage: value 4 must be 0, 1, 2 or 3");
    }
}

TEST(Placement, ParsesEveryOrderOfTheFourDimensionsAndRoundTrips) {
    std::vector<std::string> dims{"cp", "dp", "pp", "tp"};
    std::set<std::string> seen;
    do {
        const std::string text = dims[0] + "-" + dims[1] + "-" + dims[2] + "-" + dims[3];

        const Placement p = parse_placement(text);

        EXPECT_EQ(placement_name(p), text);
        seen.insert(text);
    } while (std::next_permutation(dims.begin(), dims.end()));
    EXPECT_EQ(seen.size(), 24u);
    EXPECT_EQ(parse_placement("random").kind, PlacementKind::random);
    EXPECT_EQ(parse_placement("aware").kind, PlacementKind::variability_aware);
    EXPECT_THROW(parse_placement("tp-tp-pp-dp"), ConfigError);
    EXPECT_THROW(parse_placement("tp-pp-dp"), ConfigError);
    // "ordered", as the docs call an order's placement, names the default order in its error
    try {
        parse_placement("ordered");
        ADD_FAILURE() << "\"ordered\" parsed";
    } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("the default order, ranks in order, is "
                                             "\"tp-cp-pp-dp\""),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace prism::explorer
