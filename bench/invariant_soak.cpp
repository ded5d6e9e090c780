// The stochastic invariants' soak run: the property suite of tests/src/stochastic/invariants_test
// over many more generated cases (seeds FROM .. FROM + N), every case with Monte Carlo.
//   build/bench/invariant_soak [N=2000] [FROM=100000]
// SOAK_SAMPLES=n: each evaluation with n samples (default 1,000): a break that stays as the
// standard error shrinks is the model's, not Monte Carlo's noise.
// SOAK_WORST=n: also prints the n cases where the evaluators disagree most (worst of mean / p50 /
// p95 / p99), with their configuration.
// Prints the count of cases that break an invariant of the model (must be 0), of cases where the
// analytic evaluator is outside its tolerance (its stated approximations), the evaluators'
// agreement and the wall time.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "tests/src/stochastic/invariant_checks.hpp"

namespace {

/// SOAK_CASE=seed: one case's quantiles in both evaluators, and each quantile's disagreement as
/// a probability: the analytic CDF at Monte Carlo's quantile.
int show_case(int seed, int samples) {
    auto c = prism::testing::random_case(seed);
    if (const char* q = std::getenv("SOAK_SLOW_Q"))
        c.variability.persistent.slow_probability = std::atof(q);
    if (const char* m = std::getenv("SOAK_MICROBATCHES")) c.profile.microbatches = std::atoi(m);
    std::printf("%s\n", c.text.c_str());
    using prism::Method;
    const auto a = prism::testing::run(c, c.variability, Method::analytic, samples);
    auto x = prism::stochastic::monte_carlo_samples(c.profile, c.point, c.hardware, c.cluster,
                                                    c.variability, 4 * samples, 2026, 11);
    std::sort(x.begin(), x.end());
    const auto f = prism::stochastic::analytic_cdf(c.profile, c.point, c.hardware, c.cluster,
                                                   c.variability, x);
    double mean = 0;
    for (double t : x) mean += t / x.size();
    std::printf(
        "%s\n",
        prism::stochastic::analytic_hands_over(c.profile, c.point, c.hardware, c.variability)
            ? "method analytic: handed over to Monte Carlo (below: the analytic law's own)"
            : "method analytic: the analytic law");
    std::printf("deterministic %.6g s; mean: analytic %.6g, Monte Carlo %.6g (%+.2f%%)\n",
                prism::deterministic_step_time(c.profile), a.mean_s, mean,
                100 * (a.mean_s / mean - 1));
    for (auto [p, q] :
         {std::pair{0.5, a.p50_s}, std::pair{0.95, a.p95_s}, std::pair{0.99, a.p99_s}}) {
        const auto i = static_cast<size_t>(p * (x.size() - 1));
        std::printf("p%-4g analytic %.6g, Monte Carlo %.6g (%+.2f%%); analytic CDF there %.4f\n",
                    100 * p, q, x[i], 100 * (q / x[i] - 1), f[i]);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (const char* one = std::getenv("SOAK_CASE")) {
        return show_case(std::atoi(one), std::getenv("SOAK_SAMPLES")
                                             ? std::atoi(std::getenv("SOAK_SAMPLES"))
                                             : 1000);
    }
    const int n = argc > 1 ? std::atoi(argv[1]) : 2000;
    const int from = argc > 2 ? std::atoi(argv[2]) : 100000;
    const auto t0 = std::chrono::steady_clock::now();
    int model = 0, approx = 0;
    std::map<std::string, int> kinds;
    std::vector<double> ks, qs;
    std::vector<std::pair<double, std::string>> worst;  // (disagreement, case)
    for (int i = 0; i < n; ++i) {
        const auto c = prism::testing::random_case(from + i);
        prism::testing::InvariantOptions opt;
        opt.samples = std::getenv("SOAK_SAMPLES") ? std::atoi(std::getenv("SOAK_SAMPLES")) : 1000;
        double k = -1, q = -1;
        std::vector<prism::testing::Broken> bad;
        try {
            bad = prism::testing::check_invariants(c, opt, &k, &q);
        } catch (const std::exception& e) {
            bad.push_back({false, std::string("finiteness: ") + e.what()});
        }
        if (k >= 0) ks.push_back(k);
        if (q >= 0) qs.push_back(q);
        if (q >= 0) worst.emplace_back(q, std::to_string(from + i) + ": " + c.text);
        bool m = false, a = false;
        for (const auto& b : bad) {
            (b.approximation ? a : m) = true;
            kinds[(b.approximation ? "analytic " : "MODEL ") +
                  b.text.substr(0, b.text.find(':'))]++;
            if (!b.approximation) std::printf("MODEL %s\n    %s\n", c.text.c_str(), b.text.c_str());
        }
        model += m;
        approx += a;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::sort(ks.begin(), ks.end());
    std::sort(qs.begin(), qs.end());
    auto at = [](const std::vector<double>& v, double p) {
        return v.empty() ? 0.0 : v[static_cast<size_t>(p * (v.size() - 1))];
    };
    std::printf(
        "%d cases (seeds %d-%d) in %.1f s: %d break an invariant of the model, %d have the "
        "analytic evaluator outside its tolerance\n",
        n, from, from + n - 1, s, model, approx);
    for (const auto& [k, c] : kinds) std::printf("  %-28s %d\n", k.c_str(), c);
    std::printf(
        "agreement over %zu cases: KS median %.4f, p90 %.4f, max %.4f; worst of mean / p50 / "
        "p95 / p99 median %.2f%%, p90 %.2f%%, max %.2f%%\n",
        ks.size(), at(ks, 0.5), at(ks, 0.9), at(ks, 1.0), 100 * at(qs, 0.5), 100 * at(qs, 0.9),
        100 * at(qs, 1.0));
    const int shown = std::getenv("SOAK_WORST") ? std::atoi(std::getenv("SOAK_WORST")) : 0;
    std::sort(worst.rbegin(), worst.rend());
    for (int i = 0; i < shown && i < static_cast<int>(worst.size()); ++i) {
        std::printf("worst %d: %.2f%%  seed %s\n", i + 1, 100 * worst[i].first,
                    worst[i].second.c_str());
    }
    return model == 0 ? 0 : 1;
}
