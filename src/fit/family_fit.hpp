#pragma once

// Fitting one kernel class's transient factor X (DESIGN.md section 2: mean 1, normal, lognormal
// or gamma, fitted by maximum likelihood and chosen by Kolmogorov-Smirnov distance) from
// repeated invocations of many kernels.
//
// Kernels of one class differ in size by orders of magnitude, so each kernel (a "group": one
// kernel name, launch shape and call site, seen once per step) keeps its own location and only
// the spread around it is fitted. Every family is fitted by its conditional likelihood given
// the groups' locations, which removes the small-sample bias of dividing by a group's own
// mean (3 to 6 steps per group in typical traces):
//   - lognormal: ln x = mu_g + sigma Z; the pooled within-group variance with n_g - 1 degrees
//     of freedom (REML) is the conditional MLE of sigma^2;
//   - gamma: x ~ Gamma(k, theta_g); the shares u = x / sum_g x are Dirichlet(k, ..., k) whatever
//     theta_g, so k maximizes the Dirichlet likelihood (a scale-free conditional likelihood);
//   - normal: x = mu_g (1 + c Z); c^2 is the pooled variance of x / mean_g with n_g - 1 degrees
//     of freedom (mu_g taken at the group mean).
// Groups weigh by their median duration, so a class's cv is its time-weighted spread (the
// spread of the class's share of a step, not of its many tiny kernels). The goodness of fit is
// the KS distance of the probability-integral transforms (PIT) of all invocations under each
// fitted family, exact for lognormal (the residual ln x - mean_g is normal with variance
// sigma^2 (n - 1) / n) and gamma (u is Beta(k, (n - 1) k)), approximate for normal.
//
// Real kernels are often steady to a fraction of a percent with rare slow invocations (a
// concurrent collective on another stream): no single family fits that. A fourth candidate,
// a lognormal body with a rare slow mode (detail/mixture_fit.hpp, EM), is chosen when its KS
// distance beats the best single family's by more than the 5% KS scale (a fit better than
// sampling noise can explain, not merely better with its three extra parameters).

#include <array>
#include <cstddef>
#include <vector>

#include "src/model/spec.hpp"

namespace prism::fit {

/// The repeated durations (s) of one kernel: the same name, launch shape and call site.
struct KernelGroup {
    std::vector<double> durations_s;
};

/// One family's fit: the cv of X (mean 1) and its goodness of fit.
struct FamilyFit {
    DistKind kind = DistKind::lognormal;  ///< normal, lognormal, gamma or mixture (slow mode)
    double cv = 0;          ///< of X, after removing the timer's resolution (see TransientFit)
    double ks = 1;          ///< weighted KS distance of the invocations' PITs to uniform
    DistributionSpec spec;  ///< X itself (mean 1), as an experiment would give it
};

/// The slow-mode mixture's parameters (on the factor scale, the body's location = 1).
struct SlowMode {
    double weight = 0;  ///< probability of a slow invocation
    double factor = 1;  ///< median slow invocation / median body invocation
    double body_cv = 0;
    double slow_cv = 0;
};

struct TransientFit {
    std::array<FamilyFit, 3> families;  ///< normal, lognormal, gamma in that order
    FamilyFit slow_mode_fit;  ///< lognormal body + rare slow mode (kind mixture); ks 1 if none
    SlowMode slow_mode;
    FamilyFit best;           ///< the smallest KS distance (the mixture only past the 5% KS scale)
    std::size_t groups = 0;   ///< groups with 2 or more invocations used
    std::size_t samples = 0;  ///< invocations used
    double effective_samples = 0;  ///< (sum w)^2 / sum w^2 over the invocations
    /// KS distance that a correct model exceeds with probability 5% at effective_samples
    /// independent draws (1.358 / sqrt(n)); residuals of one group are not independent, so
    /// read it as a scale, not a test.
    double ks_critical_5pct = 0;
    /// Share of the raw fitted variance that the timer's resolution explains (removed from the
    /// cv by Sheppard's correction, resolution^2 / 12 per invocation).
    double resolution_share = 0;
    /// Quantile-quantile pairs of X for the best family: (fitted quantile, empirical quantile)
    /// at probabilities (i + 0.5) / n.
    std::vector<std::array<double, 2>> qq;
};

struct TransientFitOptions {
    double resolution_s = 0;  ///< the timer's resolution (0 = exact durations)
    int qq_points = 99;
};

/// Fits normal, lognormal and gamma to `groups` (groups with fewer than 2 positive durations
/// are skipped) and picks the smallest KS distance. Throws ModelError when fewer than 2
/// invocations in groups of 2 or more remain.
TransientFit fit_transient(const std::vector<KernelGroup>& groups,
                           const TransientFitOptions& options = {});

/// The weighted KS distance of probability-integral transforms `pit` (weights `weight`) to
/// the uniform distribution.
double ks_uniform(std::vector<double> pit, std::vector<double> weight);

}  // namespace prism::fit
