#include "io/runs_manifest.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "src/common/error.hpp"

namespace prism::io {
namespace {

namespace fs = std::filesystem;

fs::path write_manifest(const std::string& name, const std::string& text) {
    const fs::path dir = fs::temp_directory_path() / "prism_runs_manifest_test";
    fs::create_directories(dir);
    const fs::path path = dir / name;
    std::ofstream(path) << text;
    return path;
}

std::string error_of(const fs::path& path) {
    try {
        read_runs_manifest(path);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "no error";
}

TEST(RunsManifest, ReadsGroupsWithPathsRelativeToTheManifest) {
    const fs::path path = write_manifest("ok.toml",
                                         "[[group]]\n"
                                         "experiment = \"a.toml\"\n"
                                         "runs = [\"r1.csv\", \"sub/r2.csv\"]\n"
                                         "[[group]]\n"
                                         "experiment = \"../b.toml\"\n"
                                         "runs = [\"r3.csv\"]\n");

    const std::vector<RunsGroup> groups = read_runs_manifest(path);

    ASSERT_EQ(groups.size(), 2u);
    EXPECT_EQ(groups[0].experiment, (path.parent_path() / "a.toml").string());
    EXPECT_EQ(groups[0].runs,
              (std::vector<std::string>{(path.parent_path() / "r1.csv").string(),
                                        (path.parent_path() / "sub/r2.csv").string()}));
    EXPECT_EQ(groups[1].experiment, (path.parent_path() / "../b.toml").string());
}

TEST(RunsManifest, BadManifestsNameTheFileLineColumnAndKey) {
    const fs::path missing = write_manifest("missing.toml", "[[group]]\nruns = [\"a.csv\"]\n");
    const fs::path empty =
        write_manifest("empty.toml", "[[group]]\nexperiment = \"a.toml\"\nruns = []\n");
    const fs::path none = write_manifest("none.toml", "# nothing\n");

    EXPECT_EQ(error_of(missing), missing.string() + ":1:1: group[0]: missing 'experiment'");
    EXPECT_EQ(error_of(empty),
              empty.string() + ":3:8: group[0].runs: empty list; give at least one run");
    EXPECT_EQ(error_of(none), none.string() +
                                  ": no [[group]] (each: experiment = \"x.toml\", runs = "
                                  "[\"a.csv\", ...])");
}

}  // namespace
}  // namespace prism::io
