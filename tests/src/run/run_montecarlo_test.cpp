#include "src/run/run_montecarlo.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "src/run/run_model.hpp"

namespace prism {
namespace {

constexpr double kHour = 3600.0;

/// Kolmogorov-Smirnov distance between the samples' empirical CDF and `cdf`, exact also where
/// `cdf` jumps and samples tie (an atom): each group of equal samples is compared with the
/// left and right limits of `cdf` there (taken 1e-9 relative away).
template <class Cdf>
double ks_distance(std::vector<double> x, const Cdf& cdf) {
    std::sort(x.begin(), x.end());
    const double n = static_cast<double>(x.size());
    double d = 0;
    for (std::size_t i0 = 0; i0 < x.size();) {
        std::size_t i1 = i0;
        while (i1 < x.size() && x[i1] == x[i0]) ++i1;
        const double eps = 1e-9 * std::abs(x[i0]);
        d = std::max({d, std::abs(cdf(x[i0] - eps) - static_cast<double>(i0) / n),
                      std::abs(cdf(x[i0] + eps) - static_cast<double>(i1) / n)});
        i0 = i1;
    }
    return d;
}

std::vector<double> run_times(const std::vector<RunSample>& s) {
    std::vector<double> t;
    t.reserve(s.size());
    for (const RunSample& r : s) t.push_back(r.run_time_s);
    return t;
}

/// 1024 GPUs whose job mean time to failure is 7.9 h (Kokolis et al. HPCA'25), four simulated
/// clusters with different speeds, a 3.5-day run: about 11 failures per run.
RunInput mid_size_run() {
    RunInput in;
    in.steps = 30000;
    in.deterministic_step_s = 9.6;
    in.cluster_mean_s = {9.8, 10.0, 10.2, 10.5};
    in.cluster_var_s2 = {0.25, 0.25, 0.36, 0.49};
    in.gpus = 1024;
    in.gpus_per_node = 8;
    in.checkpoint_bytes = 30.0e12;
    in.failures.enabled = true;
    in.failures.causes.push_back({"gpu", false, 7.9 * kHour * 1024, 1.0});
    in.failures.detection_s = 120.0;
    in.failures.restart_s = 600.0;
    in.failures.checkpoint_policy = CheckpointPolicy::fixed;
    in.failures.checkpoint_interval_s = 1800.0;
    in.failures.checkpoint_bytes_per_s = 1.0e12;
    return in;
}

/// Llama 3 405B-like: 16384 GPUs, 419 interruptions in 54 days (Dubey et al. 2024), split into
/// per-GPU and per-node causes; a 30-day run with about 230 failures.
RunInput llama3_scale_run() {
    RunInput in;
    in.steps = 260000;
    in.deterministic_step_s = 9.5;
    in.cluster_mean_s = {10.0};
    in.cluster_var_s2 = {0.64};
    in.gpus = 16384;
    in.gpus_per_node = 8;
    in.checkpoint_bytes = 405e9 * 16;
    const double window_gpu_h = 54 * 24.0 * 16384;
    const double window_node_h = 54 * 24.0 * 2048;
    in.failures.enabled = true;
    in.failures.causes.push_back({"gpu", false, window_gpu_h / 268 * kHour, 1.0});
    in.failures.causes.push_back({"node", true, window_node_h / 151 * kHour, 1.0});
    in.failures.detection_s = 120.0;
    in.failures.restart_s = 600.0;
    in.failures.checkpoint_policy = CheckpointPolicy::optimal;
    in.failures.checkpoint_bytes_per_s = 1.0e12;
    return in;
}

TEST(RunMonteCarlo, AgreesWithFastPathOnMidSizeRun) {
    const RunInput in = mid_size_run();

    const std::vector<RunSample> mc = simulate_runs(in, 10000, 42, 3);
    const RunAnalysis fast = analyze_run(in);

    // 10000 samples: the KS statistic of an exact model exceeds 0.0136 with probability 5%, so
    // the 0.03 bound leaves >= 0.016 for the model's approximations (Normal-Power, CLT).
    const double d = ks_distance(run_times(mc), [&](double t) { return fast.run_time.cdf(t); });
    std::printf("KS(Monte Carlo, fast) = %.4f\n", d);
    EXPECT_LE(d, 0.03);
    double failures = 0;
    for (const RunSample& r : mc) failures += static_cast<double>(r.interruptions);
    failures /= static_cast<double>(mc.size());
    // Poisson-like count with mean ~11: standard error sqrt(11 / 10000) = 0.033; 5 SE.
    EXPECT_NEAR(failures, fast.interruptions_mean, 0.17);
}

TEST(RunMonteCarlo, AgreesWithFastPathAtLlama3Scale) {
    const RunInput in = llama3_scale_run();

    const std::vector<RunSample> mc = simulate_runs(in, 4000, 42, 4);
    const RunAnalysis fast = analyze_run(in);

    // 4000 samples: an exact model exceeds KS 0.0215 with probability 5%.
    const double d = ks_distance(run_times(mc), [&](double t) { return fast.run_time.cdf(t); });
    std::printf("KS(Monte Carlo, fast) = %.4f\n", d);
    EXPECT_LE(d, 0.03);
    double time = 0;
    double time2 = 0;
    for (const RunSample& r : mc) {
        time += r.run_time_s / 4000;
        time2 += r.run_time_s * r.run_time_s / 4000;
    }
    // Mean: standard error sd / sqrt(4000) with the sample sd; 5 SE.
    const double sd = std::sqrt(time2 - time * time);
    EXPECT_NEAR(time, fast.run_time.mean_s(), 5 * sd / std::sqrt(4000.0));
}

TEST(RunMonteCarlo, WeibullRenewalAggregateMatchesPoissonRate) {
    // Palm-Khintchine: 1024 stationary Weibull(0.7) renewal processes superpose to nearly a
    // Poisson process of rate 1024 / MTBF, which the fast path assumes.
    RunInput in = mid_size_run();
    in.failures.causes[0].weibull_shape = 0.7;

    const std::vector<RunSample> mc = simulate_runs(in, 4000, 9, 0);
    const RunAnalysis fast = analyze_run(in);

    double time = 0;
    for (const RunSample& r : mc) time += r.run_time_s;
    time /= static_cast<double>(mc.size());
    // Mixture sd is ~3.5 h; 5 SE of the mean of 4000 samples is ~0.3%; the renewal correction
    // at N = 1024 is far smaller, so 0.5% of the mean.
    EXPECT_NEAR(time, fast.run_time.mean_s(), 0.005 * fast.run_time.mean_s());
}

TEST(RunMonteCarlo, LostTimePerFailureMatchesFirstOrderYoungDaly) {
    RunInput in;
    in.steps = 2000000;
    in.deterministic_step_s = 1.0;
    in.gpus = 2048;
    in.checkpoint_bytes = 60.0e12;
    in.failures.enabled = true;
    in.failures.causes.push_back({"gpu", false, 20 * kHour * 2048, 1.0});
    in.failures.detection_s = 120.0;
    in.failures.restart_s = 300.0;
    in.failures.checkpoint_policy = CheckpointPolicy::fixed;
    in.failures.checkpoint_interval_s = 1800.0;
    in.failures.checkpoint_bytes_per_s = 1.0e12;

    const std::vector<RunSample> mc = simulate_runs(in, 2000, 5, 0);

    double lost = 0;
    double failures = 0;
    for (const RunSample& r : mc) {
        lost += r.run_time_s - r.work_s - static_cast<double>(r.checkpoints) * 60.0;
        failures += static_cast<double>(r.interruptions);
    }
    const double first_order = (1800.0 + 60.0) / 2 + 120.0 + 300.0;
    // ~58000 failures, lost work per failure ~uniform (sd 540 s): SE 2.2 s; the second-order
    // model terms are ~0.8%; tolerance 1.5%.
    EXPECT_NEAR(lost / failures, first_order, 0.015 * first_order);
}

TEST(RunMonteCarlo, FailureFreeRunsFormAnAtomOfPoissonProbability) {
    // A short run (about 2 failures expected): the runs no failure strikes all take exactly
    // work + checkpoints, with probability e^{-lambda (work + checkpoints)} (Poisson).
    RunInput in = mid_size_run();
    in.steps = 5000;
    in.cluster_mean_s = {10.0};
    in.cluster_var_s2 = {0.0};
    const double failure_free_s = 50000.0 + 28 * 30.0;  // 28 segments of <= 180 steps
    const double lambda = 1.0 / (7.9 * kHour);
    const double p_none = std::exp(-lambda * failure_free_s);

    const std::vector<RunSample> mc = simulate_runs(in, 20000, 3, 0);
    const RunAnalysis fast = analyze_run(in);

    // The jump of the CDF at the failure-free time is the atom (closed form).
    const double jump =
        fast.run_time.cdf(failure_free_s + 1e-6) - fast.run_time.cdf(failure_free_s - 1e-6);
    EXPECT_NEAR(jump, p_none, 1e-9);  // plus the continuous part's mass over 2 us (~1e-10)
    double none = 0;
    for (const RunSample& r : mc) none += r.interruptions == 0 ? 1.0 : 0.0;
    // Binomial proportion of 20000 runs: SE sqrt(p (1 - p) / n) = 0.0026; 5 SE.
    EXPECT_NEAR(none / 20000, p_none, 5 * std::sqrt(p_none * (1 - p_none) / 20000));
    // With the atom kept apart the rest of the CDF stays close even at ~2 failures per run;
    // measured 0.05, the bound leaves room for the one-failure runs' uniform shape.
    const double d = ks_distance(run_times(mc), [&](double t) { return fast.run_time.cdf(t); });
    std::printf("KS(Monte Carlo, fast) = %.4f\n", d);
    EXPECT_LE(d, 0.07);
}

TEST(RunMonteCarlo, AsyncCheckpointRuleMatchesSimulatedWritesInFlight) {
    // The fast path charges one storage-write time per failure for the checkpoint in flight;
    // the Monte Carlo rolls back to the last committed checkpoint instead.
    RunInput in;
    in.steps = 1000000;
    in.deterministic_step_s = 1.0;
    in.gpus = 1024;
    in.checkpoint_bytes = 3.0e12;  // 300 s to storage at 10 GB/s, 0.12 s to host memory
    in.failures.enabled = true;
    in.failures.causes.push_back({"gpu", false, 4 * kHour * 1024, 1.0});
    in.failures.detection_s = 120.0;
    in.failures.restart_s = 600.0;
    in.failures.checkpoint_policy = CheckpointPolicy::fixed;
    in.failures.checkpoint_interval_s = 1800.0;
    in.failures.checkpoint_bytes_per_s = 1.0e10;
    in.failures.async_checkpoint = true;

    const std::vector<RunSample> mc = simulate_runs(in, 1000, 17, 0);
    const RunAnalysis fast = analyze_run(in);

    double time = 0;
    double time2 = 0;
    for (const RunSample& r : mc) {
        time += r.run_time_s / 1000;
        time2 += r.run_time_s * r.run_time_s / 1000;
    }
    // The rule assumes the failure offset uniform over the segment; the truncated exponential
    // makes early failures (which lose the write in flight) more likely by a relative
    // lambda (tau + C) / 2 = 6%: that much of 300 s per failure, plus 5 standard errors.
    const double lambda = 1.0 / (4 * kHour);
    const double bias = fast.interruptions_mean * 300.0 * lambda * 1800.0 / 2;
    const double se = std::sqrt((time2 - time * time) / 1000);
    EXPECT_NEAR(time, fast.run_time.mean_s(), bias + 5 * se);
    // Without the rule the fast path would be short by one write time per failure.
    EXPECT_GT(fast.interruptions_mean * 300.0, 3 * (bias + 5 * se));
}

TEST(RunMonteCarlo, NoFailuresSumsStepsPerRealization) {
    RunInput in;
    in.steps = 10000;
    in.deterministic_step_s = 1.0;
    in.cluster_mean_s = {1.0, 2.0};
    in.cluster_var_s2 = {0.04, 0.04};
    in.gpus = 8;

    const std::vector<RunSample> mc = simulate_runs(in, 4000, 1, 0);

    // Even samples use realization 0, odd ones realization 1: normal(n m_k, n v_k), sd 20 s.
    double sum0 = 0, sum1 = 0;
    for (std::size_t i = 0; i < mc.size(); ++i) (i % 2 == 0 ? sum0 : sum1) += mc[i].run_time_s;
    // 2000 samples each: SE 0.45 s; 5 SE.
    EXPECT_NEAR(sum0 / 2000, 10000.0, 2.3);
    EXPECT_NEAR(sum1 / 2000, 20000.0, 2.3);
}

TEST(RunMonteCarlo, SameSeedAndIndexGiveSameRuns) {
    const RunInput in = mid_size_run();

    const std::vector<RunSample> a = simulate_runs(in, 50, 11, 7);
    const std::vector<RunSample> b = simulate_runs(in, 20, 11, 7);
    const std::vector<RunSample> c = simulate_runs(in, 20, 11, 8);

    for (std::size_t i = 0; i < b.size(); ++i) EXPECT_EQ(a[i].run_time_s, b[i].run_time_s);
    int same = 0;
    for (std::size_t i = 0; i < c.size(); ++i) same += a[i].run_time_s == c[i].run_time_s;
    EXPECT_EQ(same, 0);
}

}  // namespace
}  // namespace prism
