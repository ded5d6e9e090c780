// The experiment's identity for --resume: the parsed experiment and the profile files it reads.

#include "io/experiment_fingerprint.hpp"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "io/experiment_loader.hpp"
#include "io/sha256.hpp"
#include "loader_test_helpers.hpp"

namespace prism::io {
namespace {

namespace fs = std::filesystem;

const std::string kProfile =
    "name = \"fitted\"\n"
    "description = \"a profile as prism steps fit writes it\"\n"
    "gemm = {dist = \"lognormal\", cv = 0.03}\n";

class ExperimentFingerprint : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("prism_fingerprint_" +
                std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    void write(const std::string& name, const std::string& text) const {
        std::ofstream(dir_ / name, std::ios::binary) << text;
    }
    /// The fingerprint a sweep records for exp.toml in the test's directory.
    std::string fingerprint_of_file() const {
        const Experiment e = load_experiment(dir_ / "exp.toml");
        return experiment_fingerprint(e.text, e.included);
    }

    fs::path dir_;
};

const std::string kWithProfile =
    test::kBaseExperiment + "[variability]\npreset = \"fitted.variability.toml\"\n";

TEST_F(ExperimentFingerprint, LayoutAndCommentsDoNotChangeItValuesDo) {
    const std::string text = test::kBaseExperiment;
    const std::string relaid =
        "# a comment\n[hardware.h100]\npreset   =   \"h100-sxm\"\n"
        "[training]\nglobal_batch = 512 # the batch\n"
        "[model]\npreset = \"llama3-8b\"\n";
    std::string changed = text;
    changed.replace(changed.find("512"), 3, "1024");

    EXPECT_EQ(experiment_fingerprint(text), experiment_fingerprint(relaid));
    EXPECT_NE(experiment_fingerprint(text), experiment_fingerprint(changed));
    // 1e11 and 1.0e11 are one value.
    EXPECT_EQ(experiment_fingerprint(text + "[x]\nv = 1e11\n"),
              experiment_fingerprint(text + "[x]\nv = 1.0e11\n"));
}

TEST_F(ExperimentFingerprint, WithoutIncludedFilesItIsTheExperimentsOwn) {
    write("exp.toml", test::kBaseExperiment);
    const Experiment e = load_experiment(dir_ / "exp.toml");

    EXPECT_TRUE(e.included.empty());
    EXPECT_EQ(experiment_fingerprint(e.text, e.included), experiment_fingerprint(e.text));
    EXPECT_EQ(experiment_fingerprint(e.text).size(), 64U);
}

TEST_F(ExperimentFingerprint, AProfileFileIsPartOfTheExperiment) {
    write("exp.toml", kWithProfile);
    write("fitted.variability.toml", kProfile);
    const Experiment e = load_experiment(dir_ / "exp.toml");

    ASSERT_EQ(e.included.size(), 1U);
    EXPECT_EQ(e.included[0].name, "fitted.variability.toml");
    EXPECT_EQ(e.included[0].text, kProfile);
    EXPECT_NE(experiment_fingerprint(e.text, e.included), experiment_fingerprint(e.text));
}

TEST_F(ExperimentFingerprint, EditingAProfilesValuesChangesItAndACommentDoesNot) {
    write("exp.toml", kWithProfile);
    write("fitted.variability.toml", kProfile);
    const std::string original = fingerprint_of_file();

    write("fitted.variability.toml", "# refitted later, same values\n" + kProfile);
    EXPECT_EQ(fingerprint_of_file(), original);

    std::string wider = kProfile;
    wider.replace(wider.find("0.03"), 4, "0.05");
    write("fitted.variability.toml", wider);
    EXPECT_NE(fingerprint_of_file(), original);
}

}  // namespace
}  // namespace prism::io
