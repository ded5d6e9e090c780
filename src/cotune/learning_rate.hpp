#pragma once

// The optimal learning rate as a function of the batch or of the compute budget, and what a
// learning rate away from it costs (DESIGN.md section 6).

#include <span>
#include <utility>

#include "src/cotune/spec.hpp"
#include "src/model/spec.hpp"

namespace prism::cotune {

/// DeepSeek LLM (DeepSeek-AI 2024, "Scaling open-source language models with longtermism",
/// section 3.1, Eq. 1): the near-optimal peak learning rate 0.3118 C^-0.1250 for a compute
/// budget of C FLOPs.
double deepseek_lr_opt(double compute_flops);
/// The same paper's optimal batch, 0.2920 C^0.3271 tokens.
double deepseek_batch_opt_tokens(double compute_flops);
/// DeepSeek's model scale M, the non-embedding FLOPs per token (their Eq. 2,
/// 72 n_layer d_model^2 + 6 n_layer d_model l_seq for a 12 d^2-parameter layer), written as
/// 6 x (non-embedding parameters) + 6 n_layer d_model l_seq so that GQA and gated MLPs count
/// their own parameters. C = M x D for D training tokens.
double deepseek_flops_per_token(const ModelSpec& model);

/// The optimal learning rate at a global batch of `batch_tokens` under `spec`'s rule
/// (`compute_flops` for the DeepSeek rule: its lr_opt at its B_opt, scaled to other batches by
/// (B / B_opt)^spec.lr_batch_exponent). 0 for LrRule::none. A table is interpolated
/// linearly in (log batch, log lr) and held flat beyond its ends.
double lr_opt(const CotuneSpec& spec, double batch_tokens, double reference_batch_tokens,
              double compute_flops);

/// The factor by which an off-optimum learning rate multiplies the steps (and tokens):
/// 1 + coefficient |ln(lr / lr_opt)|^k, k = 1 or 2 (an assumption of this tool, see
/// LrPenaltyShape). 1 when lr or lr_opt is 0 (not studied).
double lr_penalty(const LrPenaltySpec& penalty, double learning_rate, double optimum);

}  // namespace prism::cotune
