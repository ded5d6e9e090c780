#pragma once

// The law of a TP group's persistent factor g (DESIGN.md section 2, the G of base x X x G x R):
// the largest member factor max G over the group's GPUs (spatial spread, slow members at
// slow_factor) mapped through the effective factor phi_k (effective_factor.hpp). The analytic
// evaluator reads these laws as log CDFs, tabulated once per thread for each distinct law.
// Approximations: the group's factor given its largest member factor taken at its conditional
// mean (phi_k; a lockstep stage uses phi_0 whatever its slow members); the table interpolated
// linearly between 4097 points (the accuracy tests check the end result).

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "src/stochastic/detail/kernels.hpp"
#include "src/stochastic/detail/persistent.hpp"
#include "src/stochastic/detail/step_model.hpp"

namespace prism::stochastic::detail::ssta {

inline double log_spatial_cdf(const Distribution& S, double x) {
    const double f = S.cdf(x);
    if (f <= 0) return -1e300;
    const double sf = S.sf(x);
    return sf < 0.5 ? std::log1p(-sf) : std::log(f);
}

struct LawTable;

/// log of the CDF of a group factor: prod over units spanned of ((1-q) F(g)^c + q F(g/sf)^c)
struct GroupLaw {
    const StepModel* m = nullptr;
    std::vector<std::pair<int, int>> unit_members;  ///< (members per unit, how many such units)
    int slow_members = -1;  ///< >= 0: a fixed number of slow members (variability-aware)
    double power = 1;       ///< max over `power` iid groups (lockstep)
    /// lockstep: slow GPUs of the whole stage, besides the power (K slow units' members)
    int lock_slow = 0;
    /// lockstep: lock_units units each slow with probability q, each with lock_c members in
    /// this stage (the stage's marginal of their PGF), besides the power
    double lock_units = 0;
    int lock_c = 0;
    const LawTable* table = nullptr;  ///< tabulated log_cdf (see law_table)

    inline double log_cdf(double g) const;

    /// log CDF of the group factor: the law of max G (raw_log_cdf) through the effective
    /// factor phi_k, k the slow members (lockstep: phi_0; every other law the evaluator builds
    /// has a fixed number of slow members)
    double exact_log_cdf(double y) const;

    /// log CDF of the largest member factor max G
    double raw_log_cdf(double g) const;
};

/// log CDF of a group law tabulated on a uniform g grid and interpolated linearly. The grid
/// spans [lo, hi] with log CDF(lo) = -800 (CDF 0 in double) and log CDF(hi) = -1e-22 (the
/// replica sf is needed down to ~1e-17), 4097 points: for a normal spatial factor with cv 0.03
/// the step is 0.003-0.01 sd from groups of 1e5 GPUs down to single GPUs (the span is widest
/// there, through the irrelevant far lower tail); the accuracy tests check the end result.
struct LawTable {
    static constexpr int kPoints = 4097;
    double lo = 0, hi = 0, inv_h = 0;
    std::vector<double> y;
    /// moments of the law (see moments_of_g), filled on first use
    mutable bool has_moments = false;
    mutable double mean = 1, var = 0;

    double operator()(double g) const {
        if (!(g > lo)) return -1e300;
        if (g >= hi) return y.back();
        const double t = (g - lo) * inv_h;
        const int i = std::min(static_cast<int>(t), kPoints - 2);
        const double f = t - i;
        return y[i] + f * (y[i + 1] - y[i]);
    }
    /// out[j] = (*this)(g0 + dg * j) for j < n
    void fill_affine(double g0, double dg, int n, double* out) const {
        interp_affine(y.data(), kPoints, lo, hi, inv_h, g0, dg, n, out);
    }
};

inline double GroupLaw::log_cdf(double g) const {
    return table != nullptr ? (*table)(g) : exact_log_cdf(g);
}

/// The table of `law`, built once per thread for each distinct law (spatial spec, group size,
/// slow members or unit pattern, slow probability and factor, power) and reused across points:
/// a sweep evaluates a handful of distinct laws millions of times. Null on a hash collision
/// (the law is then evaluated exactly).
const LawTable* law_table(const GroupLaw& law);

/// Bounds the table cache; called between points only (tables are referenced during one).
void trim_law_cache();

/// Mean and variance of the group factor of `law` (memoized in its table).
void moments_of_g(const StepModel& m, const GroupLaw& law, double& mean, double& var);

/// The evaluator's base laws of one point: `healthy`, the law of a group by the layout's unit
/// pattern (slow units included through their probability), and `clean`, the same group with
/// no slow member (tabulated); slow units then enter through replica types and the PGF.
struct GroupLaws {
    GroupLaw healthy, clean;
    /// slow units are random and slower or faster than the rest
    bool slow_active = false;
    /// variability-aware placement with slow units: scenarios of where they are packed
    bool aware = false;
    /// slow units enter through their probability generating function (ordered or random)
    bool pgf_mode = false;
};

/// The group laws of a point (DESIGN.md section 2): a group spans its units as the layout says
/// (node-random placement: as the ordered one, persistent.hpp).
void group_laws(const StepModel& m, const PersistentLayout& l, GroupLaws& out);

}  // namespace prism::stochastic::detail::ssta
