#pragma once

// The effective persistent factor of a TP x CP group (step_model.hpp). A compute op of class c
// on a group of n GPUs takes max_j G_j X_j times its base: member j's persistent factor G_j and
// its own transient draw X_j. The reduced model keeps one factor per group, g, so that the op
// takes g Y with Y the max of n iid X (the law both evaluators sample or propagate). Taking
// g = max_j G_j overstates the op: the slowest member is rarely also the one with the largest
// transient draw (with spatial cv 0.03 and transient cv 0.04 over 8 GPUs, E[max G] E[max X] =
// 1.103 against E[max G X] = 1.073; a slow member 14% slower, which dominates the max, 1.206
// against 1.145). So the group's factor is
//
//     phi_k(g) = E[max_j G_j X_j | max_j G_j = g, k of the n members slow] / E[max_n X],
//
// the conditional mean of the op given the largest member factor (g itself when X is constant or
// the members are equal; at least g E[X] / E[max_n X]), averaged over the op classes with their
// share of the compute (quantized to 1/64 so that the points of a sweep share tables). Given g the
// others are iid below g (slow ones: slow_factor times the spatial law), and the largest is slow
// with probability k f_s(g) / F_s(g) against (n - k) f_h(g) / F_h(g) for a healthy one. The mean is
// a quadrature: E[M] = t_a + int (1 - P(M <= t)) dt with P(M <= t) = F_X(t / g) prod over the
// others of P(G X <= t | G <= g), each the mean of F_X(t / u) over quantile-spaced u of the
// truncated law. Tabulated per k as the ratio phi_k(g) / g on a g grid over the laws' range and
// interpolated linearly (constant beyond it): kGrid knots over the healthy law's range or, where
// the slow law's range lies apart from it, (kGrid + 1) / 2 over each (one grid over both would
// space its knots by the slow factor's gap, wider than a narrow spatial law: the healthy groups'
// factor would then change with the slow factor). The law of the group factor is then that of
// phi_k(max G): both evaluators map the same factor, so they stay in agreement, and the reduction
// test checks the result against an op-by-op simulation of every GPU.

#include <cstdint>
#include <memory>
#include <vector>

#include "src/stochastic/distribution.hpp"

namespace prism::stochastic::detail {

class EffectiveFactor {
  public:
    /// One op class of the group's compute: its transient law (and its spec_id) and its share
    /// of the compute (any positive scale).
    struct Component {
        Distribution x;
        std::uint64_t x_id = 0;
        double weight = 0;
    };

    EffectiveFactor(const Distribution& spatial, double slow_factor, int n,
                    std::vector<Component> components);

    /// The table shared per thread for (spatial spec id, slow factor, n, components by id and
    /// weight); a sweep has a handful.
    static std::shared_ptr<const EffectiveFactor> cached(const Distribution& spatial,
                                                         std::uint64_t spatial_id,
                                                         double slow_factor, int n,
                                                         std::vector<Component> components);

    /// phi_k(g): the factor of a group with k slow members whose largest member factor is g.
    double operator()(int k, double g) const;
    /// The g with phi_k(g) = y (phi_k is increasing).
    double inverse(int k, double y) const;
    /// c with phi_k(g) >= c g for every k and g (min over classes of E[X] / E[max_n X]).
    double lower_ratio() const { return lower_ratio_; }
    /// Unique per thread (keys the analytic evaluator's cached law tables).
    std::uint64_t id() const { return id_; }
    int group_gpus() const { return n_; }

    /// phi_k(g) / g for one class computed directly (no table): the quadrature (tests).
    static double exact_ratio(const Distribution& spatial, double slow_factor, int n, int k,
                              const Distribution& x, double g);

    static constexpr int kGrid = 49;

  private:
    double ratio(int k, double g) const;

    Distribution spatial_;
    std::uint64_t spatial_id_ = 0;
    double sf_ = 1;
    int n_ = 1;
    std::vector<Component> comps_;  ///< merged by x_id, weights normalized
    double lower_ratio_ = 1;
    /// The g grid: per_ knots evenly over [lo_[0], lo_[0] + (per_ - 1) / inv_h_[0]], and with
    /// two ranges (segments_ 2) per_ more over the second; between them one segment.
    std::vector<double> knots_;
    int segments_ = 1, per_ = kGrid;
    double lo_[2] = {0, 0}, inv_h_[2] = {0, 0};
    std::uint64_t id_ = 0;
    /// per k, built on first use: the weighted ratio at each knot
    mutable std::vector<std::vector<double>> tables_;
    /// g's position on the knots (index and fraction), clamped to [0, knots - 1].
    double position(double g) const;
};

}  // namespace prism::stochastic::detail
