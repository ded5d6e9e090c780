#include "explorer/scenarios.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "explorer/design_space.hpp"
#include "io/experiment_loader.hpp"
#include "tests/io/loader_test_helpers.hpp"

namespace prism::explorer {
namespace {

Experiment quickstart() {
    return io::load_experiment(std::string(PRISM_SOURCE_DIR) + "/configs/quickstart.toml");
}

TEST(ScenarioKey, MatchesTheDesignSpaceDigits) {
    // truth: DesignSpace::digits and index_of, the sweep's own mixed-radix decoding, with the
    // scenario dimensions (tp, the second, and zero_stage, the fifth of six) read off the digits
    Experiment e = quickstart();
    e.space.scenarios = {"tp", "zero_stage"};
    const DesignSpace space(e);
    const ScenarioKey key(e);
    ASSERT_TRUE(key.enabled());
    ASSERT_EQ(e.space.dimensions[1].name, "tp");
    ASSERT_EQ(e.space.dimensions[4].name, "zero_stage");
    const std::size_t zero_stages = e.space.dimensions[4].values.size();
    EXPECT_EQ(key.count(), e.space.dimensions[1].values.size() * zero_stages);
    for (std::uint64_t i = 0; i < space.size(); ++i) {
        auto d = space.digits(i);
        EXPECT_EQ(key.of(i), d[1] * zero_stages + d[4]) << i;
        d[1] = 0;
        d[4] = 0;
        EXPECT_EQ(key.configuration_of(i), space.index_of(d)) << i;
    }
    // quickstart: tp = [2, 4, 8], zero_stage = [1, 3]
    EXPECT_EQ(key.label(0), "tp=2 zero_stage=1");
    EXPECT_EQ(key.label(5), "tp=8 zero_stage=3");
}

TEST(ScenarioKey, WithoutScenariosAugmentsNothing) {
    const Experiment e = quickstart();  // no b_noise: no default scenario
    const ScenarioKey key(e);
    EXPECT_FALSE(key.enabled());
    EXPECT_EQ(key.count(), 1u);
    EXPECT_EQ(key.augment(std::vector<double>{1.0, 2.0}, 17), (std::vector<double>{1.0, 2.0}));
    EXPECT_EQ(key.augment(std::vector<bool>{false, true}), (std::vector<bool>{false, true}));
}

TEST(ScenarioRegret, IsTheMultiplicativeEpsilonAgainstTheFront) {
    // hand calculation, both objectives minimized: the front {(2, 10), (4, 5)}
    const std::vector<std::vector<double>> front{{2, 10}, {4, 5}};
    const std::vector<bool> min2{false, false};
    // (4, 10): 4/2 - 1 = 1 against the first, 10/5 - 1 = 1 against the second
    EXPECT_DOUBLE_EQ(scenario_regret({4, 10}, front, min2), 1.0);
    // (3, 6): max(0.5, -0.4) = 0.5 and max(-0.25, 0.2) = 0.2: the nearer one
    EXPECT_DOUBLE_EQ(scenario_regret({3, 6}, front, min2), 0.2);
    // on the front, or better than it: no regret
    EXPECT_DOUBLE_EQ(scenario_regret({2, 10}, front, min2), 0.0);
    EXPECT_DOUBLE_EQ(scenario_regret({1, 1}, front, min2), 0.0);
    // maximized: 100 tokens/s on the front, 80 here: 100 / 80 - 1
    EXPECT_DOUBLE_EQ(scenario_regret({80}, {{100}}, {true}), 0.25);
}

TEST(RobustPick, LeastWorstCaseRegretByHand) {
    // one minimized objective, two scenarios, three configurations (1, 2, 3); fronts: 10 in
    // scenario 0, 20 in scenario 1. Regrets: config 1 (10, 30): 0, 0.5; config 2 (12, 20):
    // 0.2, 0; config 3 (20, 21): 1.0, 0.05. Least worst: config 2 at 0.2.
    const std::vector<ScenarioRow> rows{
        {100, 1, 0, {10}}, {101, 1, 1, {30}}, {200, 2, 0, {12}},
        {201, 2, 1, {20}}, {300, 3, 0, {20}}, {301, 3, 1, {21}},
    };
    const RobustPick pick = robust_pick(rows, {false}, 2);
    ASSERT_TRUE(pick.found) << pick.why_not;
    EXPECT_EQ(pick.configuration, 2u);
    EXPECT_DOUBLE_EQ(pick.worst_regret, 0.2);
    EXPECT_DOUBLE_EQ(pick.regret[0], 0.2);
    EXPECT_DOUBLE_EQ(pick.regret[1], 0.0);
    EXPECT_EQ(pick.index, (std::vector<std::uint64_t>{200, 201}));
}

TEST(RobustPick, NeedsAConfigurationOkInEveryScenarioAndPositiveObjectives) {
    const std::vector<ScenarioRow> missing{{100, 1, 0, {10}}, {201, 2, 1, {20}}};
    EXPECT_FALSE(robust_pick(missing, {false}, 2).found);
    EXPECT_EQ(robust_pick(missing, {false}, 2).why_not, "no configuration is ok in every scenario");
    const std::vector<ScenarioRow> negative{{100, 1, 0, {-1}}, {101, 1, 1, {2}}};
    EXPECT_FALSE(robust_pick(negative, {false}, 2).found);
}

TEST(ScenarioLoader, BNoiseIsAScenarioByDefaultAndOthersAreNamed) {
    using test::kBaseExperiment;
    using test::loader_error_of;
    const std::string cotune = "[cotune]\ntarget_tokens = 1.0e12\nb_noise = 4.0e6\n";
    const Experiment by_default = io::parse_experiment(
        kBaseExperiment + cotune + "[space]\ntp = [1, 2]\nb_noise = [4.0e6, 4.0e10]\n", "exp.toml");
    EXPECT_EQ(by_default.space.scenarios, std::vector<std::string>{"b_noise"});
    const Experiment none = io::parse_experiment(
        kBaseExperiment + cotune +
            "[space]\nscenarios = []\ntp = [1, 2]\nb_noise = [4.0e6, 4.0e10]\n",
        "exp.toml");
    EXPECT_TRUE(none.space.scenarios.empty());
    const Experiment named = io::parse_experiment(
        kBaseExperiment + "[space]\nscenarios = [\"tp\"]\ntp = [1, 2]\npp = [1, 2]\n", "exp.toml");
    EXPECT_EQ(named.space.scenarios, std::vector<std::string>{"tp"});

    EXPECT_EQ(loader_error_of(kBaseExperiment +
                              "[space]\nscenarios = [\"tpp\"]\ntp = [1, 2]\npp = [1]\n"),
              "exp.toml:8:14: space.scenarios: 'tpp' is not a dimension of [space] (listed: tp, "
              "pp); did you mean 'tp'?");
    EXPECT_EQ(loader_error_of(kBaseExperiment + "[space]\nscenarios = [\"tp\"]\ntp = [1, 2]\n"),
              "exp.toml:8:13: space.scenarios: every [space] dimension is a scenario; leave at "
              "least one that the study decides");
    EXPECT_EQ(loader_error_of(kBaseExperiment +
                              "[space]\nscenarios = [\"tp\", \"tp\"]\ntp = [1, 2]\npp = [1]\n"),
              "exp.toml:8:20: space.scenarios: 'tp' is named twice");
}

}  // namespace
}  // namespace prism::explorer
