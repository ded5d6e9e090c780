// The hiccup keys of [variability] (issue 35): parsed with units, round-tripped through a
// written profile, and bad values refused with the file, line, column and key.

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

TEST(HiccupKeys, ReadsProbabilityDelayWithUnitsAndSigma) {
    const Experiment e = parse_experiment(kBaseExperiment +
                                              "[variability]\n"
                                              "preset = \"prism-paper\"\n"
                                              "hiccup_probability = 2e-4\n"
                                              "hiccup_delay_median = \"150 ms\"\n"
                                              "hiccup_delay_sigma = 0.9\n",
                                          "exp.toml");

    EXPECT_DOUBLE_EQ(e.variability.hiccup.probability, 2e-4);
    EXPECT_DOUBLE_EQ(e.variability.hiccup.delay_median_s, 0.15);
    EXPECT_DOUBLE_EQ(e.variability.hiccup.delay_sigma, 0.9);
}

TEST(HiccupKeys, BadValuesNameTheFileLineColumnAndKey) {
    EXPECT_EQ(loader_error_of(kBaseExperiment + "[variability]\n"
                                                "hiccup_probability = 1.5\n"
                                                "hiccup_delay_median = 0.1\n"),
              "exp.toml:8:22: variability.hiccup_probability: value 1.5 must be <= 1 (a "
              "probability per node and step)");
    EXPECT_EQ(loader_error_of(kBaseExperiment + "[variability]\n"
                                                "hiccup_probability = 0.001\n"),
              "exp.toml:8:22: variability: hiccup_probability 0.001 needs hiccup_delay_median "
              "(the delay's median, e.g. \"0.2 s\")");
    EXPECT_EQ(loader_error_of(kBaseExperiment + "[variability]\n"
                                                "hiccup_probability = 0.001\n"
                                                "hiccup_delay_median = \"fast\"\n")
                  .rfind("exp.toml:9:23: variability.hiccup_delay_median:", 0),
              0u);
    EXPECT_EQ(loader_error_of(kBaseExperiment + "[variability]\n"
                                                "hiccup_delay_sigma = -1\n"),
              "exp.toml:8:22: variability.hiccup_delay_sigma: value -1 must be >= 0");
    EXPECT_NE(loader_error_of(kBaseExperiment + "[variability]\n"
                                                "hiccup_probabilty = 0.1\n")
                  .find("hiccup_probability"),
              std::string::npos);
}

TEST(HiccupKeys, AParetoDelayTakesItsTailShape) {
    const Experiment e = parse_experiment(kBaseExperiment +
                                              "[variability]\n"
                                              "hiccup_probability = 1e-4\n"
                                              "hiccup_delay_median = \"2 s\"\n"
                                              "hiccup_delay_family = \"pareto\"\n"
                                              "hiccup_delay_tail = 2.5\n",
                                          "exp.toml");

    EXPECT_EQ(e.variability.hiccup.family, HiccupFamily::pareto);
    EXPECT_DOUBLE_EQ(e.variability.hiccup.delay_tail, 2.5);
    EXPECT_DOUBLE_EQ(e.variability.hiccup.delay_median_s, 2.0);
}

TEST(HiccupKeys, ParetoKeysAreCheckedAtTheirLine) {
    const std::string base = kBaseExperiment +
                             "[variability]\n"
                             "hiccup_probability = 1e-4\n"
                             "hiccup_delay_median = 2\n";
    EXPECT_EQ(loader_error_of(base + "hiccup_delay_family = \"pareto\"\n"),
              "exp.toml:10:23: variability: hiccup_delay_family = \"pareto\" needs "
              "hiccup_delay_tail (the tail's shape alpha, > 2)");
    EXPECT_EQ(loader_error_of(base + "hiccup_delay_family = \"pareto\"\nhiccup_delay_tail = 1.5\n"),
              "exp.toml:11:21: variability.hiccup_delay_tail: value 1.5 must be > 2 (the Pareto "
              "tail's shape: at 2 or below a step's variance is infinite)");
    EXPECT_EQ(loader_error_of(base + "hiccup_delay_tail = 3\n"),
              "exp.toml:10:21: variability: hiccup_delay_tail is the Pareto delay's; set "
              "hiccup_delay_family = \"pareto\" (the lognormal delay takes hiccup_delay_sigma)");
    EXPECT_EQ(loader_error_of(base + "hiccup_delay_family = \"pareto\"\nhiccup_delay_tail = 3\n"
                                     "hiccup_delay_sigma = 1\n"),
              "exp.toml:12:22: variability: hiccup_delay_sigma is the lognormal delay's; the "
              "Pareto delay takes hiccup_delay_tail");
    EXPECT_EQ(loader_error_of(base + "hiccup_delay_family = \"weibull\"\n")
                  .rfind("exp.toml:10:23: variability.hiccup_delay_family:", 0),
              0u);
}

TEST(HiccupKeys, AWrittenParetoProfileLoadsBack) {
    VariabilityProfile p;
    p.spec = load_variability("prism-paper");
    p.name = "pareto-hiccups";
    p.source = "test";
    p.spec.hiccup.probability = 2e-5;
    p.spec.hiccup.delay_median_s = 1.5;
    p.spec.hiccup.family = HiccupFamily::pareto;
    p.spec.hiccup.delay_tail = 2.75;
    const auto path = std::filesystem::temp_directory_path() / "prism_pareto_profile_test.toml";
    {
        std::ofstream out(path);
        out << format_variability_profile(p);
    }

    const VariabilitySpec back = load_variability(path.string());

    EXPECT_EQ(back.hiccup, p.spec.hiccup);
    std::filesystem::remove(path);
}

TEST(HiccupKeys, AWrittenProfileLoadsBackWithItsHiccups) {
    VariabilityProfile p;
    p.spec = load_variability("prism-paper");
    p.name = "with-hiccups";
    p.source = "test";
    p.spec.hiccup.probability = 3.5e-5;
    p.spec.hiccup.delay_median_s = 0.42;
    p.spec.hiccup.delay_sigma = 1.1;
    p.hiccup_notes = {"fitted on nothing"};
    p.spec.periodic = {{"gc", 100, 0.8}, {"same_index_57", 230, 10.3}};
    const auto path = std::filesystem::temp_directory_path() / "prism_hiccup_profile_test.toml";
    {
        std::ofstream out(path);
        out << format_variability_profile(p);
    }

    const VariabilitySpec back = load_variability(path.string());

    EXPECT_EQ(back.hiccup, p.spec.hiccup);
    EXPECT_EQ(back.periodic, p.spec.periodic);
    std::filesystem::remove(path);
}

TEST(PeriodicKeys, ReadsEventsWithTheirCadenceAndDuration) {
    const Experiment e = parse_experiment(kBaseExperiment +
                                              "[variability]\n"
                                              "preset = \"none\"\n"
                                              "[variability.periodic]\n"
                                              "gc = { every = 100, duration = \"0.8 s\" }\n"
                                              "checkpoint = { every = 500, duration = 12 }\n",
                                          "exp.toml");

    ASSERT_EQ(e.variability.periodic.size(), 2u);
    EXPECT_EQ(e.variability.periodic[0], (PeriodicEvent{"gc", 100, 0.8}));
    EXPECT_EQ(e.variability.periodic[1], (PeriodicEvent{"checkpoint", 500, 12.0}));
}

TEST(PeriodicKeys, BadEntriesNameTheFileLineColumnAndKey) {
    EXPECT_EQ(loader_error_of(kBaseExperiment + "[variability.periodic]\n"
                                                "gc = { every = 0, duration = \"1 s\" }\n"),
              "exp.toml:8:16: variability.periodic.gc.every: value 0 must be >= 1");
    EXPECT_EQ(loader_error_of(kBaseExperiment + "[variability.periodic]\n"
                                                "gc = { every = 10 }\n"),
              "exp.toml:8:6: variability.periodic.gc: missing 'duration' (e.g. {every = 100, "
              "duration = \"0.8 s\"})");
    EXPECT_NE(
        loader_error_of(kBaseExperiment + "[variability.periodic]\n"
                                          "gc = { every = 10, duration = \"1 s\", phase = 3 }\n")
            .find("variability.periodic.gc"),
        std::string::npos);
}

}  // namespace
}  // namespace prism::io
