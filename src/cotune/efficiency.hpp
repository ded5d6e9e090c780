#pragma once

// Statistical efficiency of large-batch training: how many optimizer steps and tokens a target
// takes at a batch B (DESIGN.md section 6).
//
// McCandlish, Kaplan, Amodei et al., "An empirical model of large-batch training" (2018),
// section 2.3: with the learning rate tuned for each batch, the steps S and tokens E to reach a
// fixed loss satisfy (S/S_min - 1)(E/E_min - 1) = 1, i.e. S = S_min (1 + B_noise/B) and
// E = E_min (1 + B/B_noise), E_min = S_min B_noise. Per step at batch B the run makes
// dS_min = dS / (1 + B_noise/B) of progress, measured in optimal-batch steps S_min.
//
// The noise scale grows as the loss falls (McCandlish section 3; Kaplan et al. 2020 section 5.1:
// B_crit(L) = B*/L^(1/alpha_B)). Along a run, progress s = S_min then costs
// dS = ds (1 + B_noise(s)/B) and dE = B dS = (B + B_noise(s)) ds, so with the integral
// I(s) = int_0^s B_noise(u) du a phase at batch B from s0 to s1 takes
// S = (s1 - s0) + (I(s1) - I(s0))/B steps: a constant B_noise is the case I(s) = B_noise s.
//
// Pollux (Qiao et al., OSDI'21, section 3.1) scores a batch M against a base batch M0 by the
// statistical efficiency (phi + M0)/(phi + M), phi the gradient noise scale: the ratio
// E(M0)/E(M) of the tokens the two batches need, so goodput = throughput x efficiency is the
// base-batch tokens of progress per second.

#include <span>
#include <vector>

#include "src/cotune/spec.hpp"

namespace prism::cotune {

/// S_min (1 + B_noise/B): steps to the target at batch B (McCandlish section 2.3).
double mccandlish_steps(double min_steps, double b_noise_tokens, double batch_tokens);
/// E_min (1 + B/B_noise): tokens to the target at batch B.
double mccandlish_tokens(double min_tokens, double b_noise_tokens, double batch_tokens);
/// Pollux's efficiency of batch M against base batch M0: (phi + M0)/(phi + M); 1 at M = M0.
double pollux_efficiency(double phi_tokens, double base_batch_tokens, double batch_tokens);

/// Kaplan et al. 2020 Eq. 5.3: B_crit(L) = B* / L^(1/alpha_B) (tokens; L in nats).
double kaplan_critical_batch(const KaplanParams& k, double loss);
/// Kaplan Eq. 5.6: L(N, S_min) = (N_c/N)^alpha_N + (S_c/S_min)^alpha_S.
double kaplan_loss(const KaplanParams& k, double parameters, double min_steps);
/// The S_min at which kaplan_loss reaches `loss`. Throws ConfigError
/// ("cotune.target_loss: ...") when `loss` is not above the asymptote (N_c/N)^alpha_N.
double kaplan_min_steps(const KaplanParams& k, double parameters, double loss);

/// B_noise along the progress s (in optimal-batch steps S_min) and its integral I(s).
class NoiseProfile {
  public:
    /// B_noise constant (tokens, > 0): I(s) = B_noise s, exact.
    static NoiseProfile constant(double b_noise_tokens);
    /// B_noise(s) = B_crit(L(N, s)) (Kaplan Eqs. 5.3, 5.6) for s in [0, max_progress]. I(s) is
    /// summed once at nodes spaced 1.122x apart (8-point Gauss-Legendre per panel) and
    /// completed from the nearest node below s by one more panel: relative error ~1e-13.
    static NoiseProfile kaplan(const KaplanParams& k, double parameters, double max_progress);

    /// B_noise at progress s (tokens).
    double at(double progress) const;
    /// I(s) = int_0^s B_noise (tokens x steps).
    double integral(double progress) const;
    /// Largest s the profile covers (+inf for a constant).
    double max_progress() const noexcept { return max_progress_; }
    bool is_constant() const noexcept { return kaplan_params_.empty(); }

  private:
    double integral_between(double from, double to) const;

    double constant_ = 0;
    std::vector<KaplanParams> kaplan_params_;  ///< one entry for the Kaplan profile
    double parameters_ = 0;
    double asymptote_ = 0;  ///< (N_c/N)^alpha_N
    double max_progress_ = 0;
    std::vector<double> node_;      ///< s_j, increasing, node_[0] = 0
    std::vector<double> integral_;  ///< I(s_j)
};

/// A phase of a batch ramp as the walk uses it: batch, where it ends (tokens trained), and its
/// step time relative to the point's own (final) batch.
struct RampPhase {
    double batch_tokens = 0;
    double until_tokens = 0;
    double step_time_ratio = 1;
};

/// Steps and tokens to make `target_progress` of progress (S_min units).
struct Progress {
    double steps = 0;   ///< optimizer steps, warm-up included
    double tokens = 0;  ///< tokens trained
    /// steps weighted by their step time relative to the final batch's: the run takes
    /// equivalent_steps x the final batch's step time
    double equivalent_steps = 0;
};

/// Walks a run: a linear warm-up of `warmup_steps` at the first batch counts as warmup/2 steps
/// without progress (progress per step taken proportional to the learning rate, whose mean over
/// a linear ramp is half the peak: an assumption), then each ramp phase (increasing batches
/// below `batch_tokens`) until its token threshold, then `batch_tokens` until the target.
Progress walk_to_target(const NoiseProfile& noise, double target_progress, double batch_tokens,
                        std::span<const RampPhase> ramp, double warmup_steps);

/// The progress s at which the reference batch has trained `tokens`: the root of
/// M0 s + I(s) = tokens.
double progress_of_tokens(const NoiseProfile& noise, double reference_batch_tokens, double tokens);

}  // namespace prism::cotune
