#pragma once

// Rare hiccups (HiccupSpec, spec.hpp; issue 35): in each step each of the job's n nodes stalls
// with probability q for a delay D (lognormal, or a Pareto tail); every rank waits for it at the
// next collective, so the step is S + H, S the step without hiccups and H the largest delay over
// the nodes (0 where none stalls), independent of S. H's law in closed form: for h >= 0
//   G(h) = P(H <= h) = (1 - q + q F_D(h))^n,  an atom G(0) = (1 - q)^n at 0,
// and its inverse G^-1(u) = F_D^-1((u^(1/n) - (1 - q)) / q) for u > G(0). Monte Carlo draws H
// exactly by that inverse (one uniform per step); the analytic evaluator takes the step's CDF
//   F(t) = G(0) F_S(t) + E_S[G(t - S) - G(0); t > S]
// with the expectation over S's quantiles (the integrand is continuous in t, so the CDF has no
// staircase; error second order in S's quantile spacing against H's scale).

#include <cstdint>
#include <functional>
#include <vector>

#include "src/model/spec.hpp"
#include "src/model/step_profile.hpp"

namespace prism::stochastic::detail {

/// The time a step takes on top of the rest of the model: H, the largest hiccup delay over
/// `nodes` nodes, plus E, the periodic events' time (PeriodicEvent, spec.hpp), independent of
/// H. Over a run E takes the value e_j on a share w_j of the steps: the events' pattern over one
/// common period (the periods' least common multiple, up to 10^6 steps; beyond, the events are
/// taken as independent with probabilities 1 / every). One event every N steps adds its duration
/// to the mean / N and moves only the quantiles above 1 - 1 / N (p99 and up for N = 100).
class HiccupLaw {
  public:
    HiccupLaw() = default;
    HiccupLaw(const HiccupSpec& spec, double nodes,
              const std::vector<PeriodicEvent>& periodic = {});

    bool active() const { return hiccup_ || shift_s_.size() > 1 || shift_s_.front() != 0; }
    double nodes() const { return n_; }
    double p0() const { return p0_; }  ///< P(H = 0), no node stalls
    double cdf(double h) const;        ///< P(H + E <= h)
    double quantile(double u) const;   ///< the left-continuous inverse of cdf
    double mean() const { return mean_ + e_mean_; }
    double var() const { return var_ + e_var_; }
    /// H alone
    double hiccup_cdf(double h) const;
    double hiccup_quantile(double u) const;  ///< 0 for u <= p0
    /// E's values and their shares of the steps
    const std::vector<double>& shift_s() const { return shift_s_; }
    const std::vector<double>& shift_weight() const { return weight_; }
    /// H + E from two uniforms (H by its inverse, E by its shares)
    double draw(double u_hiccup, double u_periodic) const;
    /// Adds an independent discrete term to E (the stalls' W, stall_law): E becomes E + W,
    /// its shares the products (equal values merged).
    void add_independent(const std::vector<double>& value, const std::vector<double>& weight);

  private:
    /// P(D > d), one node's delay beyond d
    double delay_sf(double d) const;
    /// the d with P(D > d) = tail
    double delay_upper_quantile(double tail) const;
    /// e_mean_ and e_var_ from E's values and shares
    void set_shift_moments();

    bool hiccup_ = false;
    bool pareto_ = false;
    double n_ = 1, q_ = 0, mu_ = 0, sigma_ = 0, p0_ = 1, mean_ = 0, var_ = 0;
    double alpha_ = 0, scale_ = 0;  ///< Pareto: shape and d_m
    std::vector<double> shift_s_{0.0}, weight_{1.0};
    double e_mean_ = 0, e_var_ = 0;
};

/// The nodes a point's job spans (its GPUs over the hardware's GPUs per node, rounded up).
double job_nodes(const DesignPoint& point, const HardwareSpec& hardware);

/// How a step's stalls (StallSpec, spec.hpp) reach it: `syncs` times a step the data-parallel
/// group waits for its slowest member; a member is `nodes_per_member` nodes whose stalls add up
/// between two synchronizations (a pipeline's nodes, or a TP x CP group wider than a node), and
/// the group has `members` of them.
///   FSDP / ZeRO-3 (dp_lockstep): each layer's two parameter AllGathers gate its forward and
///     its backward: syncs = 2 x layers per rank x microbatches; the members are one stage's
///     DP group (job nodes / stages of them), each its TP x CP group's nodes;
///   otherwise: once a step (the gradient reduction); the members are the replicas, each its
///     TP x CP x PP GPUs' nodes (1 where replicas share nodes: then every node is a member).
struct StallShape {
    double syncs = 1;
    double members = 1;
    double nodes_per_member = 1;
};
StallShape stall_shape(const StepProfile& profile, const DesignPoint& point,
                       const HardwareSpec& hardware);

/// W, what the stalls add to a step of `step_s`, as a discrete law (`value` in s, `weight`
/// summing to 1): W = d sum_{j=1..syncs} M_j, M_j iid the largest of `members` iid Poisson(mu)
/// counts, mu = nodes_per_member x (fraction / d) x step_s / syncs. M's law exactly (P(M <= x)
/// = F_Poisson(x)^members; a normal Poisson above mu = 1000); the sum exactly by convolution
/// while its mean is at most kStallExactMean stalls, else by the normal law of the same mean and
/// variance (its central limit; atoms at 1/8 sd over +-6 sd). Empty when inactive.
inline constexpr double kStallExactMean = 64;
void stall_law(const StallSpec& spec, const StallShape& shape, double step_s,
               std::vector<double>& value, std::vector<double>& weight);

/// Monte Carlo: adds to step k an exact draw of H + E from the stream (seed, point_index,
/// StreamKind::hiccup, k): H by the inverse of its CDF, E by its shares (two uniforms).
void add_hiccups(std::vector<double>& steps, const HiccupLaw& law, std::uint64_t seed,
                 std::uint64_t point_index);

/// The CDF and quantiles of S + H, S given by its CDF and `nodes` of its quantiles at
/// (k + 1/2) / K (sorted).
class HiccupStep {
  public:
    HiccupStep(const HiccupLaw& law, std::function<double(double)> s_cdf,
               std::vector<double> s_nodes);

    double cdf(double t) const;
    /// the t with cdf(t) = prob, by bisection to 1e-12 relative
    double quantile(double prob) const;

  private:
    const HiccupLaw& law_;
    std::function<double(double)> s_cdf_;
    std::vector<double> s_nodes_;
};

/// Quantiles of S at (k + 1/2) / K that HiccupStep averages over.
inline constexpr int kHiccupStepNodes = 64;

}  // namespace prism::stochastic::detail
