// Monte Carlo per point, op by op (McPath::ops, the earlier path) against the rounds of
// PeriodicPipeline's program (McPath::rounds, the default): for each given point of an
// experiment, the thread CPU time of `samples` step draws (detail::monte_carlo, the sweep's
// model and layout, no hiccup layer) by each path, REPEAT times interleaved, their medians and
// ratio, and the two-sample KS distance between the paths' samples with its 1% critical value
// (both paths sample one law; their draws differ); and the whole verification of the point
// (verify_point: Monte Carlo by the default path, the analytic CDF and quantiles beside it).
//
//   ./mc_rounds EXPERIMENT.toml REPEAT SAMPLES INDEX...
// e.g. the GPT-3 175B / 1,024-A100 front's heaviest points:
//   ./mc_rounds configs/examples/gpt3_175b_1024_space.toml 3 1000 317972 207374 133910

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <vector>

#include "explorer/design_space.hpp"
#include "io/experiment_loader.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/evaluate.hpp"
#include "src/stochastic/detail/evaluators.hpp"

namespace {

double thread_cpu_s() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double median(std::vector<double> x) {
    std::sort(x.begin(), x.end());
    const std::size_t n = x.size();
    return n % 2 == 1 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

double ks_two_sample(std::vector<double> a, std::vector<double> b) {
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    std::size_t i = 0, j = 0;
    double d = 0;
    while (i < a.size() && j < b.size()) {
        const double t = std::min(a[i], b[j]);
        while (i < a.size() && a[i] <= t) ++i;
        while (j < b.size() && b[j] <= t) ++j;
        d = std::max(d, std::fabs(static_cast<double>(i) / static_cast<double>(a.size()) -
                                  static_cast<double>(j) / static_cast<double>(b.size())));
    }
    return d;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace prism;
    namespace sd = stochastic::detail;
    if (argc < 5) {
        std::fprintf(stderr, "usage: mc_rounds EXPERIMENT.toml REPEAT SAMPLES INDEX...\n");
        return 2;
    }
    try {
        const Experiment e = io::load_experiment(argv[1]);
        const int repeat = std::max(1, std::atoi(argv[2]));
        const int samples = std::max(2, std::atoi(argv[3]));
        const explorer::DesignSpace space(e);
        std::printf("%8s %4s %4s %4s %4s %9s %12s %12s %7s %7s %7s %10s\n", "index", "tp", "pp",
                    "v", "dp", "ops", "ops ms", "rounds ms", "ratio", "KS", "KS 1%", "verify ms");
        double sum_ops = 0, sum_rounds = 0, sum_verify = 0;
        for (int a = 4; a < argc; ++a) {
            const auto index = static_cast<std::uint64_t>(std::strtoull(argv[a], nullptr, 10));
            const auto d = space.decode(index);
            if (d.filtered) {
                std::fprintf(stderr, "mc_rounds: point %llu is filtered\n",
                             static_cast<unsigned long long>(index));
                return 2;
            }
            const auto det = evaluate_deterministic(e, d.point);
            if (!det.feasible) {
                std::fprintf(stderr, "mc_rounds: point %llu does not fit\n",
                             static_cast<unsigned long long>(index));
                return 2;
            }
            const auto& hw = e.hardware.at(static_cast<std::size_t>(d.point.hardware));
            VariabilitySpec v = e.variability;
            v.hiccup = HiccupSpec{};
            v.periodic.clear();
            const auto model = sd::build_step_model(det.profile, d.point, hw, e.cluster, v);
            const auto layout = sd::make_layout(model, d.point, hw, e.cluster);
            const auto stream = space.stream_index(index);
            std::vector<double> t_ops, t_rounds, t_verify, x_ops, x_rounds;
            for (int k = 0; k < repeat; ++k) {
                double t0 = thread_cpu_s();
                x_ops = sd::monte_carlo(model, layout, samples, e.seed, stream,
                                        sd::McSampler::automatic, sd::McPath::ops);
                double t1 = thread_cpu_s();
                t_ops.push_back(t1 - t0);
                t0 = thread_cpu_s();
                x_rounds = sd::monte_carlo(model, layout, samples, e.seed, stream,
                                           sd::McSampler::automatic, sd::McPath::rounds);
                t1 = thread_cpu_s();
                t_rounds.push_back(t1 - t0);
                t0 = thread_cpu_s();
                (void)verify_point(e, d.point, stream, {});
                t1 = thread_cpu_s();
                t_verify.push_back(t1 - t0);
            }
            const double mo = median(t_ops), mr = median(t_rounds), mv = median(t_verify);
            sum_verify += mv;
            sum_ops += mo;
            sum_rounds += mr;
            const double crit = 1.628 * std::sqrt(2.0 / samples);  // two-sample, alpha 1%
            std::printf("%8llu %4d %4d %4d %4d %9zu %12.1f %12.1f %7.2f %7.4f %7.4f %10.1f\n",
                        static_cast<unsigned long long>(index), d.point.tp, d.point.pp,
                        d.point.interleave, model.dp, model.flat().size(), 1e3 * mo, 1e3 * mr,
                        mo / mr, ks_two_sample(x_ops, x_rounds), crit, 1e3 * mv);
        }
        std::printf(
            "total: ops %.2f s, rounds %.2f s (%.2fx), whole verify_point %.2f s; thread CPU "
            "time, median of %d\n",
            sum_ops, sum_rounds, sum_ops / sum_rounds, sum_verify, repeat);
    } catch (const std::exception& ex) {
        std::fprintf(stderr, "mc_rounds: %s\n", ex.what());
        return 1;
    }
    return 0;
}
