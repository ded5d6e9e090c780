#pragma once

// The max over replicas (DESIGN.md section 3: "the max of n iid variables has CDF F(t)^n,
// exactly"): F_D, the CDF of D = the slowest replica's Delta, on the x grid, from the replica
// types' sf (replica_law.hpp).
//
// Given the slow units, replicas are independent: a scenario (replica_types.hpp) contributes its
// weight times prod_t F_t^(count_t), in log space. In PGF mode the slow units are independent
// too: F_D = F_h^d (1 - q + q A)^units, A the mean over a slow unit's patterns of the product of
// its replicas' CDF ratios to the healthy replica F_h. Approximation: a replica holding several
// slow units (K ~ Binomial(u, q) when every replica has u units) takes the one-unit mixture's
// stage terms as their max and their linear effects added (shifted by K s).

#include <vector>

#include "src/stochastic/detail/analytic/common.hpp"
#include "src/stochastic/detail/analytic/replica_law.hpp"
#include "src/stochastic/detail/analytic/replica_types.hpp"

namespace prism::stochastic::detail::ssta {

class ReplicaMax {
  public:
    ReplicaMax(const StepModel& m, const ReplicaSet& set, const Grid& x, bool linear_pgf);

    /// F_D on the x grid from the types' sf `sft` and the one-unit mixture's `sfm`
    std::vector<double> table(const std::vector<std::vector<double>>& sft,
                              const std::vector<double>& sfm) const;

  private:
    /// sum over the scenarios of weight * prod_t F_t^count
    std::vector<double> scenario_sum(const std::vector<std::vector<double>>& sft) const;
    /// per_replica: sum_k P(K = k) F_K / F_h per grid point
    std::vector<double> per_replica_sum(const std::vector<double>& sfh,
                                        const std::vector<double>& sfm) const;
    void set_per_replica();

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
};

/// Mean and variance of a CDF tabulated on the grid x (trapezoids of the sf).
void grid_moments(const std::vector<double>& F, const Grid& x, double& mean, double& var);

}  // namespace prism::stochastic::detail::ssta
