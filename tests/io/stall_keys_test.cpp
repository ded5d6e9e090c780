// The stall keys of [variability] (docs/tails.md, "Stalls"): parsed with units, and bad values
// refused with the file, line, column and key.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "io/experiment_loader.hpp"
#include "io/variability_profile.hpp"
#include "tests/io/loader_test_helpers.hpp"

namespace prism::io {
namespace {

using prism::test::kBaseExperiment;
using prism::test::loader_error_of;

TEST(StallKeys, ReadsTheFractionAndTheDurationWithItsUnit) {
    const Experiment e = parse_experiment(kBaseExperiment +
                                              "[variability]\n"
                                              "preset = \"prism-paper\"\n"
                                              "stall_fraction = 1.7e-3\n"
                                              "stall_duration = \"20 ms\"\n",
                                          "exp.toml");

    EXPECT_DOUBLE_EQ(e.variability.stalls.fraction, 1.7e-3);
    EXPECT_DOUBLE_EQ(e.variability.stalls.duration_s, 0.02);
    EXPECT_TRUE(e.variability.stalls.active());
}

TEST(StallKeys, BadValuesNameTheFileLineColumnAndKey) {
    EXPECT_EQ(loader_error_of(kBaseExperiment + "[variability]\n"
                                                "stall_fraction = 0.7\n"
                                                "stall_duration = \"1 ms\"\n"),
              "exp.toml:8:18: variability.stall_fraction: value 0.7 must be <= 0.5 (the "
              "fraction of a node's time it is stalled)");
    EXPECT_EQ(loader_error_of(kBaseExperiment + "[variability]\n"
                                                "stall_fraction = 0.001\n"),
              "exp.toml:8:18: variability: stall_fraction 0.001 needs stall_duration (one "
              "stall's duration, e.g. \"20 ms\")");
    EXPECT_EQ(loader_error_of(kBaseExperiment + "[variability]\n"
                                                "stall_fraction = -0.1\n"),
              "exp.toml:8:18: variability.stall_fraction: value -0.1 must be >= 0");
    EXPECT_EQ(loader_error_of(kBaseExperiment + "[variability]\n"
                                                "stall_fraction = 0.001\n"
                                                "stall_duration = \"slow\"\n")
                  .rfind("exp.toml:9:18: variability.stall_duration:", 0),
              0u);
}

// A profile written with stalls (prism steps fit --stalls, or a --base that has them) keeps them:
// the writer dropped the keys before, so a fit on a base with stalls wrote a profile without.
TEST(StallKeys, AWrittenProfileLoadsBackWithItsStalls) {
    VariabilityProfile p;
    p.spec = load_variability("prism-paper");
    p.name = "with-stalls";
    p.source = "test";
    p.spec.stalls.fraction = 2.41e-3;
    p.spec.stalls.duration_s = 0.02;
    p.stall_notes = {"fitted on nothing"};
    const auto path = std::filesystem::temp_directory_path() / "prism_stall_profile_test.toml";
    {
        std::ofstream out(path);
        out << format_variability_profile(p);
    }

    const VariabilitySpec back = load_variability(path.string());

    EXPECT_EQ(back.stalls, p.spec.stalls);
    EXPECT_NE(format_variability_profile(p).find("# fitted on nothing\nstall_fraction = 0.00241\n"),
              std::string::npos);
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace prism::io
