#pragma once

// Positive random factors (DESIGN.md section 2): constant, normal truncated at 0, lognormal,
// gamma, empirical and mixtures, parameterized by mean and cv. Closed-form CDF and quantile
// where they exist (numerical inversion otherwise), exact moments, and the distribution of the
// maximum of n iid copies (CDF F^n, quantile F^-1(p^(1/n)) evaluated through the upper tail so
// that n = 65536 keeps full precision).

#include <memory>
#include <vector>

#include "src/model/spec.hpp"

namespace prism::stochastic {

/// Standard normal CDF, upper tail and quantile (Wichura, AS241, relative error ~1e-16).
double normal_cdf(double z);
/// Standard normal density.
double normal_pdf(double z);
double normal_sf(double z);
double normal_quantile(double p);

/// Regularized lower / upper incomplete gamma functions P(a, x), Q(a, x) (Numerical Recipes
/// 6.2: series below a + 1, Lentz continued fraction above).
double gamma_p(double a, double x);
double gamma_q(double a, double x);

/// Mean and variance of a random variable.
struct Moments {
    double mean = 0;
    double var = 0;
};

class Distribution {
  public:
    /// Throws ConfigError for a negative cv or mean, an empty empirical sample, a mixture with
    /// no positive weight.
    explicit Distribution(const DistributionSpec& spec);
    Distribution() : Distribution(DistributionSpec{}) {}

    DistKind kind() const { return kind_; }
    bool is_constant() const;

    double mean() const;
    double variance() const;

    double cdf(double x) const;
    /// Upper tail 1 - F(x), accurate when small.
    double sf(double x) const;
    /// F^-1(u), u in (0, 1); the left-continuous inverse for atoms and empirical samples.
    double quantile(double u) const;
    /// F^-1(1 - q) for an upper-tail probability q, accurate for tiny q.
    double quantile_upper(double q) const;
    /// F^-1(Phi(z)): the quantile at normal score z (closed form for normal and lognormal).
    double quantile_of_score(double z) const;
    /// E[X 1{z1 < Z <= z2}] for X = F^-1(Phi(Z)), Z standard normal (z1 may be -inf, z2 +inf):
    /// closed form for constant, normal (untruncated) and lognormal, else 8-point
    /// Gauss-Legendre on panels of at most 0.25 in z over [max(z1, -8), min(z2, 8)].
    double partial_mean_of_scores(double z1, double z2) const;

    /// Quantile of the max of n iid copies: F^-1(p^(1/n)).
    double max_quantile(double p, double n) const;
    /// CDF of the max of n iid copies, F(x)^n.
    double max_cdf(double x, double n) const;
    /// Mean and variance of the max of n iid copies (n >= 1, real n allowed), by quadrature of
    /// E[Y] = x0 + int (1 - F^n) dx over a quantile-spaced grid.
    Moments max_moments(double n) const;

    /// A draw by inversion from a uniform u in (0, 1).
    double sample(double u) const { return quantile(u); }

  private:
    DistKind kind_ = DistKind::constant;
    double mean_ = 1.0;
    double cv_ = 0.0;
    // normal (truncated at 0): parent parameters and mass below 0
    double mu_ = 1.0, sigma_ = 0.0, below0_ = 0.0;
    // lognormal: log-space parameters
    double lmu_ = 0.0, lsigma_ = 0.0;
    // gamma: shape and scale
    double shape_ = 1.0, scale_ = 1.0;
    std::vector<double> samples_;  // sorted
    std::vector<double> weights_;  // mixture, normalized
    std::vector<Distribution> components_;
};

}  // namespace prism::stochastic
