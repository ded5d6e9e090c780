#include "src/cotune/cotune.hpp"

#include <cmath>

#include <fmt/format.h>

#include "src/common/error.hpp"
#include "src/cotune/learning_rate.hpp"
#include "src/model/flops.hpp"

namespace prism::cotune {

namespace {

/// A target loss the Kaplan path reaches only after more than 2^53 optimal-batch steps (just
/// above the asymptote) is out of reach: refused as bad input instead of an infinite progress
/// that failed later without saying where (issue 33).
void check_reachable(const CotuneSpec& spec, double parameters) {
    constexpr double kMaxSteps = 9007199254740992.0;  // 2^53
    const double steps = kaplan_min_steps(spec.kaplan, parameters, spec.target_loss);
    if (!(steps <= kMaxSteps)) {
        throw ConfigError(fmt::format(
            "cotune.target_loss: {} takes {:.3g} optimal-batch steps on the Kaplan loss path "
            "(Kaplan et al. 2020 Eq. 5.6), more than 2^53: too close to the loss of {:.4g} a "
            "model of {:.4g} non-embedding parameters approaches",
            spec.target_loss, steps, std::pow(spec.kaplan.n_c / parameters, spec.kaplan.alpha_n),
            parameters));
    }
}

}  // namespace

Model::Model(const CotuneSpec& spec, const ModelSpec& model, double default_reference_batch_tokens,
             double training_tokens)
    : spec_(spec) {
    reference_batch_tokens_ = spec.reference_batch_tokens > 0 ? spec.reference_batch_tokens
                                                              : default_reference_batch_tokens;
    if (!(reference_batch_tokens_ > 0)) {
        throw ConfigError(
            "cotune.reference_batch_tokens: needed when [training] has no global batch");
    }
    if ((spec.target_loss > 0) == (spec.target_tokens > 0)) {
        throw ConfigError("cotune: give exactly one of target_loss and target_tokens");
    }
    parameters_ =
        spec.kaplan.parameters > 0 ? spec.kaplan.parameters : model.layers * layer_params(model);
    if (spec.lr_rule == LrRule::deepseek) {
        const double tokens = training_tokens > 0 ? training_tokens : spec.target_tokens;
        compute_flops_ = spec.compute_budget_flops > 0 ? spec.compute_budget_flops
                                                       : deepseek_flops_per_token(model) * tokens;
        if (!(compute_flops_ > 0)) {
            throw ConfigError(
                "cotune.lr_rule: \"deepseek\" needs compute_budget (or training.total_tokens, or "
                "target_tokens, to take C = M x tokens)");
        }
    }
    if (spec.target_loss > 0) check_reachable(spec, parameters_);
    if (spec.noise == NoiseModel::kaplan) {
        if (spec.target_loss > 0) {
            kaplan_target_progress_ = kaplan_min_steps(spec.kaplan, parameters_, spec.target_loss);
            kaplan_.emplace(
                NoiseProfile::kaplan(spec.kaplan, parameters_, kaplan_target_progress_));
        } else {
            // M0 s + I(s) = target tokens, and I >= 0: s <= tokens / M0.
            kaplan_.emplace(NoiseProfile::kaplan(spec.kaplan, parameters_,
                                                 spec.target_tokens / reference_batch_tokens_));
            kaplan_target_progress_ =
                progress_of_tokens(*kaplan_, reference_batch_tokens_, spec.target_tokens);
        }
    } else if (spec.target_loss > 0) {
        // the loss path only says how many optimal-batch steps the target takes
        kaplan_min_steps(spec.kaplan, parameters_, spec.target_loss);
    }
}

Model make_model(const Experiment& e) {
    return Model(e.cotune, e.model, static_cast<double>(e.training.global_batch_seqs) * e.model.seq,
                 e.training.total_tokens);
}

std::vector<RampPhase> Model::ramp_for(double batch_tokens) const {
    std::vector<RampPhase> out;
    for (const BatchRampPhase& phase : spec_.batch_ramp) {
        if (phase.batch_tokens < batch_tokens) {
            out.push_back({phase.batch_tokens, phase.until_tokens, 1.0});
        }
    }
    return out;
}

PointResult Model::evaluate(const PointInput& point) const {
    PointResult out;
    double target = kaplan_target_progress_;
    std::optional<NoiseProfile> constant;
    const NoiseProfile* noise = kaplan_ ? &*kaplan_ : nullptr;
    if (noise == nullptr) {
        const double b_noise =
            point.b_noise_tokens > 0 ? point.b_noise_tokens : spec_.b_noise_tokens;
        constant.emplace(NoiseProfile::constant(b_noise));
        noise = &*constant;
        target = spec_.target_loss > 0
                     ? kaplan_min_steps(spec_.kaplan, parameters_, spec_.target_loss)
                     : spec_.target_tokens / (reference_batch_tokens_ + b_noise);
    }
    std::vector<RampPhase> ramp = ramp_for(point.batch_tokens);
    if (point.ramp_step_time_ratio.size() != ramp.size()) {
        throw ModelError(fmt::format("cotune: {} ramp step times for {} ramp phases",
                                     point.ramp_step_time_ratio.size(), ramp.size()));
    }
    for (std::size_t k = 0; k < ramp.size(); ++k) {
        ramp[k].step_time_ratio = point.ramp_step_time_ratio[k];
    }
    const Progress p = walk_to_target(*noise, target, point.batch_tokens, ramp, spec_.warmup_steps);
    out.learning_rate_opt =
        lr_opt(spec_, point.batch_tokens, reference_batch_tokens_, compute_flops_);
    out.lr_penalty = lr_penalty(spec_.lr_penalty, point.learning_rate, out.learning_rate_opt);
    out.steps = p.steps * out.lr_penalty;
    out.tokens = p.tokens * out.lr_penalty;
    out.equivalent_steps = p.equivalent_steps * out.lr_penalty;
    out.reference_tokens = reference_batch_tokens_ * target + noise->integral(target);
    out.statistical_efficiency = out.reference_tokens / out.tokens;
    return out;
}

std::string Model::describe() const {
    std::string out = spec_.target_loss > 0
                          ? fmt::format("target loss {:.4g}", spec_.target_loss)
                          : fmt::format("target {:.4g} tokens", spec_.target_tokens);
    out += fmt::format(" at the reference batch of {:.4g} tokens; ", reference_batch_tokens_);
    out += kaplan_
               ? fmt::format("B_noise = B_crit(L) along the loss path (N = {:.4g})", parameters_)
               : fmt::format("B_noise {:.4g} tokens", spec_.b_noise_tokens);
    switch (spec_.lr_rule) {
        case LrRule::none:
            out += "; no learning-rate rule";
            break;
        case LrRule::deepseek:
            out += fmt::format(
                "; lr deepseek: C = {:.4g} FLOPs, lr_opt {:.4g}, B_opt {:.4g} tokens, "
                "other batches lr_opt (B / B_opt)^{:.3g}",
                compute_flops_, deepseek_lr_opt(compute_flops_),
                deepseek_batch_opt_tokens(compute_flops_), spec_.lr_batch_exponent);
            break;
        case LrRule::table:
            out += fmt::format("; lr table of {} rows", spec_.lr_table.size());
            break;
        default:
            out += fmt::format("; lr {} ({:.4g} at the reference batch)",
                               spec_.lr_rule == LrRule::fixed    ? "fixed"
                               : spec_.lr_rule == LrRule::linear ? "linear"
                                                                 : "sqrt",
                               spec_.lr_reference);
    }
    if (spec_.lr_rule != LrRule::none && spec_.lr_penalty.shape != LrPenaltyShape::none) {
        out += fmt::format(", off-optimum steps x (1 + {:.3g} |ln(lr/lr_opt)|{})",
                           spec_.lr_penalty.coefficient,
                           spec_.lr_penalty.shape == LrPenaltyShape::quadratic ? "^2" : "");
    }
    if (spec_.warmup_steps > 0) out += fmt::format("; warm-up {:.0f} steps", spec_.warmup_steps);
    if (!spec_.batch_ramp.empty()) {
        out += fmt::format("; batch ramp of {} phases", spec_.batch_ramp.size());
    }
    return out;
}

}  // namespace prism::cotune
