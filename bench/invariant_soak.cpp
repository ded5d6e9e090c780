// The stochastic invariants' soak run: the property suite of tests/src/stochastic/invariants_test
// over many more generated cases (seeds FROM .. FROM + N), every case with Monte Carlo.
//   build/bench/invariant_soak [N=2000] [FROM=100000]
// SOAK_SAMPLES=n: each evaluation with n samples (default 1,000): a break that stays as the
// standard error shrinks is the model's, not Monte Carlo's noise.
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

int main(int argc, char** argv) {
    const int n = argc > 1 ? std::atoi(argv[1]) : 2000;
    const int from = argc > 2 ? std::atoi(argv[2]) : 100000;
    const auto t0 = std::chrono::steady_clock::now();
    int model = 0, approx = 0;
    std::map<std::string, int> kinds;
    std::vector<double> ks, qs;
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
    return model == 0 ? 0 : 1;
}
