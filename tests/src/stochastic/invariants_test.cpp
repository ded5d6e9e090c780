// DESIGN.md's invariants (section 2) as property tests over generated configurations
// (invariant_cases.hpp): Jensen, monotonicity, equivalences, agreement of the evaluators and
// finiteness, on seeded random cases. The soak run (bench/invariant_soak) takes more seeds.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/src/stochastic/invariant_checks.hpp"

namespace prism {
namespace {

/// Cases in CI (PRISM_INVARIANT_CASES overrides it).
int case_count() {
    const char* env = std::getenv("PRISM_INVARIANT_CASES");
    return env != nullptr ? std::atoi(env) : 240;
}

/// Cases where the analytic evaluator may be off by more than its tolerance (its stated
/// approximations; every such case is printed): measured 2026-11-27 at 31 of 240 cases, the
/// largest errors on interleaved pipelines with slow units (README, "Known limitations"). The
/// ceiling guards against regressions.
constexpr double kApproximationShareCeiling = 0.2;

TEST(StochasticInvariants, HoldOnGeneratedConfigurations) {
    const int cases = case_count();
    int model_failed = 0, approx_failed = 0;
    double ks_max = 0, q_max = 0;
    std::vector<double> ks_all, q_all;

    const char* only = std::getenv("PRISM_INVARIANT_SEED");  // one case, to investigate it
    for (int i = 0; i < cases; ++i) {
        if (only != nullptr && 1000 + i != std::atoi(only)) continue;
        const auto c = testing::random_case(1000 + i);
        testing::InvariantOptions opt;
        opt.samples = 1000;
        opt.monte_carlo = i % 2 == 0;  // Monte Carlo on every other case (its cost)
        double ks = -1, q = -1;
        std::vector<testing::Broken> bad;
        try {
            bad = testing::check_invariants(c, opt, &ks, &q);
        } catch (const std::exception& e) {  // an evaluation outside the first (masked, varied)
            bad.push_back({false, std::string("finiteness: ") + e.what()});
        }
        if (ks >= 0) ks_all.push_back(ks);
        if (q >= 0) q_all.push_back(q);
        ks_max = std::max(ks_max, ks);
        q_max = std::max(q_max, q);
        std::string model, approx;
        for (const auto& b : bad) (b.approximation ? approx : model) += "\n    " + b.text;
        if (!model.empty()) {
            ++model_failed;
            ADD_FAILURE() << c.text << model;
        }
        if (!approx.empty()) {
            ++approx_failed;
            std::printf("  analytic outside its tolerance: %s%s\n", c.text.c_str(), approx.c_str());
        }
    }
    std::sort(ks_all.begin(), ks_all.end());
    std::sort(q_all.begin(), q_all.end());
    auto median = [](const std::vector<double>& v) { return v.empty() ? 0.0 : v[v.size() / 2]; };
    std::printf(
        "  %d generated cases: %d break an invariant of the model, %d have the analytic "
        "evaluator outside its tolerance; against Monte Carlo (%zu cases) KS median %.4f max "
        "%.4f, mean/p50/p95/p99 worst median %.2f%% max %.2f%%\n",
        cases, model_failed, approx_failed, ks_all.size(), median(ks_all), ks_max,
        100 * median(q_all), 100 * q_max);
    EXPECT_EQ(model_failed, 0);
    EXPECT_LE(approx_failed, kApproximationShareCeiling * cases);
}

}  // namespace
}  // namespace prism
