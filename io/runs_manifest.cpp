#include "io/runs_manifest.hpp"

#include <fmt/format.h>

#include "io/detail/bounded_read.hpp"
#include "io/detail/toml_reader.hpp"
#include "io/work_limits.hpp"
#include "src/common/error.hpp"

namespace prism::io {

std::vector<RunsGroup> read_runs_manifest(const std::filesystem::path& path) {
    using namespace detail;
    const std::string text = read_bounded(path, kMaxExperimentFileBytes, "runs manifest");
    const toml::table file = parse_toml(text, path.string());
    check_keys(file, "", {"group"});
    const toml::node* groups = file.get("group");
    if (groups == nullptr) {
        throw ConfigError(
            fmt::format("{}: no [[group]] (each: experiment = \"x.toml\", runs = [\"a.csv\", ...])",
                        path.string()));
    }
    const std::filesystem::path dir = path.parent_path();
    std::vector<RunsGroup> out;
    const toml::array& list = as_array(*groups, "group");
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string key = fmt::format("group[{}]", i);
        const toml::table& g = as_table(list[i], key);
        check_keys(g, key, {"experiment", "runs"});
        for (const char* required : {"experiment", "runs"}) {
            if (g.get(required) == nullptr) {
                throw error_at(g.source(), fmt::format("{}: missing '{}'", key, required));
            }
        }
        RunsGroup group;
        group.experiment =
            (dir / as_string(*g.get("experiment"), join_key(key, "experiment"))).string();
        const toml::array& runs = as_array(*g.get("runs"), join_key(key, "runs"));
        if (runs.empty()) {
            fail_at(runs,
                    fmt::format("{}: empty list; give at least one run", join_key(key, "runs")));
        }
        for (const toml::node& r : runs) {
            group.runs.push_back((dir / as_string(r, join_key(key, "runs"))).string());
        }
        out.push_back(std::move(group));
    }
    return out;
}

}  // namespace prism::io
