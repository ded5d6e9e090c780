// The [cotune] table (io/detail/toml_cotune.cpp): values and located errors.

#include <string>

#include <gtest/gtest.h>

#include "io/experiment_loader.hpp"
#include "src/common/error.hpp"
#include "src/model/evaluate.hpp"
#include "tests/io/loader_test_helpers.hpp"

namespace {

using prism::io::parse_experiment;

const std::string& kBase = prism::test::kBaseExperiment;

std::string error_of(const std::string& text) { return prism::test::loader_error_of(text); }

TEST(CotuneLoader, ReadsAConstantNoiseStudy) {
    const prism::Experiment e = parse_experiment(kBase +
                                                     "[space]\n"
                                                     "learning_rate = [1e-4, 3e-4]\n"
                                                     "b_noise = [1e6, 1e9]\n"
                                                     "[cotune]\n"
                                                     "target_tokens = 1e12\n"
                                                     "lr_rule = \"sqrt\"\n"
                                                     "lr_reference = 3e-4\n"
                                                     "lr_penalty = { shape = \"linear\" }\n",
                                                 "exp.toml");

    EXPECT_TRUE(e.cotune.enabled);
    EXPECT_EQ(e.cotune.target_tokens, 1e12);
    EXPECT_EQ(e.cotune.noise, prism::NoiseModel::constant);
    EXPECT_EQ(e.cotune.b_noise_tokens, 0.0);  // from the space
    EXPECT_EQ(e.cotune.lr_rule, prism::LrRule::sqrt);
    EXPECT_EQ(e.cotune.lr_reference, 3e-4);
    EXPECT_EQ(e.cotune.lr_penalty.shape, prism::LrPenaltyShape::linear);
    EXPECT_EQ(e.cotune.lr_penalty.coefficient, 0.1);  // the default
    // the study's metrics join the schema
    const prism::MetricSchema schema = prism::metric_schema(e);
    for (const char* name :
         {"steps_to_target", "tokens_to_target", "time_to_target_p50_days",
          "time_to_target_p95_days", "goodput_tokens_per_s", "gpu_hours_to_target"}) {
        EXPECT_GE(prism::find_metric(schema, name), 0) << name;
    }
    EXPECT_LT(prism::find_metric(prism::metric_schema(parse_experiment(kBase, "x.toml")),
                                 "steps_to_target"),
              0);
}

TEST(CotuneLoader, UnknownKeySuggestsNearest) {
    EXPECT_EQ(error_of(kBase + "[cotune]\ntarget_token = 1e12\n"),
              "exp.toml:8:1: unknown key 'target_token' in [cotune]; did you mean "
              "'target_tokens'?");
    EXPECT_EQ(error_of(kBase + "[cotune]\ntarget_loss = 2.5\nb_noise = 1e6\n"
                               "kaplan = { b_stars = 1e8 }\n"),
              "exp.toml:10:12: unknown key 'b_stars' in [cotune.kaplan]; did you mean 'b_star'?");
}

TEST(CotuneLoader, TargetIsExactlyOneOfLossAndTokens) {
    EXPECT_EQ(
        error_of(kBase + "[cotune]\ntarget_loss = 2.5\ntarget_tokens = 1e12\nb_noise = 1e6\n"),
        "exp.toml:9:17: cotune.target_tokens: give either target_loss or target_tokens, "
        "not both");
    EXPECT_EQ(error_of(kBase + "[cotune]\nb_noise = 1e6\n"),
              "exp.toml:7:1: cotune: missing 'target_loss' (a loss on the Kaplan loss path) or "
              "'target_tokens' (tokens the reference batch needs)");
}

TEST(CotuneLoader, TargetLossBelowTheModelsAsymptoteIsLocatedAtTheKey) {
    const std::string error = error_of(kBase + "[cotune]\nb_noise = 1e6\ntarget_loss = 1.5\n");

    EXPECT_EQ(error.rfind("exp.toml:9:15: cotune.target_loss: 1.5 is not above the loss a model "
                          "of ",
                          0),
              0u)
        << error;
}

TEST(CotuneLoader, NoiseScaleMustBeGivenOnceAndOnlyForTheConstantModel) {
    EXPECT_EQ(error_of(kBase + "[cotune]\ntarget_tokens = 1e12\n"),
              "exp.toml:7:1: cotune: missing 'b_noise' (tokens; noise = \"constant\" needs it "
              "here or as a [space] b_noise list)");
    EXPECT_EQ(error_of(kBase + "[cotune]\ntarget_loss = 2.5\nnoise = \"kaplan\"\nb_noise = 1e6\n"),
              "exp.toml:10:11: cotune.b_noise: not used with noise = \"kaplan\" (B_crit(L) sets "
              "it)");
    EXPECT_EQ(error_of(kBase + "[space]\nb_noise = [1e6, 2e6]\n"),
              "exp.toml:8:11: space.b_noise: the gradient noise scale is used only by a [cotune] "
              "study; add one");
    EXPECT_EQ(error_of(kBase + "[space]\nb_noise = [1e6]\n[cotune]\ntarget_loss = 2.5\n"
                               "noise = \"kaplan\"\n"),
              "exp.toml:8:11: space.b_noise: a per-point B_noise needs [cotune] noise = "
              "\"constant\"");
    EXPECT_EQ(error_of(kBase + "[space]\nb_noise = [0.0]\n[cotune]\ntarget_tokens = 1e12\n"),
              "exp.toml:8:12: space.b_noise: value 0 must be > 0");
}

TEST(CotuneLoader, LearningRateRuleNeedsItsParameters) {
    const std::string study = kBase + "[cotune]\ntarget_tokens = 1e12\nb_noise = 1e6\n";

    EXPECT_EQ(error_of(study + "lr_rule = \"sqrt\"\n"),
              "exp.toml:10:11: cotune.lr_rule: \"sqrt\" needs lr_reference (the optimal learning "
              "rate at reference_batch_tokens)");
    EXPECT_EQ(error_of(study + "lr_rule = \"deepseek\"\nlr_reference = 3e-4\n"),
              "exp.toml:11:16: cotune.lr_reference: not used by lr_rule = \"deepseek\"");
    EXPECT_EQ(error_of(study + "lr_rule = \"table\"\n"),
              "exp.toml:10:11: cotune.lr_rule: \"table\" needs lr_table = [[batch_tokens, lr], "
              "...]");
    EXPECT_EQ(error_of(study + "lr_rule = \"table\"\nlr_table = [[2e6, 1e-4], [1e6, 2e-4]]\n"),
              "exp.toml:11:27: cotune.lr_table[1]: batch 1000000 must be larger than the row "
              "before's (2000000)");
    EXPECT_EQ(error_of(study + "lr_rule = \"cubic\"\n"),
              "exp.toml:10:11: cotune.lr_rule: unknown value 'cubic'; expected one of \"none\", "
              "\"fixed\", \"linear\", \"sqrt\", \"deepseek\", \"table\"");
    EXPECT_EQ(error_of(kBase + "[space]\nlearning_rate = [1e-4]\n[cotune]\ntarget_tokens = 1e12\n"
                               "b_noise = 1e6\n"),
              "exp.toml:9:1: cotune.lr_rule: the space lists learning_rate values; name the rule "
              "that gives their optimum (\"fixed\", \"linear\", \"sqrt\", \"deepseek\", "
              "\"table\")");
    EXPECT_EQ(error_of(study + "lr_rule = \"deepseek\"\n"), "no error");  // C from target_tokens
    EXPECT_EQ(error_of(kBase + "[cotune]\ntarget_loss = 2.5\nb_noise = 1e6\nlr_rule = "
                               "\"deepseek\"\n"),
              "exp.toml:10:11: cotune.lr_rule: \"deepseek\" needs compute_budget (or "
              "training.total_tokens, or target_tokens, to take C = M x tokens)");
}

TEST(CotuneLoader, BatchRampMustRiseInWholeSequences) {
    const std::string study = kBase + "[cotune]\ntarget_tokens = 1e12\nb_noise = 1e6\n";

    EXPECT_EQ(error_of(study + "batch_ramp = [{ batch_tokens = 1000, until_tokens = 1e9 }]\n"),
              "exp.toml:10:32: cotune.batch_ramp[0].batch_tokens: 1000 is not a multiple of seq "
              "= 8192");
    EXPECT_EQ(error_of(study + "batch_ramp = [{ batch_tokens = 8192, until_tokens = 1e9 }, "
                               "{ batch_tokens = 8192, until_tokens = 2e9 }]\n"),
              "exp.toml:10:77: cotune.batch_ramp[1].batch_tokens: 8192 must be larger than the "
              "phase before's (8192)");
    EXPECT_EQ(error_of(study + "batch_ramp = [{ batch_tokens = 8192 }]\n"),
              "exp.toml:10:15: cotune.batch_ramp[0]: missing 'until_tokens'");
}

}  // namespace
