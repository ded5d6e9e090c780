#include "src/run/run_model.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace prism {
namespace {

constexpr double kHour = 3600.0;
constexpr double kDay = 86400.0;

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

#define EXPECT_THROW_MSG(statement, exception, message)         \
    do {                                                        \
        try {                                                   \
            statement;                                          \
            ADD_FAILURE() << "no exception thrown";             \
        } catch (const exception& e) {                          \
            EXPECT_EQ(std::string(e.what()), message);          \
        } catch (...) {                                         \
            ADD_FAILURE() << "exception of an unexpected type"; \
        }                                                       \
    } while (false)

/// A run with exponential failures, one cause per GPU whose MTBF gives the job `job_mtbf_s`.
RunInput failing_run(std::int64_t gpus, double job_mtbf_s) {
    RunInput in;
    in.steps = 100000;
    in.deterministic_step_s = 10.0;
    in.gpus = gpus;
    in.gpus_per_node = 8;
    in.failures.enabled = true;
    in.failures.causes.push_back({"gpu", false, job_mtbf_s * static_cast<double>(gpus), 1.0});
    in.failures.checkpoint_policy = CheckpointPolicy::fixed;
    in.failures.checkpoint_bytes_per_s = 1.0e12;
    return in;
}

TEST(RunModel, NoFailuresNoVariabilityIsStepsTimesStep) {
    RunInput in;
    in.steps = 123457;
    in.deterministic_step_s = 7.25;
    in.gpus = 16384;

    const RunMetrics m = evaluate_run(in, 1, 2);

    const double run_s = 123457 * 7.25;
    EXPECT_DOUBLE_EQ(m.run_time_p50_days, run_s / kDay);
    EXPECT_DOUBLE_EQ(m.run_time_p95_days, run_s / kDay);
    EXPECT_DOUBLE_EQ(m.run_time_p99_days, run_s / kDay);
    EXPECT_DOUBLE_EQ(m.ettr, 1.0);
    EXPECT_EQ(m.interruptions_mean, 0.0);
    EXPECT_DOUBLE_EQ(m.gpu_hours_mean, 16384 * run_s / kHour);
    EXPECT_DOUBLE_EQ(m.gpu_hours_p95, 16384 * run_s / kHour);
}

TEST(RunModel, RunIsMixtureOverRealizationsNotShrunkNormal) {
    // Two simulated clusters, one 10% slower (a slow node persists through the run). Truth: the
    // equal mixture of normal(n m_k, n v_k); its quantiles by bisection on the exact CDF.
    RunInput in;
    in.steps = 10000;
    in.deterministic_step_s = 9.5;
    in.cluster_mean_s = {10.0, 11.0};
    in.cluster_var_s2 = {1.0, 1.0};
    in.gpus = 1024;
    auto truth_cdf = [](double t) {
        return 0.5 * normal_cdf((t - 1.0e5) / 100.0) + 0.5 * normal_cdf((t - 1.1e5) / 100.0);
    };

    const RunMetrics m = evaluate_run(in, 7, 0);

    // The median sits on a plateau of the CDF (the clusters are 100 sd apart), so compare the
    // truth CDF at each reported quantile; 1e-9 covers the root finder's 1e-10 relative stop.
    EXPECT_NEAR(truth_cdf(m.run_time_p50_days * kDay), 0.5, 1e-9);
    EXPECT_NEAR(truth_cdf(m.run_time_p95_days * kDay), 0.95, 1e-9);
    EXPECT_NEAR(truth_cdf(m.run_time_p99_days * kDay), 0.99, 1e-9);
    // A normal with the whole step variance (within 1 + between 0.25 s^2) divided by the step
    // count has sd 112 s and p95 = 105184 s; the slow cluster is slow for the whole run, so the
    // true p95 lies above the slow cluster's mean.
    EXPECT_GT(m.run_time_p95_days * kDay, 1.1e5);
}

TEST(RunModel, DrainedStragglerRunsHealthyAfterDetection) {
    // The clusters of the mixture test, the healthy one at 10 s; the slow one (11 s, 10% above:
    // over the 5% threshold) is detected after 1 h, checkpointed and restarted (no failures:
    // no blocking checkpoint cost; replacement 600 s). By hand: 3600 / 11 = 327.27 steps at
    // 11 s, the other 9672.73 at 10 s, plus 600 s: 3600 + 96727.27 + 600 = 100927.27 s, and the
    // variance n_1 v_k + n_2 v_h = 10000 s^2 as before.
    RunInput in;
    in.steps = 10000;
    in.deterministic_step_s = 9.5;
    in.cluster_mean_s = {10.0, 11.0};
    in.cluster_var_s2 = {1.0, 1.0};
    in.gpus = 1024;
    in.healthy_mean_s = 10.0;
    in.healthy_var_s2 = 1.0;
    in.failures.straggler_detection_s = kHour;
    in.failures.straggler_replacement_s = 600;
    const double drained = 3600.0 + (10000.0 - 3600.0 / 11.0) * 10.0 + 600.0;
    auto truth_cdf = [&](double t) {
        return 0.5 * normal_cdf((t - 1.0e5) / 100.0) + 0.5 * normal_cdf((t - drained) / 100.0);
    };

    const RunAnalysis a = analyze_run(in);
    const RunMetrics m = evaluate_run(in, 7, 0);

    EXPECT_NEAR(a.run_time.mean_s(), 0.5 * 1.0e5 + 0.5 * drained, 1e-6);
    EXPECT_DOUBLE_EQ(a.drained_fraction, 0.5);
    EXPECT_NEAR(truth_cdf(m.run_time_p95_days * kDay), 0.95, 1e-9);
    EXPECT_NEAR(truth_cdf(m.run_time_p99_days * kDay), 0.99, 1e-9);
    // the compute the run does: the drained cluster's 3600 + 96727.27 s, not 110000 s
    EXPECT_NEAR(a.work_mean_s, 0.5 * 1.0e5 + 0.5 * (drained - 600.0), 1e-6);

    // under the threshold nothing is drained: 10% slower, threshold 20%
    in.failures.straggler_threshold = 0.2;
    EXPECT_EQ(analyze_run(in).drained_fraction, 0.0);
    EXPECT_NEAR(analyze_run(in).run_time.mean_s(), 1.05e5, 1e-6);
    // detected after the run would have ended: nothing changes either
    in.failures.straggler_threshold = 0.05;
    in.failures.straggler_detection_s = 2.0e5;
    EXPECT_NEAR(analyze_run(in).run_time.mean_s(), 1.05e5, 1e-6);
}

TEST(RunModel, DrainingCostsTheCheckpointAndTheReplacementWithFailures) {
    // With failures on, a drained realization pays the blocking checkpoint C before the
    // replacement: its run is the undrained model's at the drained mean step plus C + 600 s.
    // Truth: the same input run with one cluster at the drained mean step and no draining. The
    // numbers make both runs whole numbers of 3960-s segments (36000 steps at 11 s = 100; 360
    // steps at 11 s, detected after 3960 s, and 35640 at 10 s = 360360 s = 91), where scaling
    // the segments by the step ratio is exact.
    RunInput in = failing_run(1024, 24 * kHour);
    in.steps = 36000;
    in.failures.checkpoint_interval_s = 3960;
    in.checkpoint_bytes = 1.0e14;  // 100 s at 1 TB/s
    in.cluster_mean_s = {11.0};
    in.cluster_var_s2 = {0.0};
    in.healthy_mean_s = 10.0;
    in.failures.straggler_detection_s = 3960;
    in.failures.straggler_replacement_s = 600;
    RunInput same = in;
    same.failures.straggler_detection_s = 0;
    same.cluster_mean_s = {360360.0 / 36000.0};

    const RunAnalysis a = analyze_run(in);
    const RunAnalysis b = analyze_run(same);

    EXPECT_DOUBLE_EQ(a.plan.blocking_s, 100.0);
    EXPECT_NEAR(a.run_time.mean_s(), b.run_time.mean_s() + 100.0 + 600.0,
                1e-9 * b.run_time.mean_s());
    EXPECT_NEAR(a.run_time.quantile(0.95), b.run_time.quantile(0.95) + 700.0,
                1e-8 * b.run_time.mean_s());
}

TEST(RunModel, Ar1SumVarianceMatchesSimulatedSums) {
    // truth: sums of simulated stationary AR(1) series, x_t = rho x_{t-1} + sqrt(1 - rho^2) e_t
    // (unit variance), against the closed form; the sample variance of 20000 sums is within
    // 4 standard errors (sqrt(2 / 20000) = 1% relative)
    std::mt19937_64 rng(11);
    std::normal_distribution<double> z(0.0, 1.0);
    for (const double rho : {0.0, 0.3, 0.65}) {
        const int n = 40, series = 20000;
        double sum2 = 0;
        for (int s = 0; s < series; ++s) {
            double x = z(rng), total = x;
            for (int t = 1; t < n; ++t) {
                x = rho * x + std::sqrt(1 - rho * rho) * z(rng);
                total += x;
            }
            sum2 += total * total;
        }
        const double simulated = sum2 / series;
        EXPECT_NEAR(simulated / ar1_sum_variance_factor(n, rho), 1.0, 0.04) << rho;
    }
    EXPECT_EQ(ar1_sum_variance_factor(1000, 0.0), 1000.0);
    // by hand: n = 2 gives 2 + 2 rho
    EXPECT_NEAR(ar1_sum_variance_factor(2, 0.5), 3.0, 1e-12);
}

TEST(RunModel, AutocorrelatedStepsWidenTheRunNotItsMean) {
    // one cluster, no failures: the run is normal(n m, v factor(n, rho)); its p95 exactly
    RunInput in;
    in.steps = 10000;
    in.deterministic_step_s = 10.0;
    in.cluster_mean_s = {10.0};
    in.cluster_var_s2 = {4.0};
    in.gpus = 8;
    in.step_autocorrelation = 0.5;
    const double sd = std::sqrt(4.0 * ar1_sum_variance_factor(10000, 0.5));  // ~ sqrt(3) x 200 s

    const RunAnalysis a = analyze_run(in);

    EXPECT_NEAR(a.run_time.mean_s(), 1.0e5, 1e-6);
    EXPECT_NEAR(a.run_time.quantile(0.95), 1.0e5 + 1.6448536269514722 * sd, 1e-6 * sd);
    in.step_autocorrelation = 1.0;
    EXPECT_THROW_MSG(analyze_run(in), ModelError,
                     "run: step_autocorrelation must be in [0, 1) (got 1)");
}

TEST(RunModel, SegmentMeanIsBougeretClosedForm) {
    // Bougeret et al. (SC'11): E[segment] = e^{lambda R} (1/lambda + D) (e^{lambda T} - 1).
    const double lambda = 1.0 / (7.9 * kHour);
    const double window = 1830.0;
    const double downtime = 120.0;
    const double recovery = 600.0;

    const Cumulants c = segment_time_cumulants(window, lambda, downtime, recovery);

    const double expected =
        std::exp(lambda * recovery) * (1.0 / lambda + downtime) * (std::exp(lambda * window) - 1.0);
    EXPECT_NEAR(c.k1, expected, 1e-12 * expected);
}

TEST(RunModel, SegmentCumulantsMatchBruteForceSimulation) {
    // Direct simulation of one segment (independent code): attempts of T seconds, each failure
    // loses its offset, then D and a restart of R that failures can interrupt.
    const double lambda = 1.0 / 2000.0;  // large lambda*T: strong skew, many retries
    const double window = 1800.0;
    const double downtime = 120.0;
    const double recovery = 600.0;
    std::mt19937_64 gen(20250311);
    std::exponential_distribution<double> arrival(lambda);
    const int n = 400000;
    std::vector<double> x(n);
    for (int i = 0; i < n; ++i) {
        double t = 0;
        for (;;) {
            const double f = arrival(gen);
            if (f >= window) {
                t += window;
                break;
            }
            t += f;
            for (;;) {
                t += downtime;
                const double g = arrival(gen);
                if (g >= recovery) {
                    t += recovery;
                    break;
                }
                t += g;
            }
        }
        x[i] = t;
    }
    double mean = 0;
    for (double v : x) mean += v;
    mean /= n;
    double m2 = 0, m3 = 0, m4 = 0, m6 = 0;
    for (double v : x) {
        const double d = v - mean;
        m2 += d * d / n;
        m3 += d * d * d / n;
        m4 += d * d * d * d / n;
        m6 += d * d * d * d * d * d / n;
    }

    const Cumulants c = segment_time_cumulants(window, lambda, downtime, recovery);

    // Tolerance: 5 standard errors of each sample moment, the errors estimated from the sample
    // (var(mean) = m2/n, var(m2) ~ (m4 - m2^2)/n, var(m3) ~ (m6 - m3^2 - 6 m4 m2 + 9 m2^3)/n).
    EXPECT_NEAR(c.k1, mean, 5 * std::sqrt(m2 / n));
    EXPECT_NEAR(c.k2, m2, 5 * std::sqrt((m4 - m2 * m2) / n));
    EXPECT_NEAR(c.k3, m3, 5 * std::sqrt((m6 - m3 * m3 - 6 * m4 * m2 + 9 * m2 * m2 * m2) / n));
}

TEST(RunModel, ExpectedLostTimeMatchesFirstOrderYoungDaly) {
    // Young (1974) to first order: each failure costs half a segment (work + checkpoint) of
    // lost work plus detection and restart; every segment pays one checkpoint.
    RunInput in = failing_run(2048, 20 * kHour);
    in.steps = 2000000;
    in.deterministic_step_s = 1.0;
    in.checkpoint_bytes = 60.0e12;  // C = 60 s at 1 TB/s
    in.failures.checkpoint_interval_s = 1800.0;
    in.failures.detection_s = 120.0;
    in.failures.restart_s = 300.0;

    const RunAnalysis a = analyze_run(in);

    const double work = 2.0e6;
    const double checkpoints = std::ceil(work / 1800.0);
    const double lost_per_failure =
        (a.run_time.mean_s() - work - checkpoints * 60.0) / a.interruptions_mean;
    const double first_order = (1800.0 + 60.0) / 2 + 120.0 + 300.0;
    // Tolerance 1.5%: the neglected terms are relative O(lambda (tau + C) / 6 + lambda R) = 0.8%.
    EXPECT_NEAR(lost_per_failure, first_order, 0.015 * first_order);
    // Failures arrive at rate lambda while the job is not in detection downtime.
    const double exposed_s = a.run_time.mean_s() - a.interruptions_mean * 120.0;
    EXPECT_NEAR(a.interruptions_mean, exposed_s / (20 * kHour), 1e-9 * a.interruptions_mean);
}

TEST(RunModel, OptimalIntervalMatchesYoungWhenCheckpointIsCheap) {
    // C / M = 1e-4: Young's sqrt(2 C M) is the first-order optimum; the exact one differs by a
    // relative O(sqrt(C / M)) = 1%, so the tolerance is 2%.
    const double c = 10.0;
    const double m = 1.0e5;

    const double tau = optimal_interval_s(c, 1.0 / m);

    EXPECT_NEAR(tau, std::sqrt(2 * c * m), 0.02 * std::sqrt(2 * c * m));
    EXPECT_DOUBLE_EQ(young_daly_interval_s(c, m), std::sqrt(2 * c * m));
}

TEST(RunModel, OptimalIntervalMinimizesExpectedRunTimeOnAGrid) {
    // Brute force: the expected run time of the full model with fixed intervals on a fine grid;
    // its minimum must sit within one grid step (1%) of the reported optimum.
    RunInput in = failing_run(16384, 2.0 * kHour);
    in.steps = 1000000;
    in.deterministic_step_s = 1.0;
    in.checkpoint_bytes = 120.0e12;  // C = 120 s: not << M, Young is off here
    in.failures.detection_s = 120.0;
    in.failures.restart_s = 600.0;
    in.failures.checkpoint_interval_s = 1000.0;
    const double tau_opt = evaluate_run(in, 0, 0).checkpoint_interval_opt_s;
    double best_tau = 0;
    double best_time = 1e300;
    for (double tau = 0.3 * tau_opt; tau < 3 * tau_opt; tau *= 1.01) {
        in.failures.checkpoint_interval_s = tau;
        const double t = evaluate_run(in, 0, 0).run_time_mean_s;
        if (t < best_time) {
            best_time = t;
            best_tau = tau;
        }
    }

    // Within a grid step plus the whole-segment effect of W / tau = 250 segments (0.5%).
    EXPECT_NEAR(best_tau, tau_opt, 0.015 * tau_opt);
    EXPECT_GT(std::abs(tau_opt - young_daly_interval_s(120.0, 2 * kHour)), 0.02 * tau_opt);
}

TEST(RunModel, YoungDalyPolicyUsesJobMtbf) {
    RunInput in = failing_run(1024, 8 * kHour);
    in.checkpoint_bytes = 30.0e12;  // C = 30 s
    in.failures.checkpoint_policy = CheckpointPolicy::young_daly;

    const RunMetrics m = evaluate_run(in, 0, 0);

    EXPECT_DOUBLE_EQ(m.checkpoint_interval_s, std::sqrt(2 * 30.0 * 8 * kHour));
    EXPECT_DOUBLE_EQ(m.checkpoint_cost_s, 30.0);
}

TEST(RunModel, DesignPointIntervalOverridesPolicy) {
    RunInput in = failing_run(1024, 8 * kHour);
    in.checkpoint_bytes = 30.0e12;
    in.failures.checkpoint_policy = CheckpointPolicy::optimal;
    in.checkpoint_interval_override_s = 900.0;

    const RunMetrics m = evaluate_run(in, 0, 0);

    EXPECT_EQ(m.checkpoint_interval_s, 900.0);
    EXPECT_NE(m.checkpoint_interval_opt_s, 900.0);
}

TEST(RunModel, FailureRateCountsGpusAndNodes) {
    FailureSpec f;
    f.causes.push_back({"gpu", false, 1000.0 * kHour, 1.0});
    f.causes.push_back({"node", true, 500.0 * kHour, 0.8});

    const double rate = failure_rate_per_s(f, 1001, 8);

    // 1001 GPUs occupy ceil(1001 / 8) = 126 nodes.
    EXPECT_DOUBLE_EQ(rate, 1001 / (1000.0 * kHour) + 126 / (500.0 * kHour));
}

TEST(RunModel, AsyncCheckpointBlocksOnlyForHostCopy) {
    RunInput in = failing_run(1024, 8 * kHour);
    in.checkpoint_bytes = 2.0e12;  // 2 TB: 2 s to storage at 1 TB/s
    in.failures.async_checkpoint = true;
    in.failures.detection_s = 60.0;
    in.host_copy_bytes_per_s = 20.0e9;
    in.checkpoint_interval_override_s = 1.0;  // asks for less than the write time

    const CheckpointPlan plan = plan_checkpoints(in);

    EXPECT_DOUBLE_EQ(plan.blocking_s, 2.0e12 / (1024 * 20.0e9));
    EXPECT_DOUBLE_EQ(plan.commit_s, 2.0);
    EXPECT_DOUBLE_EQ(plan.downtime_s, 62.0);
    EXPECT_DOUBLE_EQ(plan.interval_s, 10.0);  // clamped to one step (>= the 2 s write)
}

TEST(RunModel, DeadlineProbabilitiesFollowTheDistribution) {
    RunInput in = failing_run(1024, 8 * kHour);
    in.cluster_mean_s = {9.9, 10.0, 10.3};
    in.cluster_var_s2 = {0.5, 0.5, 0.5};
    in.checkpoint_bytes = 30.0e12;
    in.failures.checkpoint_interval_s = 1800.0;
    in.failures.restart_s = 600.0;
    const RunAnalysis a = analyze_run(in);
    in.failures.deadlines_s = {a.run_time.quantile(0.5), a.run_time.quantile(0.95), 0.0, 1e12};

    const RunMetrics m = evaluate_run(in, 0, 0);

    ASSERT_EQ(m.p_run_le_deadline.size(), 4U);
    EXPECT_NEAR(m.p_run_le_deadline[0], 0.5, 1e-8);
    EXPECT_NEAR(m.p_run_le_deadline[1], 0.95, 1e-8);
    EXPECT_EQ(m.p_run_le_deadline[2], 0.0);
    EXPECT_EQ(m.p_run_le_deadline[3], 1.0);
}

TEST(RunModel, InvalidInputsNameTheField) {
    RunInput in = failing_run(1024, 8 * kHour);
    in.checkpoint_bytes = 1e12;

    in.failures.checkpoint_interval_s = 0;
    EXPECT_THROW_MSG(evaluate_run(in, 0, 0), ModelError,
                     "failures.checkpoint_interval: must be > 0 with checkpoint_policy = "
                     "\"fixed\" (got 0 s)");
    in.failures.checkpoint_interval_s = 600;
    in.failures.causes[0].mtbf_s = -1;
    EXPECT_THROW_MSG(evaluate_run(in, 0, 0), ModelError,
                     "failures.cause 'gpu': mtbf must be > 0 (got -1 s)");
    in.failures.causes[0].mtbf_s = 1e7;
    in.failures.checkpoint_bytes_per_s = 0;
    EXPECT_THROW_MSG(evaluate_run(in, 0, 0), ModelError,
                     "failures.checkpoint_bandwidth: must be > 0 to write 1000000000000 bytes "
                     "(got 0 B/s)");
    in.cluster_mean_s = {10.0};
    EXPECT_THROW_MSG(evaluate_run(in, 0, 0), ModelError,
                     "run: 1 cluster step means but 0 cluster step variances; they must pair up");
}

TEST(RunModel, RunThatCannotFinishReportsInfiniteTime) {
    // Failures every 3 s against 1-hour segments: e^{lambda (tau + C)} = e^1200 overflows.
    RunInput in = failing_run(16384, 3.0);
    in.checkpoint_bytes = 1.0e12;
    in.failures.checkpoint_interval_s = 3600.0;

    const RunMetrics m = evaluate_run(in, 0, 0);

    EXPECT_EQ(m.run_time_p95_days, std::numeric_limits<double>::infinity());
    EXPECT_EQ(m.ettr, 0.0);
}

TEST(RunModel, KokolisEttrAtFiveMinuteCheckpointsIsNearPointNineThree) {
    // Kokolis et al., HPCA'25: a 1024-GPU job with mean time to failure 7.9 h reaches ETTR ~0.93
    // with 5-minute checkpoints. Assumption: checkpoints cost C = 5 s of blocking time
    // (asynchronous snapshot), detection is folded into the restart time.
    const double lambda = 1.0 / (7.9 * kHour);
    const double c = 5.0;
    for (double restart_min : {5.0, 10.0, 20.0}) {
        RunInput in = failing_run(1024, 7.9 * kHour);
        in.steps = 300000;  // 300000 s of compute: 1000 segments of 5 min
        in.deterministic_step_s = 1.0;
        in.checkpoint_bytes = c * 1.0e12;
        in.failures.restart_s = restart_min * 60;
        in.failures.checkpoint_interval_s = 300.0;

        const RunMetrics m = evaluate_run(in, 0, 0);

        // Independent closed form (Bougeret et al.): n e^{lambda R}(1/lambda)(e^{lambda(tau+C)}-1).
        const double expected_time =
            1000 * std::exp(lambda * restart_min * 60) / lambda * std::expm1(lambda * (300.0 + c));
        EXPECT_NEAR(m.ettr, 300000.0 / expected_time, 1e-9);
        EXPECT_GT(m.ettr, 0.90) << "restart " << restart_min << " min";
        EXPECT_LT(m.ettr, 0.97) << "restart " << restart_min << " min";
    }
}

TEST(RunModel, KokolisEttrFallsWithLongerIntervalsAndRestarts) {
    // The table of the report: ETTR for 5/30/60-minute checkpoints and 5-20-minute restarts,
    // same assumptions as above (C = 5 s blocking, detection folded into the restart).
    const std::vector<double> intervals_min{5, 30, 60};
    const std::vector<double> restarts_min{5, 10, 15, 20};
    std::vector<std::vector<double>> ettr(intervals_min.size());
    for (std::size_t i = 0; i < intervals_min.size(); ++i) {
        for (double restart_min : restarts_min) {
            RunInput in = failing_run(1024, 7.9 * kHour);
            in.steps = 1000000;
            in.deterministic_step_s = 1.0;
            in.checkpoint_bytes = 5.0e12;
            in.failures.restart_s = restart_min * 60;
            in.failures.checkpoint_interval_s = intervals_min[i] * 60;
            ettr[i].push_back(evaluate_run(in, 0, 0).ettr);
        }
    }

    std::printf("ETTR, 1024 GPUs, job MTTF 7.9 h, C = 5 s; restart 5 / 10 / 15 / 20 min\n");
    for (std::size_t i = 0; i < intervals_min.size(); ++i) {
        std::printf("  checkpoint every %2.0f min:", intervals_min[i]);
        for (double e : ettr[i]) std::printf(" %.3f", e);
        std::printf("\n");
    }
    for (std::size_t i = 0; i < intervals_min.size(); ++i) {
        for (std::size_t r = 0; r < restarts_min.size(); ++r) {
            if (i > 0) {
                EXPECT_LT(ettr[i][r], ettr[i - 1][r]);
            }
            if (r > 0) {
                EXPECT_LT(ettr[i][r], ettr[i][r - 1]);
            }
        }
    }
}

}  // namespace
}  // namespace prism
