// Per-point cost of a whole experiment by pipeline depth: every point the filters keep is
// evaluated as a sweep's worker evaluates it (Evaluator::evaluate, one core, in index order)
// and timed; the mean time per point is printed per pp, with the deterministic model alone
// (evaluate_deterministic) beside it, and the mean over the points that fit (status ok: those
// whose step-time distribution is computed; a point that does not fit costs its deterministic
// model only, and the share that fits differs by pp). A measurement, not a benchmark (one pass; run
// it twice when the machine is loaded).
//
//   ./cost_by_pp configs/examples/gpt3_175b_1024_space.toml

#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "explorer/design_space.hpp"
#include "io/experiment_loader.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/evaluate.hpp"

int main(int argc, char** argv) {
    using namespace prism;
    using Clock = std::chrono::steady_clock;
    if (argc < 2) {
        std::fprintf(stderr, "usage: cost_by_pp EXPERIMENT.toml\n");
        return 2;
    }
    try {
        const Experiment e = io::load_experiment(argv[1]);
        const explorer::DesignSpace space(e);
        const Evaluator evaluator(e);
        struct Cost {
            int points = 0, fitting = 0;
            double full_s = 0, deterministic_s = 0, fitting_s = 0;
        };
        std::map<int, Cost> by_pp;
        Cost all;
        for (std::uint64_t i = 0; i < space.size(); ++i) {
            const auto d = space.decode(i);
            if (d.filtered) continue;
            const auto t0 = Clock::now();
            const auto r = evaluate_deterministic(e, d.point);
            const auto t1 = Clock::now();
            const auto row = evaluator.evaluate(d.point, i, space.stream_index(i), nullptr);
            const auto t2 = Clock::now();
            (void)r;
            (void)row;
            auto& c = by_pp[d.point.pp];
            for (Cost* x : {&c, &all}) {
                x->points += 1;
                x->deterministic_s += std::chrono::duration<double>(t1 - t0).count();
                x->full_s += std::chrono::duration<double>(t2 - t1).count();
                if (row.status == PointStatus::ok) {
                    x->fitting += 1;
                    x->fitting_s += std::chrono::duration<double>(t2 - t1).count();
                }
            }
        }
        std::printf("%6s %8s %14s %14s %8s %16s\n", "pp", "points", "ms/point", "det ms/point",
                    "fitting", "ms/fitting point");
        auto line = [](const std::string& what, const Cost& c) {
            std::printf("%6s %8d %14.3f %14.4f %8d %16.3f\n", what.c_str(), c.points,
                        1e3 * c.full_s / c.points, 1e3 * c.deterministic_s / c.points, c.fitting,
                        c.fitting ? 1e3 * c.fitting_s / c.fitting : 0.0);
        };
        for (const auto& [pp, c] : by_pp) line(std::to_string(pp), c);
        line("all", all);
        std::printf("total %.2f s evaluating (%d points)\n", all.full_s, all.points);
    } catch (const std::exception& ex) {
        std::fprintf(stderr, "cost_by_pp: %s\n", ex.what());
        return 1;
    }
    return 0;
}
