#pragma once

// The load of the busiest expert-parallel rank when the router is not balanced (issue 36 item 5,
// docs/moe.md "Load imbalance"): the law, the moments of the load factor that both
// evaluators give every routed op, and the law of the drift that the routed ops of one step
// share (stochastic/detail/step_model.cpp); exact multinomial draws check the law.
//
// One microbatch of one MoE layer routes N token copies (tokens x top_k) over E experts, each
// copy to expert e with probability p_e (multinomial); EP rank r holds the contiguous experts
// [r E / ep, (r + 1) E / ep) (Megatron-Core's layout) and receives L_r ~ Binomial(N, P_r),
// P_r = the sum of its experts' p_e. The slowest rank sets the pace of the expert GEMMs and the
// all-to-all: M = max_r L_r. Analytic law (the normal approximation of the multinomial,
// Poissonized): Y_r ~ N(N P_r, N P_r) independent and L = Y given sum Y = N, so
// P(M <= x) = prod_r Phi(a_r) x f(sum Y = N | all Y_r <= x) / f(sum Y = N), a_r = (x + 0.5 -
// N P_r) / sqrt(N P_r), the conditional sum taken as a normal with the truncated normals' means
// and variances summed. The ranks' negative correlation (their loads sum to N) is what the
// conditioning keeps: treated as independent, the law misses the draws by a KS distance of
// 0.09 at ep = 8 (tests/src/stochastic/routing_test.cpp).

#include <cmath>
#include <cstdint>
#include <vector>

namespace prism::stochastic {

class Stream;

/// P_r of `ep` ranks holding contiguous equal shares of the experts' probabilities `p`
/// (p.size() a multiple of ep; p need not be normalized: it is).
std::vector<double> rank_probabilities(const std::vector<double>& p, int ep);

/// P(max_r L_r <= x) for N = `copies` token copies and rank probabilities `rank_p`.
double max_rank_load_cdf(double x, double copies, const std::vector<double>& rank_p);

/// E[max_r L_r] / (N / ep): how much longer the busiest rank's expert work is than a balanced
/// rank's (1 = balanced). Summed from the analytic law over integer loads.
double expected_max_load_factor(double copies, const std::vector<double>& rank_p);

/// The routing of one MoE layer for one microbatch (the step profile's, deterministic.cpp):
/// N = `copies` token copies of an EP group over the experts with persistent popularity
/// `popularity` (the run's skew), each step multiplied by a lognormal drift exp(drift w_e -
/// drift^2 / 2), w_e iid standard normal per expert and step, and the busiest rank's kept load
/// capped at `capacity` times its share when tokens are dropped (0: dropless).
struct RoutingLoad {
    double copies = 0;
    std::vector<double> popularity;
    int ep = 1;
    double drift = 0;
    double capacity = 0;
    std::uint64_t seed = 0;  ///< of the analytic law's drift nodes
    bool active() const { return copies > 0 && ep > 1 && !popularity.empty(); }
    bool operator==(const RoutingLoad&) const = default;
};

/// E[Z] and E[Z^2] of the load factor Z = min(M / (N / ep), capacity) of one op.
struct LoadMoments {
    double mean = 1, second = 1;
    double var() const { return second > mean * mean ? second - mean * mean : 0.0; }
};

/// The analytic law's moments: the conditioned normal law of M summed over integer loads, the
/// drift entering as over-dispersion of the ranks' loads (routing.cpp). Memoized per thread.
LoadMoments load_factor_moments(const RoutingLoad& r);

/// The same moments from `draws` exact multinomial draws (the ranks' loads drawn as
/// sequential binomials, a fresh drift vector per draw) on the Philox stream of (seed, the
/// routing's hash): the check of the law (tests; both evaluators take the law's moments, whose
/// E[Z] the draws would set only to their standard error). Memoized per thread.
LoadMoments drawn_load_factor_moments(const RoutingLoad& r, int draws, std::uint64_t seed);

/// `draws` exact draws of Z (tests, and the moments above).
std::vector<double> draw_load_factors(const RoutingLoad& r, int draws, std::uint64_t seed);

/// Draws behind drawn_load_factor_moments.
inline constexpr int kRoutingDraws = 2048;

/// The drift shared by a step (docs/moe.md): the experts' drift vector w is one draw per step,
/// shared by every routed op of the step (every microbatch, layer and pass, and every replica),
/// so the ops' load factors, independent given w, are correlated through m(w) = E[Z | w]:
/// Var(sum of ops) = E[Var(. | w)] + Var(E[. | w]), the second summed coherently over the ops.
/// S = m(w) / E[Z] is the step's shared factor on the routed ops' means.
struct SharedDrift {
    double mean_factor = 1;  ///< E[Z] = E[m(w)] (the law's over-dispersion mean is within ~0.2%)
    double sd = 0;           ///< sd of S
    double skew = 0;         ///< skewness of S (the max over ranks: right-skewed)
    double cond_var = 0;     ///< E[Var(Z | w)]: what each op keeps on its own given the step's w
    /// S's upper bound with a capacity factor: capacity / E[Z] (every op capped); none without
    double max_factor = HUGE_VAL;
    bool active() const { return sd > 0; }
};

/// E[m(w)], the law of S and E[Var(Z | w)] from shared_drift_nodes drift vectors (a fixed stream
/// of the routing's hash): m(w) and Var(Z | w) by Clark's moments of the max of the ranks'
/// correlated normal loads at the drifted popularity at every node, and by the exact
/// conditional law (the conditioned normal law at the drifted popularity, as
/// drawn_shared_factor) at the first kSharedDriftExactNodes, the exact values regressed on
/// Clark's (a control variate: Clark's mean and spread known to all the nodes). Inactive
/// without drift. Memoized per thread.
SharedDrift shared_drift_law(const RoutingLoad& r);

/// One step's S = E[Z | w] / E[Z] for a drift vector w drawn from `stream` (Monte Carlo's, one
/// per sampled step), E[Z | w] from the conditioned normal law at the drifted popularity and E[Z]
/// shared_drift_law's mean_factor; 1 without drift.
double drawn_shared_factor(const RoutingLoad& r, Stream& stream);

/// Drift vectors behind shared_drift_law: 2^20 / (experts + ep^2) within [1024, 8192] (pairs
/// w, -w), the first kSharedDriftExactNodes also through the exact conditional law.
int shared_drift_nodes(const RoutingLoad& r);
inline constexpr int kSharedDriftExactNodes = 48;

/// Expert popularity with a lognormal skew: p_e proportional to exp(sigma z_e - sigma^2 / 2),
/// z_e standard normal quantiles at (e + 0.5) / E placed in a fixed pseudo-random order (seed),
/// so that popular experts are spread over the ranks as in a trained router. sigma = 0: uniform.
std::vector<double> skewed_popularity(int experts, double sigma, std::uint64_t seed);

}  // namespace prism::stochastic
