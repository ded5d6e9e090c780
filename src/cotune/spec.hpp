#pragma once

// The [cotune] table of an experiment (DESIGN.md section 6): what a learning-rate / batch-size /
// throughput co-tuning study needs besides the step-time model. Plain data, SI units and tokens;
// io/detail/toml_cotune.cpp fills it, src/cotune/cotune.hpp turns it into metrics.

#include <utility>
#include <vector>

namespace prism {

/// How the gradient noise scale B_noise behaves over a run.
enum class NoiseModel {
    constant,  ///< one B_noise (tokens) for the whole run (McCandlish et al. 2018)
    kaplan,    ///< B_crit(L) = B* / L^(1/alpha_B) along the loss path (Kaplan et al. 2020)
};

/// Where the optimal learning rate comes from.
enum class LrRule {
    none,      ///< no learning-rate model: every point runs at its optimum (no penalty)
    fixed,     ///< lr_opt = lr_reference at every batch
    linear,    ///< lr_opt = lr_reference * B / B_ref (Goyal et al. 2017)
    sqrt,      ///< lr_opt = lr_reference * sqrt(B / B_ref) (Krizhevsky 2014; Adam, Malladi 2022)
    deepseek,  ///< lr_opt = 0.3118 C^-0.1250 (DeepSeek LLM 2024, C the compute budget in FLOPs)
    table,     ///< lr_opt interpolated log-log in a table of (batch tokens, lr) pairs
};

/// Shape of the extra steps an off-optimum learning rate costs: steps are multiplied by
/// 1 + coefficient * |ln(lr / lr_opt)|^k, k = 1 (linear) or 2 (quadratic). An assumption of
/// this tool (a convex basin in log lr, as DeepSeek LLM Fig. 3 and Li et al. 2025 observe for the
/// final loss), not a published fit: state the coefficient you use.
enum class LrPenaltyShape { none, linear, quadratic };

struct LrPenaltySpec {
    LrPenaltyShape shape = LrPenaltyShape::quadratic;
    double coefficient = 0.1;  ///< 0.1: a factor-2 error costs 4.8% more steps (quadratic)
};

/// Kaplan et al. 2020, Table 5 (WebText2, their BPE, loss in nats per token): the critical
/// batch B_crit(L) = b_star / L^(1/alpha_b) (Eq. 5.3) and the loss after S_min optimal-batch
/// steps L(N, S_min) = (n_c / N)^alpha_n + (s_c / S_min)^alpha_s (Eq. 5.6 / 1.6).
struct KaplanParams {
    double b_star_tokens = 2.1e8;  ///< "B* ~ 2e8 tokens" in the text, 2.1e8 in Table 5
    double alpha_b = 0.21;
    double n_c = 8.8e13;  ///< non-embedding parameters
    double alpha_n = 0.076;
    double s_c = 2.1e3;  ///< steps
    double alpha_s = 0.76;
    double parameters = 0;  ///< N, non-embedding; 0 = the experiment's model
};

/// One stage of a batch-size ramp: batch `batch_tokens` until `until_tokens` have been trained.
/// Llama 3 (Dubey et al. 2024, section 3.4.1): 4M tokens, 8M after 252M tokens, 16M after 2.87T.
struct BatchRampPhase {
    double batch_tokens = 0;
    double until_tokens = 0;
};

struct CotuneSpec {
    bool enabled = false;  ///< the experiment has a [cotune] table
    /// Target: a loss on the scale of the loss path (needs `kaplan`), or the tokens the
    /// reference batch needs at its optimal learning rate (exactly one of the two is > 0).
    double target_loss = 0;
    double target_tokens = 0;
    double reference_batch_tokens = 0;  ///< M0 of Pollux; 0 = the training global batch
    NoiseModel noise = NoiseModel::constant;
    double b_noise_tokens = 0;  ///< constant model; a [space] `b_noise` overrides it per point
    KaplanParams kaplan;
    LrRule lr_rule = LrRule::none;
    double lr_reference = 0;                          ///< fixed / linear / sqrt
    std::vector<std::pair<double, double>> lr_table;  ///< (batch tokens, lr), increasing
    double compute_budget_flops = 0;                  ///< deepseek; 0 = M x training tokens
    /// deepseek: lr_opt at batch B is the rule's lr_opt (B / B_opt)^exponent around its
    /// (lr_opt, B_opt): 0.5 = square root, Adam's scaling rule (Malladi et al., NeurIPS 2022,
    /// "On the SDEs and Scaling Rules for Adaptive Gradient Algorithms"), 1 = linear (SGD,
    /// Goyal et al. 2017), 0 = the same lr_opt at every batch
    double lr_batch_exponent = 0.5;
    LrPenaltySpec lr_penalty;
    double warmup_steps = 0;                 ///< linear warm-up length (steps)
    std::vector<BatchRampPhase> batch_ramp;  ///< increasing batches and token thresholds
};

}  // namespace prism
