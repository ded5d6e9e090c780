#pragma once

// The max over replicas (DESIGN.md section 3: "the max of n iid variables has CDF F(t)^n,
// exactly"): F_D, the CDF of D = the slowest replica's Delta, on the x grid, from the replica
// types' sf (replica_law.hpp).
//
// Given the slow units, replicas are independent: a scenario (replica_types.hpp) contributes its
// weight times prod_t F_t^(count_t), in log space. In PGF mode the slow units are independent
// too: F_D = F_h^d (1 - q + q A)^units, A the mean over a slow unit's patterns of the product of
// its replicas' CDF ratios to the healthy replica F_h. Approximations: a replica holding several
// slow units (K ~ Binomial(u, q) when every replica has u units) takes the one-unit mixture's
// stage terms as their max and their linear effects added (shifted by K s); under random
// placement the same per slow-GPU count, the count's correction interpolated between 32 counts.

#include <cstddef>
#include <vector>

#include "src/stochastic/detail/analytic/common.hpp"
#include "src/stochastic/detail/analytic/replica_law.hpp"
#include "src/stochastic/detail/analytic/replica_types.hpp"

namespace prism::stochastic::detail::ssta {

class ReplicaMax {
  public:
    ReplicaMax(const StepModel& m, const ReplicaSet& set, const Grid& x, bool linear_pgf);

    /// F_D on the x grid from the types' sf `sft`, the one-unit mixture's `sfm` and (random
    /// placement) that mixture without the types' offsets `sfw`
    std::vector<double> table(const std::vector<std::vector<double>>& sft,
                              const std::vector<double>& sfm, const std::vector<double>& sfw) const;

  private:
    /// sum over the scenarios of weight * prod_t F_t^count
    std::vector<double> scenario_sum(const std::vector<std::vector<double>>& sft) const;
    /// per_replica: sum_k P(K = k) F_K / F_h per grid point
    std::vector<double> per_replica_sum(const std::vector<double>& sfh,
                                        const std::vector<double>& sfm) const;
    /// random placement: the sum over the slow-GPU count N of P(N) r^N (E c_K)^d per point
    std::vector<double> random_count_sum(const std::vector<double>& sfh,
                                         const std::vector<double>& sfm,
                                         const std::vector<double>& sfw) const;
    /// random placement: c_k on the grid for k = 2 .. k_cap (1 where F_h or F_1 is 0)
    std::vector<std::vector<double>> random_corrections(const std::vector<double>& fh,
                                                        const std::vector<double>& lfh,
                                                        const std::vector<double>& lr,
                                                        const std::vector<double>& fw) const;
    void set_per_replica();
    void set_random_counts();

    const StepModel& m_;
    const ReplicaSet& set_;
    Grid x_;
    bool linear_pgf_ = false;
    /// Slow units that each touch one replica, the same number u in every replica: replicas
    /// are independent, each with K ~ Binomial(u, q) slow units (binom_k_, lin_shift_mix_ the
    /// mean linear effect of one)
    bool per_replica_ = false;
    std::vector<double> binom_k_;
    double lin_shift_mix_ = 0;
    /// random placement: P(N = n); per node count, P(K = k | N) for k < size; node j is the
    /// count n_lo_ + j n_step_; s D(k)
    bool random_replicas_ = false;
    std::vector<double> p_n_;
    std::vector<std::vector<double>> k_of_n_;
    std::size_t n_lo_ = 0, n_step_ = 1;
    std::vector<double> shift_k_;
    int k_cap_ = 1;
};

/// Mean and variance of a CDF tabulated on the grid x (trapezoids of the sf).
void grid_moments(const std::vector<double>& F, const Grid& x, double& mean, double& var);

}  // namespace prism::stochastic::detail::ssta
