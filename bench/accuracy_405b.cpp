// Analytic vs Monte Carlo on the 26 configurations of the 405B-class sweep benchmark
// (points_405b.hpp): Kolmogorov-Smirnov distance between the analytic CDF and the empirical CDF
// of S Monte Carlo samples, and the analytic quantiles over the Monte Carlo ones.
//   ./accuracy_405b [samples = 10000] [grid points = 257]
// About 15 s at 10,000 samples on one core. KS of an S-sample empirical CDF against its own
// true CDF exceeds 1.36 / sqrt(S) with probability 5% (0.0136 at S = 10,000).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/compare.hpp"
#include "bench/points_405b.hpp"

int main(int argc, char** argv) {
    using namespace prism;
    const int samples = argc > 1 ? std::atoi(argv[1]) : 10000;
    EvaluationSpec eval;  // the analytic evaluator; argv[2]: its grid points (default 257)
    if (argc > 2) eval.grid_points = std::atoi(argv[2]);
    if (samples < 100) {
        std::fprintf(stderr, "accuracy_405b: samples must be at least 100\n");
        return 2;
    }
    const bench::Sweep405B sweep;
    const auto v = bench::prism_paper(false);
    const auto& hw = sweep.base.experiment.hardware[0];
    const auto& cluster = sweep.base.experiment.cluster;
    std::vector<double> ks_all;
    double worst_q = 0;
    std::printf("%3s %-28s %7s %9s %9s %9s\n", "#", "configuration", "KS", "p50 a/mc", "p95 a/mc",
                "p99 a/mc");
    for (size_t i = 0; i < sweep.points.size(); ++i) {
        const auto& pt = sweep.points[i];
        const auto& profile = sweep.profiles[i];
        auto x = stochastic::monte_carlo_samples(profile, pt, hw, cluster, v, samples, 2026, i);
        std::sort(x.begin(), x.end());
        const auto f = stochastic::analytic_cdf(profile, pt, hw, cluster, v, x, eval.grid_points);
        const double ks = bench::ks_to_samples(x, f);
        const auto d = step_distribution(profile, pt, hw, cluster, v, eval, 2026, i);
        const auto r = bench::quantile_ratios(d, x);
        worst_q = std::max(worst_q, r.worst());
        ks_all.push_back(ks);
        std::printf("%3zu %-28s %7.4f %9.4f %9.4f %9.4f\n", i, bench::label(pt).c_str(), ks, r.p50,
                    r.p95, r.p99);
    }
    std::sort(ks_all.begin(), ks_all.end());
    std::printf("KS: median %.4f, max %.4f; quantiles within %.2f%%\n", ks_all[ks_all.size() / 2],
                ks_all.back(), 100 * worst_q);
}
