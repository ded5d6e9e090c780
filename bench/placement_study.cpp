// Variability-aware placement against random and ordered placement (issue: "report the ratio,
// and over which configs"): p95 of the step under each placement over a matrix of shapes
// (no pipeline / pipeline 2-8 stages / FSDP), slow-node rates (0.5-2% of nodes, 1.5x slower)
// and spare nodes on the machine (0, 1, 8). The analytic evaluator for all, and with a sample
// count the Monte Carlo reference for random and aware placement too, with the analytic's
// error against it. Random placement draws the job's nodes at random (persistent.hpp): the
// ordered placement's distribution, so its column equals ordered's (the Monte Carlo one, through
// the dense sampler for FSDP, draws the scheduler's choice explicitly). Points the analytic
// evaluator hands over to Monte Carlo (docs/model.md) are evaluated with 1,000 draws and
// marked '*'. A measurement, not a benchmark:
//   ./placement_study [samples=0]
// The shapes are the tests' hand-built profiles (tests/src/stochastic/test_profiles.hpp), with
// the prism-paper-like variability in code.

#include <cstdio>
#include <cstdlib>

#include "src/stochastic/step_distribution.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace {

using namespace prism;

StepDistribution evaluate(const testing::ProfileShape& s, const VariabilitySpec& v,
                          PlacementKind kind, std::int64_t total_gpus, Method method, int samples) {
    const DesignPoint point = testing::design_point(s, kind);
    ClusterSpec cluster;
    cluster.total_gpus = total_gpus;
    EvaluationSpec eval;
    eval.method = method;
    eval.samples = samples;
    return step_distribution(testing::make_profile(s), point, testing::test_hardware(), cluster, v,
                             eval, 7, 0);
}

}  // namespace

int main(int argc, char** argv) {
    const int samples = argc > 1 ? std::atoi(argv[1]) : 0;
    struct Shape {
        const char* name;
        int tp, pp, dp, microbatches;
        bool fsdp;
    };
    const Shape shapes[] = {
        {"tp8 dp64", 8, 1, 64, 4, false},     {"tp8 pp4 dp16", 8, 4, 16, 8, false},
        {"tp8 pp8 dp8", 8, 8, 8, 16, false},  {"tp4 pp4 dp32", 4, 4, 32, 8, false},
        {"tp8 dp64 fsdp", 8, 1, 64, 4, true}, {"tp8 pp4 dp16 fsdp", 8, 4, 16, 8, true}};
    std::printf("%-18s %6s %5s | p95: %8s %8s %8s %8s | random/aware ordered/aware aware/clean",
                "shape", "slow", "spare", "clean", "random", "ordered", "aware");
    if (samples > 0) std::printf(" | MC random/aware, analytic error random aware");
    std::printf("\n");
    for (const auto& sh : shapes) {
        testing::ProfileShape s;
        s.tp = sh.tp;
        s.stages = sh.pp;
        s.dp = sh.dp;
        s.microbatches = sh.microbatches;
        s.fsdp = sh.fsdp;
        const std::int64_t job = static_cast<std::int64_t>(sh.tp) * sh.pp * sh.dp;
        const double clean =
            evaluate(s, testing::prism_like(0.0), PlacementKind::ordered, 0, Method::analytic, 1000)
                .p95_s;
        for (const double q : {0.005, 0.01, 0.02}) {
            for (const int spare_nodes : {0, 1, 8}) {
                const std::int64_t total = job + 8LL * spare_nodes;
                const auto v = testing::prism_like(q);
                bool handed_over = false;
                auto p95 = [&](PlacementKind k, Method m, int n) {
                    const auto d = evaluate(s, v, k, total, m, n);
                    handed_over = handed_over || d.monte_carlo_fallback;
                    return d.p95_s;
                };
                // 1,000 draws where the analytic evaluator hands the point over
                const double r = p95(PlacementKind::random, Method::analytic, 1000);
                const double o = p95(PlacementKind::ordered, Method::analytic, 1000);
                const double a = p95(PlacementKind::variability_aware, Method::analytic, 1000);
                std::printf("%-18s %5.1f%% %5d | %14.5f %8.5f %8.5f %8.5f | %12.3f %13.3f %11.3f%s",
                            sh.name, 100 * q, spare_nodes, clean, r, o, a, r / a, o / a, a / clean,
                            handed_over ? " *" : "");
                if (samples > 0) {
                    const double rm = p95(PlacementKind::random, Method::montecarlo, samples);
                    const double am =
                        p95(PlacementKind::variability_aware, Method::montecarlo, samples);
                    std::printf(" | %15.3f %+12.2f%% %+6.2f%%", rm / am, 100 * (r / rm - 1),
                                100 * (a / am - 1));
                }
                std::printf("\n");
            }
        }
    }
}
