// Statistical efficiency (src/cotune/efficiency.hpp) against closed forms and against a
// step-by-step simulation of a run (an independent, slower implementation of the same model:
// each step at batch B makes 1 / (1 + B_noise(s)/B) optimal-batch steps of progress).

#include "src/cotune/efficiency.hpp"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace prism::cotune {
namespace {

TEST(McCandlish, StepsAndTokensSatisfyTheTradeoffRelation) {
    // (S/S_min - 1)(E/E_min - 1) = 1 with E_min = S_min B_noise (McCandlish section 2.3).
    const double s_min = 12345.0, b_noise = 3.0e6, e_min = s_min * b_noise;

    for (double ratio : {1e-3, 0.01, 0.1, 0.5, 1.0, 2.0, 10.0, 100.0, 1e3}) {
        const double batch = ratio * b_noise;
        const double s = mccandlish_steps(s_min, b_noise, batch);
        const double e = mccandlish_tokens(e_min, b_noise, batch);

        EXPECT_NEAR((s / s_min - 1.0) * (e / e_min - 1.0), 1.0, 1e-12) << ratio;
        EXPECT_NEAR(e, s * batch, 1e-12 * e) << ratio;  // tokens = steps x batch
    }
}

TEST(McCandlish, AtTheNoiseScaleStepsAndTokensDouble) {
    const double s_min = 5000.0, b_noise = 4.0e6;

    EXPECT_DOUBLE_EQ(mccandlish_steps(s_min, b_noise, b_noise), 2.0 * s_min);
    EXPECT_DOUBLE_EQ(mccandlish_tokens(s_min * b_noise, b_noise, b_noise), 2.0 * s_min * b_noise);
}

TEST(Pollux, EfficiencyIsOneAtTheBaseBatchAndTheTokenRatioElsewhere) {
    const double phi = 2.0e6, m0 = 1.0e6;

    EXPECT_DOUBLE_EQ(pollux_efficiency(phi, m0, m0), 1.0);
    for (double m : {0.25e6, 4e6, 64e6}) {
        // E(M0) / E(M) with E = E_min (1 + M/phi)
        const double ratio = mccandlish_tokens(1.0, phi, m0) / mccandlish_tokens(1.0, phi, m);
        EXPECT_NEAR(pollux_efficiency(phi, m0, m), ratio, 1e-15) << m;
    }
}

TEST(NoiseWalk, ConstantNoiseGivesMcCandlishClosedForms) {
    const NoiseProfile noise = NoiseProfile::constant(2.0e6);
    const double target = 40000.0;

    for (double batch : {0.5e6, 2e6, 16e6}) {
        const Progress p = walk_to_target(noise, target, batch, {}, 0.0);

        EXPECT_NEAR(p.steps, mccandlish_steps(target, 2.0e6, batch), 1e-9 * p.steps);
        EXPECT_NEAR(p.tokens, mccandlish_tokens(target * 2.0e6, 2.0e6, batch), 1e-9 * p.tokens);
        EXPECT_NEAR(p.equivalent_steps, p.steps, 1e-9 * p.steps);
    }
}

TEST(NoiseWalk, WarmUpAddsHalfItsStepsAtTheFirstBatch) {
    const NoiseProfile noise = NoiseProfile::constant(2.0e6);
    const Progress plain = walk_to_target(noise, 40000.0, 4e6, {}, 0.0);

    const Progress warm = walk_to_target(noise, 40000.0, 4e6, {}, 2000.0);

    EXPECT_NEAR(warm.steps - plain.steps, 1000.0, 1e-6);
    EXPECT_NEAR(warm.tokens - plain.tokens, 1000.0 * 4e6, 1e-3);
}

// Kaplan et al. 2020 Table 5 constants; the literals are worked by hand (log10 arithmetic).
TEST(Kaplan, CriticalBatchAndLossPathFollowTheirFormulas) {
    const KaplanParams k;

    // 2.1e8 / 2^(1/0.21) = 2.1e8 / 2^4.7619 = 2.1e8 / 27.13 = 7.74e6 tokens
    EXPECT_NEAR(kaplan_critical_batch(k, 2.0), 7.74e6, 0.01e6);
    // N = 1e9: (8.8e13/1e9)^0.076 = 8.8e4^0.076 = 10^(4.944 x 0.076) = 10^0.3758 = 2.376;
    // S_min = 2.1e4 adds (0.1)^0.76 = 0.1738
    EXPECT_NEAR(kaplan_loss(k, 1e9, 2.1e4), 2.376 + 0.1738, 2e-3);
    EXPECT_NEAR(kaplan_min_steps(k, 1e9, kaplan_loss(k, 1e9, 2.1e4)), 2.1e4, 1e-6);
}

TEST(Kaplan, TargetBelowTheAsymptoteIsRejected) {
    EXPECT_THROW(
        {
            try {
                kaplan_min_steps(KaplanParams{}, 1e9, 2.3);
            } catch (const ConfigError& e) {
                EXPECT_NE(std::string(e.what()).find("cotune.target_loss: 2.3 is not above"),
                          std::string::npos)
                    << e.what();
                throw;
            }
        },
        ConfigError);
}

/// Steps one at a time: a step at batch B (the ramp's batch until its token threshold, then
/// `batch`) makes lr_fraction / (1 + B_noise(s)/B) progress, the warm-up's learning rate rising
/// linearly ((k + 0.5)/W of the peak at step k).
Progress simulate(const KaplanParams& k, double parameters, double target, double batch,
                  const std::vector<RampPhase>& ramp, double warmup) {
    const double asymptote = std::pow(k.n_c / parameters, k.alpha_n);
    Progress out;
    double s = 0;
    while (s < target) {
        double b = batch, ratio = 1.0;
        for (const RampPhase& phase : ramp) {
            if (out.tokens < phase.until_tokens) {
                b = phase.batch_tokens;
                ratio = phase.step_time_ratio;
                break;
            }
        }
        const double lr_fraction = out.steps < warmup ? (out.steps + 0.5) / warmup : 1.0;
        const double noise =
            s > 0 ? kaplan_critical_batch(k, asymptote + std::pow(k.s_c / s, k.alpha_s)) : 0.0;
        s += lr_fraction / (1.0 + noise / b);
        out.steps += 1;
        out.tokens += b;
        out.equivalent_steps += ratio;
    }
    return out;
}

TEST(NoiseWalk, KaplanProfileMatchesAStepByStepSimulation) {
    // Llama-3-8B-sized N, a target loss 0.2 nats above its Kaplan asymptote: ~5e4 optimal-batch
    // steps. The walk integrates continuously; the simulation counts whole steps, so they may
    // differ by ~1 step per phase boundary: tolerance 1e-4 relative (5 steps).
    const KaplanParams k;
    const double n = 7.0e9;
    const double loss = std::pow(k.n_c / n, k.alpha_n) + 0.2;
    const double target = kaplan_min_steps(k, n, loss);
    const NoiseProfile noise = NoiseProfile::kaplan(k, n, target);
    const std::vector<RampPhase> ramp{{1e6, 2e10, 0.6}, {2e6, 8e10, 0.8}};

    for (double batch : {0.5e6, 4e6, 32e6}) {
        const Progress walk = walk_to_target(noise, target, batch, {}, 0.0);
        const Progress sim = simulate(k, n, target, batch, {}, 0.0);
        EXPECT_NEAR(walk.steps / sim.steps, 1.0, 1e-4) << batch;
        EXPECT_NEAR(walk.tokens / sim.tokens, 1.0, 1e-4) << batch;
    }
    // with a ramp (phases below the final batch) and a warm-up
    const Progress walk = walk_to_target(noise, target, 4e6, ramp, 3000.0);
    const Progress sim = simulate(k, n, target, 4e6, ramp, 3000.0);
    EXPECT_NEAR(walk.steps / sim.steps, 1.0, 1e-4);
    EXPECT_NEAR(walk.tokens / sim.tokens, 1.0, 1e-4);
    EXPECT_NEAR(walk.equivalent_steps / sim.equivalent_steps, 1.0, 1e-4);
}

TEST(NoiseWalk, KaplanIntegralMatchesAFineTrapezoidSum) {
    // Independent quadrature: a trapezoid sum over 2e6 log-spaced intervals (error ~1e-12).
    const KaplanParams k;
    const double n = 7.0e9, target = 6.0e4;
    const NoiseProfile noise = NoiseProfile::kaplan(k, n, target);
    const double asymptote = std::pow(k.n_c / n, k.alpha_n);
    auto b = [&](double s) {
        return kaplan_critical_batch(k, asymptote + std::pow(k.s_c / s, k.alpha_s));
    };
    const int m = 2000000;
    const double lo = target * 1e-9;
    double sum = 0, prev_s = lo, prev_b = b(lo);
    for (int i = 1; i <= m; ++i) {
        const double s = lo * std::pow(target / lo, static_cast<double>(i) / m);
        const double bs = b(s);
        sum += 0.5 * (bs + prev_b) * (s - prev_s);
        prev_s = s;
        prev_b = bs;
    }

    EXPECT_NEAR(noise.integral(target) / sum, 1.0, 1e-9);
}

TEST(NoiseWalk, ProgressOfTokensInvertsTheReferenceRun) {
    const KaplanParams k;
    const double n = 7.0e9, m0 = 4e6;
    const NoiseProfile noise = NoiseProfile::kaplan(k, n, 1e12 / m0);

    const double s = progress_of_tokens(noise, m0, 1e12);

    EXPECT_NEAR(m0 * s + noise.integral(s), 1e12, 1e-9 * 1e12);
}

}  // namespace
}  // namespace prism::cotune
