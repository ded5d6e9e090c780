// Analytic vs Monte Carlo on every point of an experiment's design space (by default the
// quickstart's 288): the Kolmogorov-Smirnov distance between the analytic CDF and the empirical
// CDF of S Monte Carlo samples, and the largest relative error of the analytic p50/p95/p99
// against the Monte Carlo ones. Points the structural filters drop are skipped; points that do
// not fit in memory are measured anyway (their step would run the same way). A measurement, not
// a test: docs/model.md quotes its summary lines.
//   ./accuracy_experiment [experiment.toml = configs/quickstart.toml] [samples = 10000]
//                         [--transient-only]
// --transient-only removes the persistent factors (spatial cv 0, no slow GPUs): what is left is
// the transient noise and the communication regime. About 30 s for the quickstart at 10,000
// samples on one core. KS of an S-sample empirical CDF against its own true CDF exceeds
// 1.36 / sqrt(S) with probability 5% (0.0136 at S = 10,000).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "bench/compare.hpp"
#include "explorer/design_space.hpp"
#include "io/experiment_loader.hpp"
#include "src/model/design_space.hpp"
#include "src/model/deterministic.hpp"
#include "src/stochastic/step_distribution.hpp"

namespace {

struct Summary {
    std::vector<double> ks;
    double worst_q = 0;

    void add(double k, double q) {
        ks.push_back(k);
        worst_q = std::max(worst_q, q);
    }
    void print(const char* what) {
        if (ks.empty()) return;
        std::sort(ks.begin(), ks.end());
        const auto at = [&](double p) {
            return ks[static_cast<size_t>(p * static_cast<double>(ks.size() - 1))];
        };
        const auto over = std::count_if(ks.begin(), ks.end(), [](double k) { return k > 0.02; });
        std::printf(
            "%-28s %4zu points: KS median %.4f, p90 %.4f, max %.4f (%td above 0.02); "
            "p50/p95/p99 within %.2f%%\n",
            what, ks.size(), at(0.5), at(0.9), ks.back(), over, 100 * worst_q);
    }
};

}  // namespace

int main(int argc, char** argv) {
    using namespace prism;
    std::string path = std::string(PRISM_SOURCE_DIR) + "/configs/quickstart.toml";
    int samples = 10000;
    bool transient_only = false;
    int positional = 0;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--transient-only") == 0) {
            transient_only = true;
        } else if (positional++ == 0) {
            path = argv[i];
        } else {
            samples = std::atoi(argv[i]);
        }
    }
    if (samples < 100) {
        std::fprintf(stderr, "accuracy_experiment: samples must be at least 100\n");
        return 2;
    }
    Experiment ex;
    std::optional<explorer::DesignSpace> space;
    try {
        ex = io::load_experiment(path);
        space.emplace(ex);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "accuracy_experiment: %s\n", e.what());
        return 2;
    }
    if (transient_only) {
        ex.variability.persistent.spatial = DistributionSpec{};
        ex.variability.persistent.slow_probability = 0;
    }
    Summary all, lockstep_pp, rest;
    int handed_over = 0;      // points `method = "analytic"` evaluates by Monte Carlo
    std::uint64_t index = 0;  // the random streams' index: the count of points not filtered
    for (std::uint64_t i = 0; i < space->size(); ++i) {
        const auto decoded = space->decode(i);
        if (decoded.filtered) continue;
        const DesignPoint& pt = decoded.point;
        try {
            const auto profile = evaluate_deterministic(ex, pt).profile;
            const auto& hw = ex.hardware.at(static_cast<size_t>(pt.hardware));
            auto x = stochastic::monte_carlo_samples(profile, pt, hw, ex.cluster, ex.variability,
                                                     samples, ex.seed, index);
            std::sort(x.begin(), x.end());
            const double ks = bench::ks_to_samples(
                x, stochastic::analytic_cdf(profile, pt, hw, ex.cluster, ex.variability, x));
            const auto d = step_distribution(profile, pt, hw, ex.cluster, ex.variability,
                                             EvaluationSpec{}, ex.seed, index);
            const double err = bench::quantile_ratios(d, x).worst();
            handed_over += d.monte_carlo_fallback ? 1 : 0;
            std::printf("%4llu %-64s KS %.4f  quantiles within %.2f%%\n",
                        static_cast<unsigned long long>(index), describe_point(ex, pt).c_str(), ks,
                        100 * err);
            all.add(ks, err);
            (profile.dp_lockstep && pt.pp > 1 ? lockstep_pp : rest).add(ks, err);
        } catch (const std::exception& e) {
            std::printf("%4llu %-64s skipped: %s\n", static_cast<unsigned long long>(index),
                        describe_point(ex, pt).c_str(), e.what());
        }
        ++index;
    }
    std::printf("%s, %d Monte Carlo samples per point%s\n", path.c_str(), samples,
                transient_only ? ", persistent factors removed" : "");
    all.print("all points");
    std::printf("handed over to Monte Carlo (outside the analytic law's domain): %d points\n",
                handed_over);
    lockstep_pp.print("lockstep (ZeRO-3), pp > 1");
    rest.print("the others");
    return 0;
}
