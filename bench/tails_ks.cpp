// Issue 35 must-show 3: the analytic evaluator against Monte Carlo with hiccups and a periodic
// event on, on the 405B point of stochastic_bench (Llama 3 405B on 16,384 H100s = 2,048 nodes,
// PRISM-paper variability with 1% slow nodes), through verify_monte_carlo (the check of
// `verify = "montecarlo"`): the KS distance of the analytic CDF to N Monte Carlo steps and the
// analytic / Monte Carlo - 1 of the mean, p95 and p99, without and with the tail terms
// (hiccups q = 1e-4 per node-step, median 0.2 s, sigma 1; a 0.8 s event every 100 steps, as
// BM_Analytic405BTails), for several seeds. KS of N exact draws to their own CDF has a 1%
// critical value of 1.63 / sqrt(N).
//   ./tails_ks [N = 10000] [SEEDS = 3]

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "bench/points_405b.hpp"
#include "src/stochastic/verify.hpp"

int main(int argc, char** argv) {
    using namespace prism;
    const int n = argc > 1 ? std::atoi(argv[1]) : 10000;
    const int seeds = argc > 2 ? std::atoi(argv[2]) : 3;
    if (n < 100 || seeds < 1) {
        std::fprintf(stderr, "usage: tails_ks [N >= 100] [SEEDS >= 1]\n");
        return 2;
    }
    const bench::Point405B p;
    EvaluationSpec eval;
    eval.samples = n;
    std::printf("%-6s %5s %8s %10s %10s %10s %10s %10s\n", "tails", "seed", "KS", "KS 1%",
                "mean diff", "p95 diff", "p99 diff", "p99 mc s");
    for (const bool tails : {false, true}) {
        auto v = bench::prism_paper(false);
        if (tails) {
            v.hiccup.probability = 1e-4;
            v.hiccup.delay_median_s = 0.2;
            v.hiccup.delay_sigma = 1.0;
            v.periodic = {{"gc", 100, 0.8}};
        }
        for (int s = 0; s < seeds; ++s) {
            const auto r = stochastic::verify_monte_carlo(
                p.profile, p.point, p.experiment.hardware[0], p.experiment.cluster, v, eval,
                2026 + static_cast<std::uint64_t>(s), 7);
            std::printf("%-6s %5d %8.4f %10.4f %9.3f%% %9.3f%% %9.3f%% %10.3f\n",
                        tails ? "on" : "off", s, r.ks, 1.63 / std::sqrt(static_cast<double>(n)),
                        100 * (r.analytic_mean_s / r.mc_mean_s - 1),
                        100 * (r.analytic_p95_s / r.mc_p95_s - 1),
                        100 * (r.analytic_p99_s / r.mc_p99_s - 1), r.mc_p99_s);
        }
    }
    return 0;
}
