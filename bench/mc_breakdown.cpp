// Where the Monte Carlo evaluator's time goes on the 26 configurations of the 405B-class sweep
// benchmark (points_405b.hpp): per configuration, the time of S samples (the step samples
// alone, without the cluster strata of step_distribution) and, from the pruning audit on the
// same samples, per sample: replicas drawn, replicas whose mean-duration makespan was computed
// exactly for their bound, the schedule passes that took (8 replicas per pass), and the rounds
// that revealed more healthy group factors. A measurement to plan the sampler's work, not a
// benchmark of record (stochastic_bench is).
//   ./mc_breakdown [samples = 1000]
// About 2 s per 1,000 samples on one core, and again as much for the audit.

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "bench/points_405b.hpp"
#include "src/stochastic/detail/evaluators.hpp"

int main(int argc, char** argv) {
    using namespace prism;
    const int samples = argc > 1 ? std::atoi(argv[1]) : 1000;
    if (samples < 1) {
        std::fprintf(stderr, "mc_breakdown: samples must be at least 1\n");
        return 2;
    }
    const bench::Sweep405B sweep;
    const auto v = bench::prism_paper(false);
    const auto& hw = sweep.base.experiment.hardware[0];
    const auto& cluster = sweep.base.experiment.cluster;
    std::printf("%3s %-28s %5s %9s %7s %8s %7s %7s %8s\n", "#", "configuration", "ops", "ms/point",
                "drawn", "bounded", "passes", "extend", "skipped");
    double total_ms = 0;
    for (size_t i = 0; i < sweep.points.size(); ++i) {
        const auto& pt = sweep.points[i];
        const auto model =
            stochastic::detail::build_step_model(sweep.profiles[i], pt, hw, cluster, v);
        const auto layout = stochastic::detail::make_layout(model, pt, hw, cluster);
        const auto t0 = std::chrono::steady_clock::now();
        stochastic::detail::monte_carlo(model, layout, samples, 2026, i);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        total_ms += ms;
        const auto c =
            stochastic::detail::check_monte_carlo_pruning(model, layout, samples, 2026, i);
        const auto per = [&](std::int64_t n) { return static_cast<double>(n) / samples; };
        std::printf("%3zu %-28s %5zu %9.2f %7.2f %8.2f %7.2f %7.2f %7.1f%%%s\n", i,
                    bench::label(pt).c_str(), model.flat().size(), ms, per(c.drawn), per(c.bounded),
                    per(c.dag_runs), per(c.extends),
                    100.0 * static_cast<double>(c.skipped) / static_cast<double>(c.replicas),
                    c.violations > 0 ? "  PRUNING VIOLATED" : "");
    }
    std::printf("mean %.2f ms per point for %d samples (%.1f points/s)\n",
                total_ms / static_cast<double>(sweep.points.size()), samples,
                1000.0 * static_cast<double>(sweep.points.size()) / total_ms);
    return 0;
}
