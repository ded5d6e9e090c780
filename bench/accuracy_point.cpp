// Analytic vs Monte Carlo on one point: an experiment's first point under a variability profile
// (preset name or file), with the persistent factors at 1 as `prism steps compare` takes a run
// (spatial spread and slow nodes dropped; --all keeps them). Prints both evaluators' mean, sd
// and quantiles, the KS distance of the analytic CDF to the samples, and with --cdf the two
// CDFs at every 40th of the samples. A measurement, not a test (docs/validation.md "Measured
// step-time distributions" and docs/limitations.md quote it).
//   ./accuracy_point EXPERIMENT.toml VARIABILITY [samples = 10000] [--all] [--cdf]
// KS of an S-sample empirical CDF against its own true CDF exceeds 1.36 / sqrt(S) with
// probability 5% (0.0136 at S = 10,000).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "bench/compare.hpp"
#include "io/experiment_loader.hpp"
#include "io/variability_profile.hpp"
#include "src/model/design_space.hpp"
#include "src/model/deterministic.hpp"
#include "src/stochastic/step_distribution.hpp"

int main(int argc, char** argv) try {
    using namespace prism;
    if (argc < 3) {
        std::fprintf(stderr,
                     "usage: accuracy_point EXPERIMENT.toml VARIABILITY [samples] [--all] "
                     "[--cdf]\n");
        return 2;
    }
    const Experiment e = io::load_experiment(argv[1]);
    VariabilitySpec v = io::load_variability(argv[2]);
    int samples = 10000;
    bool all = false, print_cdf = false;
    for (int i = 3; i < argc; ++i) {
        if (std::strcmp(argv[i], "--all") == 0) {
            all = true;
        } else if (std::strcmp(argv[i], "--cdf") == 0) {
            print_cdf = true;
        } else {
            samples = std::atoi(argv[i]);
        }
    }
    if (!all) {
        v.persistent.spatial = DistributionSpec{};
        v.persistent.slow_probability = 0;
    }
    const DesignPoint p = decode_point(e, std::vector<std::size_t>(e.space.dimensions.size(), 0));
    const DeterministicResult det = evaluate_deterministic(e, p);
    const HardwareSpec& hw = e.hardware.at(static_cast<std::size_t>(p.hardware));
    EvaluationSpec eval;
    eval.sensitivity = false;
    const StepDistribution a = step_distribution(det.profile, p, hw, e.cluster, v, eval, e.seed, 0);
    std::vector<double> mc =
        stochastic::monte_carlo_samples(det.profile, p, hw, e.cluster, v, samples, e.seed, 0);
    std::sort(mc.begin(), mc.end());
    const std::vector<double> cdf = stochastic::analytic_cdf(det.profile, p, hw, e.cluster, v, mc);
    const auto n = static_cast<double>(mc.size());
    const auto q = [&](double pr) { return mc[static_cast<std::size_t>(pr * (n - 1))]; };
    double mean = 0, var = 0;
    for (double x : mc) mean += x / n;
    for (double x : mc) var += (x - mean) * (x - mean) / (n - 1);
    std::printf("%s, %s: deterministic %.6f s\n", argv[1], argv[2], det.step_time_s);
    std::printf("%-12s %10s %10s %10s %10s %10s %10s %10s\n", "", "mean", "sd", "p50", "p90", "p95",
                "p99", "p99.9");
    std::printf("%-12s %10.6f %10.3e %10.6f %10.6f %10.6f %10.6f %10.6f\n", "analytic", a.mean_s,
                a.std_s, a.p50_s, a.p90_s, a.p95_s, a.p99_s, a.p999_s);
    std::printf("%-12s %10.6f %10.3e %10.6f %10.6f %10.6f %10.6f %10.6f\n", "Monte Carlo", mean,
                std::sqrt(var), q(0.5), q(0.9), q(0.95), q(0.99), q(0.999));
    std::printf("KS analytic vs %d Monte Carlo samples: %.4f\n", samples,
                bench::ks_to_samples(mc, cdf));
    if (print_cdf) {
        const std::size_t every = std::max<std::size_t>(1, mc.size() / 40);
        for (std::size_t k = 0; k < mc.size(); k += every) {
            std::printf("t %.6f  Monte Carlo %.4f  analytic %.4f\n", mc[k],
                        static_cast<double>(k) / n, cdf[k]);
        }
    }
    return 0;
} catch (const std::exception& ex) {
    std::fprintf(stderr, "accuracy_point: %s\n", ex.what());
    return 1;
}
