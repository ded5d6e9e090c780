#include "explorer/pruning.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "explorer/design_space.hpp"
#include "explorer/pareto.hpp"
#include "io/experiment_loader.hpp"
#include "src/model/bounds.hpp"
#include "src/model/evaluate.hpp"
#include "tests/explorer/brute_dominance.hpp"

namespace prism::explorer {
namespace {

using truth::brute_dominates;

TEST(ParetoArchive, DominatedAsksWhetherAnyInsertedRowDominates) {
    // truth: every inserted row checked by the definition (ties and duplicates on a coarse
    // grid; two objectives use the ordered set, three the scan)
    std::mt19937_64 rng(5);
    std::uniform_int_distribution<int> grid(0, 6);
    for (const auto& maximize : {std::vector<bool>{false, false}, std::vector<bool>{false, true},
                                 std::vector<bool>{false, true, false}}) {
        ParetoArchive archive(maximize);
        std::vector<std::vector<double>> rows;
        for (int i = 0; i < 60; ++i) {
            std::vector<double> q(maximize.size());
            for (auto& x : q) x = grid(rng);
            bool want = false;
            for (const auto& r : rows) want = want || brute_dominates(r, q, maximize);

            EXPECT_EQ(archive.dominated(q.data()), want) << "query " << i;

            std::vector<double> r(maximize.size());
            for (auto& x : r) x = grid(rng);
            rows.push_back(r);
            archive.insert(static_cast<std::uint64_t>(i), r);
        }
    }
}

Experiment quickstart() {
    return io::load_experiment(std::string(PRISM_SOURCE_DIR) + "/configs/quickstart.toml");
}

TEST(Pruning, IsOffWithoutABoundForEveryObjective) {
    Experiment e = quickstart();
    e.objectives = {{"step_time_std_s", false}, {"gpus", false}};
    const Evaluator evaluator(e);

    const Pruning pruning(e, evaluator.schema());

    EXPECT_FALSE(pruning.enabled());
    EXPECT_EQ(pruning.off_reason(),
              "objective minimize step_time_std_s has no lower bound from the deterministic model");
}

TEST(Pruning, ABrokenBoundTurnsItOff) {
    const Experiment e = quickstart();
    const Evaluator evaluator(e);
    Pruning pruning(e, evaluator.schema());
    ASSERT_TRUE(pruning.enabled());
    const auto& schema = evaluator.schema();
    PointResult row;
    row.index = 7;
    row.values.assign(schema.size(), kNaN);
    row.values[find_metric(schema, "step_time_s")] = 10.0;
    row.values[find_metric(schema, "gpus")] = 256.0;
    row.values[find_metric(schema, "steps_total")] = 1000.0;
    row.values[find_metric(schema, "step_time_p95_s")] = 9.0;  // below the deterministic step
    row.values[find_metric(schema, "gpu_hours_mean")] = 1e9;

    const bool held = pruning.check(row);

    EXPECT_FALSE(held);
    EXPECT_TRUE(pruning.violated());
    EXPECT_EQ(pruning.violation().first, 7u);
    EXPECT_EQ(pruning.violation().second, "step_time_p95_s = 9 below its bound 10");
    EXPECT_FALSE(pruning.dominated({1e9, 1e18}));  // no more pruning
}

// The quickstart's points screened and evaluated in full (analytic); the pilot (the front of
// the bounds) prunes the others. Truth: the front of all points (every one evaluated,
// pareto_front) and the definition of dominance.
TEST(Pruning, ThePilotsFrontPrunesOnlyDominatedPointsAndKeepsTheFront) {
    const Experiment e = quickstart();
    const DesignSpace space(e);
    const Evaluator evaluator(e);
    Pruning pruning(e, evaluator.schema());
    ASSERT_TRUE(pruning.enabled());
    struct Point {
        std::uint64_t index;
        std::vector<double> bounds, objectives;
        PointResult full;
    };
    std::vector<Point> points;
    for (std::uint64_t i = 0; i < space.size(); ++i) {
        const auto d = space.decode(i);
        if (d.filtered) continue;
        const auto screened = evaluator.screen(d.point, i, space.stream_index(i));
        if (screened.status != PointStatus::dominated) continue;  // infeasible
        auto full = evaluator.evaluate(d.point, i, space.stream_index(i), nullptr);
        ASSERT_EQ(full.status, PointStatus::ok);
        EXPECT_TRUE(pruning.check(full)) << i;
        points.push_back({i, pruning.bounds(screened), pruning.objectives(full), full});
    }
    const std::vector<bool> maximize{false, false};
    std::vector<std::vector<double>> table, bound_table;
    for (const auto& p : points) {
        table.push_back(p.objectives);
        bound_table.push_back(p.bounds);
    }
    std::set<std::uint64_t> front;
    for (const auto r : pareto_front(table, maximize)) front.insert(points[r].index);
    std::vector<PointResult> pilot;
    for (const auto r : pareto_front(bound_table, maximize)) pilot.push_back(points[r].full);

    pruning.set_pilot(pilot);

    std::vector<std::vector<double>> kept;
    std::vector<std::uint64_t> kept_index;
    int skipped = 0;
    for (const auto& p : points) {
        if (pruning.dominated(p.bounds)) {
            ++skipped;
            // dominated indeed, by the definition, and not on the front
            bool by_some = false;
            for (const auto& q : points) {
                by_some = by_some || brute_dominates(q.objectives, p.objectives, maximize);
            }
            EXPECT_TRUE(by_some) << p.index;
            EXPECT_EQ(front.count(p.index), 0u) << p.index;
            continue;
        }
        kept.push_back(p.objectives);
        kept_index.push_back(p.index);
    }
    std::set<std::uint64_t> pruned_front;
    for (const auto r : pareto_front(kept, maximize)) pruned_front.insert(kept_index[r]);
    EXPECT_EQ(pruned_front, front);
    EXPECT_GT(skipped, static_cast<int>(points.size()) / 2);  // the quickstart prunes
}

// With scenario dimensions (here the GPU count, as if it were not ours to choose) a point is
// pruned only by a point of its own scenario, and the pruned sweep's fronts are the fronts of
// each scenario. Truth: pareto_front over each scenario's fully evaluated points, and the
// definition of dominance within a scenario.
TEST(Pruning, WithScenariosPrunesWithinAScenarioOnly) {
    Experiment e = quickstart();
    e.space.scenarios = {"gpus"};
    const DesignSpace space(e);
    const Evaluator evaluator(e);
    const ScenarioKey key(e);
    Pruning pruning(e, evaluator.schema());
    ASSERT_TRUE(pruning.enabled());
    ASSERT_EQ(key.count(), 3u);
    ASSERT_EQ(pruning.width(), 4u);  // two objectives and the scenario twice
    struct Point {
        std::uint64_t index;
        std::uint64_t scenario;
        std::vector<double> bounds, objectives;  // as Pruning gives them (augmented)
        PointResult full;
    };
    std::vector<Point> points;
    for (std::uint64_t i = 0; i < space.size(); ++i) {
        const auto d = space.decode(i);
        if (d.filtered) continue;
        const auto screened = evaluator.screen(d.point, i, space.stream_index(i));
        if (screened.status != PointStatus::dominated) continue;  // infeasible
        auto full = evaluator.evaluate(d.point, i, space.stream_index(i), nullptr);
        ASSERT_EQ(full.status, PointStatus::ok);
        points.push_back({i, key.of(i), pruning.bounds(screened), pruning.objectives(full), full});
    }
    const std::vector<bool> maximize{false, false};
    const auto real = [](const std::vector<double>& v) {
        return std::vector<double>(v.begin(), v.begin() + 2);
    };
    // per scenario: the front of its points, and the pilot: the front of its bounds
    std::set<std::uint64_t> front;
    std::vector<PointResult> pilot;
    for (std::uint64_t s = 0; s < key.count(); ++s) {
        std::vector<std::vector<double>> table, bound_table;
        std::vector<const Point*> members;
        for (const auto& p : points) {
            if (p.scenario != s) continue;
            members.push_back(&p);
            table.push_back(real(p.objectives));
            bound_table.push_back(real(p.bounds));
        }
        for (const auto r : pareto_front(table, maximize)) front.insert(members[r]->index);
        for (const auto r : pareto_front(bound_table, maximize)) pilot.push_back(members[r]->full);
    }
    pruning.set_pilot(pilot);

    std::map<std::uint64_t, std::vector<std::vector<double>>> kept;
    std::map<std::uint64_t, std::vector<std::uint64_t>> kept_index;
    int skipped = 0;
    for (const auto& p : points) {
        if (pruning.dominated(p.bounds)) {
            ++skipped;
            bool by_same = false;
            for (const auto& q : points) {
                by_same =
                    by_same || (q.scenario == p.scenario &&
                                brute_dominates(real(q.objectives), real(p.objectives), maximize));
            }
            EXPECT_TRUE(by_same) << p.index;
            EXPECT_EQ(front.count(p.index), 0u) << p.index;
            continue;
        }
        kept[p.scenario].push_back(real(p.objectives));
        kept_index[p.scenario].push_back(p.index);
    }
    std::set<std::uint64_t> pruned_front;
    for (const auto& [s, table] : kept) {
        for (const auto r : pareto_front(table, maximize)) pruned_front.insert(kept_index[s][r]);
    }
    EXPECT_EQ(pruned_front, front);
    EXPECT_GT(skipped, 0);
    // every scenario has its own front: 256, 512 and 1024 GPUs are each represented
    std::set<std::uint64_t> scenarios_on_front;
    for (const auto i : front) scenarios_on_front.insert(key.of(i));
    EXPECT_EQ(scenarios_on_front.size(), 3u);
}

TEST(Pruning, ThePilotIsTheFrontOfTheBounds) {
    // truth: pareto_front over every feasible point's bounds (the quickstart is screened whole)
    const Experiment e = quickstart();
    const DesignSpace space(e);
    const Evaluator evaluator(e);
    const Pruning pruning(e, evaluator.schema());
    std::vector<std::vector<double>> table;
    std::vector<std::uint64_t> index;
    for (std::uint64_t i = 0; i < space.size(); ++i) {
        const auto d = space.decode(i);
        if (d.filtered) continue;
        const auto s = evaluator.screen(d.point, i, space.stream_index(i));
        if (s.status != PointStatus::dominated) continue;
        table.push_back(pruning.bounds(s));
        index.push_back(i);
    }
    std::vector<std::uint64_t> want;
    for (const auto r : pareto_front(table, {false, false})) want.push_back(index[r]);

    const PilotProbe probe = probe_pilot(space, evaluator, pruning, 100000, 1000, 1, true);

    EXPECT_TRUE(probe.whole_space);
    EXPECT_EQ(probe.bounds.size(), index.size());
    EXPECT_EQ(probe.pilot, want);
    const PilotProbe few = probe_pilot(space, evaluator, pruning, 100000, 2, 1, false);
    EXPECT_EQ(few.pilot, std::vector<std::uint64_t>(want.begin(), want.begin() + 2));
}

// Every bound of bounds.hpp against the analytic evaluator's values, on every quickstart point
// and a spread of the GPT-3 175B / 1024-A100 space (pp 1-32, interleaved and not, ZeRO 0-3;
// bench/bound_check runs the whole space: none broken, worst p95 / deterministic 1.050).
TEST(Pruning, TheBoundsHoldForTheAnalyticEvaluator) {
    Experiment gpt3 = io::load_experiment(std::string(PRISM_SOURCE_DIR) +
                                          "/configs/examples/gpt3_175b_1024_space.toml");
    gpt3.evaluation.sensitivity = false;
    for (const Experiment& e : {quickstart(), gpt3}) {
        const DesignSpace space(e);
        const Evaluator evaluator(e);
        const MetricSchema& schema = evaluator.schema();
        int checked = 0;
        // the quickstart whole, the GPT-3 space one filtered point in 97 (~200 points)
        const std::uint64_t stride = space.size() < 1000 ? 1 : 97 * 17;
        for (std::uint64_t i = 0, kept = 0; i < space.size(); ++i) {
            const auto d = space.decode(i);
            if (d.filtered || (stride > 1 && kept++ % 97 != 0)) continue;
            const auto screened = evaluator.screen(d.point, i, space.stream_index(i));
            if (screened.status != PointStatus::dominated) continue;
            const auto full = evaluator.evaluate(d.point, i, space.stream_index(i), nullptr);
            for (std::size_t m = 0; m < schema.size(); ++m) {
                const BoundKind kind = metric_bound_kind(schema[m].name);
                const double b = metric_bound(schema, screened.values, schema[m].name);
                const double v = full.values[m];
                if (kind == BoundKind::none || std::isnan(b) || std::isnan(v)) continue;
                ++checked;
                if (kind == BoundKind::exact) {
                    EXPECT_EQ(v, b) << schema[m].name << " at " << i;
                } else if (kind == BoundKind::lower) {
                    EXPECT_GE(v, b * (1 - 1e-12)) << schema[m].name << " at " << i;
                } else {
                    EXPECT_LE(v, b * (1 + 1e-12)) << schema[m].name << " at " << i;
                }
            }
        }
        EXPECT_GT(checked, 1000) << e.name;
    }
}

}  // namespace
}  // namespace prism::explorer
