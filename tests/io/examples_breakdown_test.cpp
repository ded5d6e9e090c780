// `prism eval`'s breakdown adds up (issue #27 item 4): for every point of every example
// experiment shipped in configs/, the time lines sum to the step time. The step time comes from
// the pipeline schedule's DAG; the lines from the per-kernel accounting of the busiest stage
// and that stage's idle time, so a cost that lands on no line (as the LM head and loss did)
// fails here.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io/experiment_loader.hpp"
#include "src/model/design_space.hpp"
#include "src/model/deterministic.hpp"

namespace {

std::vector<std::filesystem::path> example_experiments() {
    const std::filesystem::path configs = std::filesystem::path(PRISM_SOURCE_DIR) / "configs";
    std::vector<std::filesystem::path> files{configs / "quickstart.toml"};
    for (const auto& entry : std::filesystem::recursive_directory_iterator(configs / "examples")) {
        // variability profiles (`prism trace fit` / `steps fit` output) sit beside the
        // experiments that use them; they are not experiments
        const std::string name = entry.path().filename().string();
        const bool profile = name.ends_with(".variability.toml");
        if (entry.path().extension() == ".toml" && !profile) files.push_back(entry.path());
    }
    return files;
}

TEST(ExampleBreakdowns, TimeLinesAddUpToTheStepTimeAtEveryPoint) {
    const auto files = example_experiments();
    ASSERT_GE(files.size(), 3u);

    for (const auto& file : files) {
        const prism::Experiment e = prism::io::load_experiment(file);
        const auto& dims = e.space.dimensions;
        std::vector<std::size_t> digits(dims.size(), 0);
        int evaluated = 0;
        for (bool more = true; more;) {
            bool not_divisible = false;
            const prism::DesignPoint p = prism::decode_point(e, digits, &not_divisible);
            if (!not_divisible && !prism::filter_reason(e, p)) {
                const auto r = prism::evaluate_deterministic(e, p);
                const auto& b = r.breakdown;

                EXPECT_NEAR(b.lines_sum_s(), r.step_time_s, 1e-9 * r.step_time_s)
                    << file.filename() << " " << prism::describe_point(e, p);
                for (double line :
                     {b.compute_s, b.tp_comm_exposed_s, b.cp_comm_exposed_s, b.fsdp_comm_exposed_s,
                      b.ep_comm_exposed_s, b.host_bound_s, b.embedding_s, b.head_s, b.bubble_s,
                      b.dp_sync_exposed_s, b.optimizer_s}) {
                    EXPECT_GE(line, 0.0) << file.filename();
                }
                if (b.stage == r.profile.stages - 1) {
                    EXPECT_GT(b.head_s, 0.0) << "the last stage's LM head has a line";
                }
                ++evaluated;
            }
            // next point, last dimension fastest
            more = false;
            for (std::size_t k = dims.size(); k-- > 0;) {
                if (++digits[k] < dims[k].values.size()) {
                    more = true;
                    break;
                }
                digits[k] = 0;
            }
        }
        std::printf("  %-28s %d points add up\n", file.filename().c_str(), evaluated);
        EXPECT_GT(evaluated, 0) << file.filename();
    }
}

}  // namespace
