// Stalls (StallSpec, spec.hpp; stall_law in src/stochastic/detail/hiccup.hpp): small per-node
// stalls that every synchronization of the data-parallel group waits for. Checked against
// brute-force draws of every node's stalls in every interval between two synchronizations, and
// the two evaluators against each other.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "src/stochastic/detail/hiccup.hpp"
#include "src/stochastic/step_distribution.hpp"
#include "tests/src/stochastic/invariant_checks.hpp"
#include "tests/src/stochastic/ks.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace prism::stochastic {
namespace {

using detail::StallShape;
using prism::testing::ProfileShape;

StallSpec stalls(double fraction, double duration_s) {
    StallSpec s;
    s.fraction = fraction;
    s.duration_s = duration_s;
    return s;
}

struct Law {
    std::vector<double> value, weight;
    double mean() const {
        double m = 0;
        for (std::size_t i = 0; i < value.size(); ++i) m += weight[i] * value[i];
        return m;
    }
    double var() const {
        double m = mean(), v = 0;
        for (std::size_t i = 0; i < value.size(); ++i)
            v += weight[i] * (value[i] - m) * (value[i] - m);
        return v;
    }
    double cdf(double x) const {
        double f = 0;
        for (std::size_t i = 0; i < value.size(); ++i) f += value[i] <= x ? weight[i] : 0;
        return f;
    }
};

Law law_of(const StallSpec& s, const StallShape& shape, double step_s) {
    Law l;
    detail::stall_law(s, shape, step_s, l.value, l.weight);
    return l;
}

/// W drawn by brute force: every member's every node's stall count in every interval.
std::vector<double> brute_force(const StallSpec& s, const StallShape& shape, double step_s,
                                int draws, unsigned seed) {
    std::mt19937_64 rng(seed);
    const double per_node = s.fraction / s.duration_s * step_s / shape.syncs;
    std::poisson_distribution<int> node(per_node);
    std::vector<double> out;
    for (int k = 0; k < draws; ++k) {
        double w = 0;
        for (int j = 0; j < int(shape.syncs); ++j) {
            int largest = 0;
            for (int m = 0; m < int(shape.members); ++m) {
                int count = 0;
                for (int n = 0; n < int(shape.nodes_per_member); ++n) count += node(rng);
                largest = std::max(largest, count);
            }
            w += s.duration_s * largest;
        }
        out.push_back(w);
    }
    return out;
}

double sample_mean(const std::vector<double>& x) {
    double m = 0;
    for (double v : x) m += v;
    return m / double(x.size());
}

double sample_var(const std::vector<double>& x) {
    const double m = sample_mean(x);
    double v = 0;
    for (double t : x) v += (t - m) * (t - m);
    return v / double(x.size() - 1);
}

// One synchronization a step (3D parallelism): W = d x the largest of 4 members' Poisson totals,
// each member 2 nodes. Its atoms against the closed form F(x)^4 - F(x - 1)^4 with F the
// Poisson(mu = 2 x 1 / s x 3 s) CDF summed here term by term (tgamma, independent of the law's
// running product), to 1e-12.
TEST(Stalls, OneSyncAStepIsTheLargestMembersPoissonTotal) {
    const StallSpec s = stalls(0.01, 0.01);  // 1 stall per node-second
    const StallShape shape{1, 4, 2};
    const Law l = law_of(s, shape, 3.0);
    const double mu = 6;

    double f_prev = 0;
    for (int x = 0; x <= 20; ++x) {
        double f = 0;
        for (int i = 0; i <= x; ++i) f += std::exp(-mu + i * std::log(mu) - std::lgamma(i + 1.0));
        const double expected = std::pow(f, 4) - std::pow(f_prev, 4);
        const auto it = std::find_if(l.value.begin(), l.value.end(),
                                     [&](double v) { return std::abs(v - 0.01 * x) < 1e-12; });
        ASSERT_NE(it, l.value.end()) << x;
        EXPECT_NEAR(l.weight[std::size_t(it - l.value.begin())], expected, 1e-12) << x;
        f_prev = f;
    }
}

// FSDP's regime: 48 synchronizations a step among 64 nodes, a node stalled 0.17% of its time
// in stalls of 20 ms: the exact convolution against 20,000 brute-force draws (mean within 4
// standard errors, variance within 5%, the largest CDF gap on the lattice below 0.015: the KS of
// 20,000 draws is below 0.0115 with 99% probability). In this linear regime each node's stall
// stops the group: E[W] = syncs x d x P(some node stalls) + O(mu^2) = 48 x 20 ms x (1 - e^(-64
// mu)), mu = 0.085 / s x 1 s / 48, within 6% of members x fraction x step (64 x 0.17% = 10.9%).
TEST(Stalls, LockstepSumsTheLargestOverEverySynchronization) {
    const StallSpec s = stalls(1.7e-3, 0.02);
    const StallShape shape{48, 64, 1};
    const double step = 1.0;
    const Law l = law_of(s, shape, step);
    const std::vector<double> x = brute_force(s, shape, step, 20000, 7);

    EXPECT_NEAR(l.mean(), sample_mean(x), 4 * std::sqrt(sample_var(x) / double(x.size())));
    EXPECT_NEAR(l.var() / sample_var(x), 1.0, 0.05);
    double gap = 0;
    for (int k = 0; k <= 40; ++k) {
        const double at = 0.02 * k + 1e-9;
        const double empirical =
            double(std::count_if(x.begin(), x.end(), [&](double v) { return v <= at; })) /
            double(x.size());
        gap = std::max(gap, std::abs(l.cdf(at) - empirical));
    }
    EXPECT_LT(gap, 0.015);
    const double mu = 1.7e-3 / 0.02 * step / 48;
    EXPECT_NEAR(l.mean() / (48 * 0.02 * -std::expm1(-64 * mu)), 1.0, 1e-3);
    EXPECT_NEAR(l.mean() / (64 * 1.7e-3 * step), 1.0, 0.06);
}

// Beyond kStallExactMean stalls a step the sum is the normal of the same moments: its mean and
// variance are syncs x E[M] and syncs x Var[M], E[M] = sum_x (1 - F(x)^g) and E[M^2] = sum_x
// (2x + 1)(1 - F(x)^g) computed here from the Poisson CDF.
TEST(Stalls, ManyStallsAStepTakeTheCentralLimit) {
    const StallSpec s = stalls(2e-3, 0.01);
    const StallShape shape{200, 64, 1};  // mu = 0.2 / s x 10 s / 200 = 0.01 per interval
    const Law l = law_of(s, shape, 10.0);
    const double mu = 0.01;
    double em = 0, em2 = 0, f = 0;
    for (int x = 0; x <= 30; ++x) {
        f += std::exp(-mu + x * std::log(mu) - std::lgamma(x + 1.0));
        const double tail = 1 - std::pow(std::min(f, 1.0), 64);
        em += tail;
        em2 += (2.0 * x + 1) * tail;
    }
    ASSERT_GT(200 * em, detail::kStallExactMean);  // the central-limit branch

    EXPECT_NEAR(l.mean() / (0.01 * 200 * em), 1.0, 1e-3);
    EXPECT_NEAR(l.var() / (0.01 * 0.01 * 200 * (em2 - em * em)), 1.0, 0.01);
}

// The shapes a point's layout gives: FSDP on 512 GPUs (64 nodes) syncs its 64 nodes twice a
// layer (24 layers, one microbatch); TP 4 x PP 8 on the same 512 GPUs syncs 16 replicas of 4
// nodes once a step. At the same stalled fraction FSDP loses more, and more of it with every
// doubling of the nodes.
TEST(Stalls, FsdpLosesMoreThanOneSyncAStepAndMoreWithEveryDoubling) {
    const HardwareSpec hw = prism::testing::test_hardware();  // 8 GPUs a node
    ProfileShape fsdp;
    fsdp.fsdp = true;
    fsdp.tp = 1;
    fsdp.layers_per_chunk = 24;
    fsdp.dp = 512;
    ProfileShape three_d = prism::testing::pipeline_shape(4, 8, 16, 8);

    const StallShape a = detail::stall_shape(prism::testing::make_profile(fsdp),
                                             prism::testing::design_point(fsdp), hw);
    const StallShape b = detail::stall_shape(prism::testing::make_profile(three_d),
                                             prism::testing::design_point(three_d), hw);
    EXPECT_EQ(a.syncs, 48);
    EXPECT_EQ(a.members, 64);
    EXPECT_EQ(a.nodes_per_member, 1);
    EXPECT_EQ(b.syncs, 1);
    EXPECT_EQ(b.members, 16);
    EXPECT_EQ(b.nodes_per_member, 4);

    const StallSpec s = stalls(1.7e-3, 0.02);
    const auto loss = [&](StallShape shape, double members) {
        shape.members = members;
        return law_of(s, shape, 1.0).mean();
    };
    EXPECT_GT(loss(a, 64), loss(b, 16));
    // 4x the members: FSDP's loss about 4x (each node's stall stops the group), 3D's far less
    EXPECT_GT(loss(a, 64) / loss(a, 16), 3.5);
    EXPECT_LT(loss(b, 64) / loss(b, 16), 1.5);
}

// The evaluators with stalls on a 3D pipeline (4 replicas of tp 8 x pp 4) and PRISM-like noise
// scaled down: the analytic CDF against 20,000 Monte Carlo steps (tolerance 0.015 as the
// hiccups'), and with every other factor constant the mean step is the deterministic one plus
// E[W]; a zero fraction changes nothing, bit for bit.
TEST(Stalls, BothEvaluatorsAddTheStallsLaw) {
    ProfileShape shape;
    shape.stages = 4;
    shape.microbatches = 8;
    shape.dp = 4;
    const StepProfile profile = prism::testing::make_profile(shape);
    const DesignPoint point = prism::testing::design_point(shape);
    const HardwareSpec hw = prism::testing::test_hardware();
    const ClusterSpec cluster;
    const double det = deterministic_step_time(profile);
    VariabilitySpec spec = prism::testing::prism_like();
    spec.persistent.spatial = DistributionSpec{};
    for (auto& d : spec.transient) d.cv *= 0.2;
    spec.stalls = stalls(2e-3, 0.02 * det);

    std::vector<double> draws = monte_carlo_samples(profile, point, hw, cluster, spec, 20000, 5, 0);
    std::sort(draws.begin(), draws.end());
    const std::vector<double> cdf = analytic_cdf(profile, point, hw, cluster, spec, draws);
    EXPECT_LT(prism::testing::ks_against_cdf(cdf), 0.015);

    VariabilitySpec only;
    only.stalls = spec.stalls;
    EvaluationSpec e;
    e.sensitivity = false;
    const StepDistribution d = step_distribution(profile, point, hw, cluster, only, e, 1, 0);
    const Law w = law_of(only.stalls, detail::stall_shape(profile, point, hw), det);
    EXPECT_NEAR(d.mean_s, det + w.mean(), 1e-9 * det);
    EXPECT_GT(w.mean(), 0);

    VariabilitySpec off = spec;
    off.stalls.fraction = 0;
    VariabilitySpec none = spec;
    none.stalls = StallSpec{};
    for (const Method method : {Method::analytic, Method::montecarlo}) {
        EvaluationSpec m;
        m.method = method;
        m.samples = 500;
        m.sensitivity = false;
        const StepDistribution a = step_distribution(profile, point, hw, cluster, off, m, 9, 3);
        const StepDistribution b = step_distribution(profile, point, hw, cluster, none, m, 9, 3);
        EXPECT_EQ(a.mean_s, b.mean_s);
        EXPECT_EQ(a.p99_s, b.p99_s);
        EXPECT_EQ(a.cluster_mean_s, b.cluster_mean_s);
    }
}

// Every unit slow by k is the hardware k times slower (DESIGN.md's invariants) with stalls too:
// they accrue over the slowed step, so both give the slowed deterministic step plus the stalls'
// mean over it, in both evaluators (Monte Carlo draws W exactly: the same mean to its standard
// error, 4 of them).
TEST(Stalls, EveryUnitSlowIsTheHardwareSlowerWithItsStalls) {
    ProfileShape shape;
    shape.stages = 2;
    shape.microbatches = 4;
    shape.dp = 8;
    shape.fsdp = true;
    const StepProfile profile = prism::testing::make_profile(shape);
    const DesignPoint point = prism::testing::design_point(shape);
    const HardwareSpec hw = prism::testing::test_hardware();
    const ClusterSpec cluster;
    VariabilitySpec slow;
    slow.stalls = stalls(4e-3, 0.5 * deterministic_step_time(profile) / 8);
    slow.persistent.slow_probability = 1.0;
    slow.persistent.slow_factor = 1.5;
    VariabilitySpec only;
    only.stalls = slow.stalls;
    const StepProfile slower = prism::testing::compute_times(profile, 1.5);
    const double det = deterministic_step_time(slower);
    const Law w = law_of(only.stalls, detail::stall_shape(profile, point, hw), det);
    EvaluationSpec e;
    e.sensitivity = false;

    const StepDistribution a = step_distribution(profile, point, hw, cluster, slow, e, 1, 0);
    const StepDistribution h = step_distribution(slower, point, hw, cluster, only, e, 1, 0);
    e.method = Method::montecarlo;
    e.samples = 4000;
    const StepDistribution m = step_distribution(profile, point, hw, cluster, slow, e, 1, 0);

    EXPECT_NEAR(a.mean_s, det + w.mean(), 1e-9 * det);
    EXPECT_NEAR(h.mean_s, det + w.mean(), 1e-9 * det);
    EXPECT_NEAR(a.p99_s, h.p99_s, 1e-9 * det);
    EXPECT_NEAR(m.mean_s, det + w.mean(), 4 * std::sqrt(w.var() / 4000));
}

}  // namespace
}  // namespace prism::stochastic
