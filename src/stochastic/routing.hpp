#pragma once

// The load of the busiest expert-parallel rank when the router is not balanced (issue 36 item 5,
// docs/moe.md "Load imbalance"): the first piece, the law, not yet wired into the evaluators.
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

#include <cstdint>
#include <vector>

namespace prism::stochastic {

/// P_r of `ep` ranks holding contiguous equal shares of the experts' probabilities `p`
/// (p.size() a multiple of ep; p need not be normalized: it is).
std::vector<double> rank_probabilities(const std::vector<double>& p, int ep);

/// P(max_r L_r <= x) for N = `copies` token copies and rank probabilities `rank_p`.
double max_rank_load_cdf(double x, double copies, const std::vector<double>& rank_p);

/// E[max_r L_r] / (N / ep): how much longer the busiest rank's expert work is than a balanced
/// rank's (1 = balanced). Summed from the analytic law over integer loads.
double expected_max_load_factor(double copies, const std::vector<double>& rank_p);

/// Expert popularity with a lognormal skew: p_e proportional to exp(sigma z_e - sigma^2 / 2),
/// z_e standard normal quantiles at (e + 0.5) / E placed in a fixed pseudo-random order (seed),
/// so that popular experts are spread over the ranks as in a trained router. sigma = 0: uniform.
std::vector<double> skewed_popularity(int experts, double sigma, std::uint64_t seed);

}  // namespace prism::stochastic
