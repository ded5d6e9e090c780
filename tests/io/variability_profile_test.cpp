#include "io/variability_profile.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "io/work_limits.hpp"
#include "src/common/error.hpp"

namespace prism::io {
namespace {

namespace fs = std::filesystem;

fs::path scratch_dir() {
    const fs::path dir = fs::temp_directory_path() / "prism_variability_profile_test";
    fs::create_directories(dir);
    return dir;
}

std::string write(const std::string& name, const std::string& text) {
    const std::string path = (scratch_dir() / name).string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    return path;
}

std::string message_of(const std::string& preset_or_path) {
    try {
        load_variability(preset_or_path);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "no error";
}

// Issue 33, item 10: a directory or an empty file as a profile was silently "no variability".
TEST(VariabilityProfile, RefusesDirectoriesAndEmptyFiles) {
    const fs::path dir = scratch_dir() / "dir.toml";
    fs::create_directories(dir);
    const std::string empty = write("empty.toml", "");
    const std::string blank = write("blank.toml", "\n  \n");

    EXPECT_EQ(message_of(dir.string()),
              dir.string() + ": is a directory, not a variability profile");
    EXPECT_EQ(message_of(empty),
              empty +
                  ": empty variability profile (a profile sets at least one kernel class; for "
                  "no variability use the preset 'none')");
    EXPECT_EQ(message_of(blank).rfind(blank + ": empty variability profile", 0), 0u);
}

// Issue 33, item 7: a profile linked to /dev/urandom took 11-15 GB. Profiles are read with the
// experiment file's limit, 1 MiB.
TEST(VariabilityProfile, ReadsAtMostTheLimit) {
    const fs::path link = scratch_dir() / "urandom.toml";
    fs::remove(link);
    fs::create_symlink("/dev/urandom", link);
    const std::string big = write("big.toml", "# a comment\n");
    fs::resize_file(big, kMaxProfileFileBytes + 1);

    EXPECT_EQ(message_of(link.string()),
              link.string() +
                  ": larger than 1048576 bytes, the limit for a variability profile (is it the "
                  "right file?)");
    EXPECT_EQ(message_of(big).rfind(big + ": larger than 1048576 bytes", 0), 0u);
}

// Issue 33, item 13: a newline in --note, a carriage return in --name or a newline in a run's
// file name made `steps fit` write a profile that does not load. Every string and comment is
// escaped; the profile loads back with the same values.
TEST(VariabilityProfile, EscapesLineBreaksAndControlCharactersInStringsAndComments) {
    VariabilityProfile p;
    p.spec = load_variability("prism-paper");
    p.name = "fitted\rname \"quoted\" back\\slash";
    p.source = "runs a.csv, b\nc.csv";
    p.description = "tab\there, bell\a";
    p.header = {"note one\nnote two", "carriage\r\nreturn", "bell\a"};
    p.regime_notes = {"file b\nc.csv"};
    const std::string path = write("escaped.toml", format_variability_profile(p));

    const VariabilitySpec back = load_variability(path);

    EXPECT_EQ(back.comm_regime.cv, p.spec.comm_regime.cv);
    EXPECT_EQ(back.transient[0].cv, p.spec.transient[0].cv);
    const std::string text = format_variability_profile(p);
    EXPECT_NE(text.find("name = \"fitted\\rname \\\"quoted\\\" back\\\\slash\"\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("# note one\n# note two\n"), std::string::npos) << text;
    EXPECT_NE(text.find("# carriage\n# return\n"), std::string::npos) << text;
    EXPECT_NE(text.find("# bell?\n"), std::string::npos) << text;
    EXPECT_NE(text.find("description = \"tab\\there, bell\\u0007\""), std::string::npos) << text;
}

// A base profile's workload terms (MoE routing skew and drift, document packing) survive a
// profile written from it (prism steps fit / trace fit --base): the writer dropped them before.
TEST(VariabilityProfile, AWrittenProfileKeepsItsRoutingAndDocuments) {
    VariabilityProfile p;
    p.spec = load_variability("prism-paper");
    p.name = "with-workload";
    p.source = "test";
    p.spec.routing_skew = 0.35;
    p.spec.routing_drift = 0.12;
    p.spec.documents.concat = true;
    p.spec.documents.median_tokens = 1500;
    p.spec.documents.sigma = 1.1;
    p.spec.documents.source = "a \"quoted\" corpus";
    const std::string path = write("workload.toml", format_variability_profile(p));

    const VariabilitySpec back = load_variability(path);

    EXPECT_EQ(back.routing_skew, 0.35);
    EXPECT_EQ(back.routing_drift, 0.12);
    EXPECT_EQ(back.documents, p.spec.documents);
}

}  // namespace
}  // namespace prism::io
