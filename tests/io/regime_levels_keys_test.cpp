// [variability] regime_levels (issue 35 item 3): the link levels' multipliers of the regime's
// cv, read and amended over a preset, round-tripped through a written profile, and bad values
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

TEST(RegimeLevelKeys, ReadsTheMultipliersAndKeepsTheLevelsNotNamed) {
    const Experiment e = parse_experiment(kBaseExperiment +
                                              "[variability]\n"
                                              "preset = \"prism-paper\"\n"
                                              "regime_levels = {nvlink = 0, pod = 2.5}\n",
                                          "exp.toml");

    EXPECT_EQ(e.variability.regime_levels.nvlink, 0.0);
    EXPECT_EQ(e.variability.regime_levels.nic, 1.0);
    EXPECT_EQ(e.variability.regime_levels.rack, 1.0);
    EXPECT_EQ(e.variability.regime_levels.pod, 2.5);
    EXPECT_FALSE(parse_experiment(kBaseExperiment, "exp.toml").variability.regime_levels.active());
}

TEST(RegimeLevelKeys, BadValuesNameTheFileLineColumnAndKey) {
    EXPECT_EQ(loader_error_of(kBaseExperiment + "[variability]\n"
                                                "regime_levels = {nvlink = -1}\n"),
              "exp.toml:8:27: variability.regime_levels.nvlink: value -1 must be >= 0");
    const std::string unknown = loader_error_of(kBaseExperiment +
                                                "[variability]\n"
                                                "regime_levels = {spine = 1}\n");
    EXPECT_EQ(unknown.rfind("exp.toml:8:", 0), 0u) << unknown;
    EXPECT_NE(unknown.find("spine"), std::string::npos) << unknown;
    const std::string empirical =
        loader_error_of(kBaseExperiment +
                        "[variability]\n"
                        "comm_regime = {dist = \"empirical\", samples = [0.9, "
                        "1.1]}\n"
                        "regime_levels = {pod = 2}\n");
    EXPECT_EQ(empirical.rfind("exp.toml:9:", 0), 0u) << empirical;
    EXPECT_NE(empirical.find("variability: regime_levels needs a normal, lognormal or gamma "
                             "comm_regime (its cv is scaled per link level), not an empirical one"),
              std::string::npos)
        << empirical;
    EXPECT_NE(loader_error_of(kBaseExperiment + "[variability]\n"
                                                "regime_levels = 0.5\n")
                  .rfind("exp.toml:8:", 0),
              std::string::npos);
}

TEST(RegimeLevelKeys, AWrittenProfileLoadsBackWithItsLevels) {
    VariabilityProfile p;
    p.spec = load_variability("prism-paper");
    p.name = "with-levels";
    p.source = "test";
    p.spec.regime_levels = RegimeLevels{0.05, 1, 1.5, 3};
    p.level_notes = {"fitted on nothing"};
    const auto path = std::filesystem::temp_directory_path() / "prism_level_profile_test.toml";
    {
        std::ofstream out(path);
        out << format_variability_profile(p);
    }

    const VariabilitySpec back = load_variability(path.string());

    EXPECT_EQ(back.regime_levels, p.spec.regime_levels);
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace prism::io
