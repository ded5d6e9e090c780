// Monte Carlo on the rounds of PeriodicPipeline's program (McPath::rounds, the default) against
// the op-by-op DAG (McPath::ops, the earlier path): two ways of running one law (every op and
// transfer its own clamped normal given (g, R)), which take the stream's normals in another
// order. Their samples must be two samples of one distribution: two-sample KS below its
// critical value at alpha = 1e-4 for the sample sizes, and means within 5 standard errors, on
// schedules with and without rounds (1F1B, interleaved, fewer microbatches than stages), one or
// many replicas (dense and sparse samplers, lockstep FSDP), slow units, hiccups and periodic
// events (the layer added after either path) -- and the same test tells two schedules that
// differ by a few microbatches apart.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "src/stochastic/detail/evaluators.hpp"
#include "src/stochastic/detail/hiccup.hpp"
#include "tests/src/stochastic/ks.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace prism {
namespace {

using testing::ks_two_sample;
namespace detail = stochastic::detail;

struct Case {
    std::string name;
    int tp, pp, chunks, dp, microbatches;
    bool fsdp = false;
    double slow = 0;  ///< slow-node probability (1.5x)
    bool hiccups = false;
};

/// `samples` steps of case c by `path` (with its hiccups and periodic events, as
/// monte_carlo_samples adds them).
std::vector<double> steps(const Case& c, int microbatches, detail::McPath path, int samples,
                          std::uint64_t point_index) {
    const auto hw = testing::test_hardware();
    testing::ProfileShape shape = testing::pipeline_shape(c.tp, c.pp, c.dp, microbatches, c.fsdp);
    shape.chunks = c.chunks;
    const auto profile = testing::make_profile(shape);
    VariabilitySpec var = testing::prism_like(c.slow);
    DesignPoint point = testing::design_point(shape);
    point.interleave = c.chunks;
    const auto model = detail::build_step_model(profile, point, hw, {}, var);
    const auto layout = detail::make_layout(model, point, hw, {});
    auto x = detail::monte_carlo(model, layout, samples, 11, point_index,
                                 detail::McSampler::automatic, path);
    if (c.hiccups) {
        HiccupSpec h;
        h.probability = 0.02;
        h.delay_median_s = 0.01;
        h.delay_sigma = 0.8;
        const std::vector<PeriodicEvent> periodic = {{"gc", 50, 0.02}};
        const detail::HiccupLaw law(h, detail::job_nodes(point, hw), periodic);
        EXPECT_TRUE(law.active());
        detail::add_hiccups(x, law, 11, point_index);
    }
    return x;
}

double mean(const std::vector<double>& x) {
    return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

double variance(const std::vector<double>& x) {
    const double m = mean(x);
    double s = 0;
    for (const double v : x) s += (v - m) * (v - m);
    return s / static_cast<double>(x.size() - 1);
}

/// The two-sample KS critical value at alpha = 1e-4: c(alpha) sqrt(2 / n) for n steps each,
/// c = sqrt(-ln(alpha / 2) / 2) = 2.225.
double ks_critical(int n) { return 2.225 * std::sqrt(2.0 / n); }

const std::vector<Case>& cases() {
    static const std::vector<Case> all = {
        {"1f1b one replica", 8, 4, 1, 1, 8},
        {"1f1b deep", 4, 16, 1, 1, 48},
        {"interleaved v2", 8, 4, 2, 1, 8},
        {"interleaved v4", 8, 4, 4, 1, 16},
        {"fewer microbatches than stages", 8, 8, 1, 1, 3},
        {"one stage, data parallel", 8, 1, 1, 16, 4},
        {"replicas with slow nodes (sparse)", 4, 4, 1, 16, 16, false, 0.05},
        {"interleaved replicas with slow nodes", 4, 4, 2, 8, 8, false, 0.03},
        {"fsdp lockstep", 8, 2, 1, 4, 4, true, 0.02},
        {"hiccups and periodic events", 8, 4, 2, 4, 8, false, 0.01, true},
        {"1f1b with hiccups", 4, 8, 1, 2, 16, false, 0.0, true},
    };
    return all;
}

TEST(McRounds, SamplesTheLawOfTheOpByOpPath) {
    constexpr int kSamples = 4000;
    std::uint64_t index = 0;
    for (const auto& c : cases()) {
        SCOPED_TRACE(c.name);
        ++index;
        const auto ops = steps(c, c.microbatches, detail::McPath::ops, kSamples, index);
        // other streams (point index) for the second sample: two independent samples, as the
        // two-sample KS critical value assumes (the same streams would share the cluster
        // realizations and the regime draws, and the test would compare less than the law)
        const auto rounds =
            steps(c, c.microbatches, detail::McPath::rounds, kSamples, index + 1000);
        const double ks = ks_two_sample(ops, rounds);
        const double se = std::sqrt((variance(ops) + variance(rounds)) / kSamples);
        std::printf("  %-38s KS %.4f (bound %.4f), mean difference %.2f standard errors\n",
                    c.name.c_str(), ks, ks_critical(kSamples),
                    std::fabs(mean(ops) - mean(rounds)) / se);
        EXPECT_LT(ks, ks_critical(kSamples));
        EXPECT_LT(std::fabs(mean(ops) - mean(rounds)), 5 * se);
        // the draws are not the same: the paths take the stream's normals in another order
        EXPECT_NE(ops, rounds);
    }
}

TEST(McRounds, TellsSchedulesThatDifferByAFewMicrobatchesApart) {
    // the test above has the power to see a change of law: the same cases with 25% more
    // microbatches on one side are far outside its bound
    constexpr int kSamples = 4000;
    for (const auto& c : {cases()[0], cases()[3], cases()[6]}) {
        SCOPED_TRACE(c.name);
        const int more =
            c.microbatches + std::max(1, c.microbatches / 4) * (c.chunks > 1 ? c.pp : 1);
        const auto ops = steps(c, c.microbatches, detail::McPath::ops, kSamples, 1);
        const auto rounds = steps(c, more, detail::McPath::rounds, kSamples, 1001);
        EXPECT_GT(ks_two_sample(ops, rounds), 4 * ks_critical(kSamples));
    }
}

}  // namespace
}  // namespace prism
