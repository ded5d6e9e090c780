#pragma once

// A co-tuning study's model of one experiment: from a design point's batch, learning rate and
// noise scale to the steps and tokens its target takes (DESIGN.md section 6). The time to the
// target is these steps times the point's stochastic step time, through the run model
// (src/model/detail/cotune_metrics.cpp).

#include <optional>
#include <string>
#include <vector>

#include "src/cotune/efficiency.hpp"
#include "src/cotune/spec.hpp"
#include "src/model/spec.hpp"

namespace prism::cotune {

/// What a point brings to the study.
struct PointInput {
    double batch_tokens = 0;    ///< the point's global batch
    double b_noise_tokens = 0;  ///< its B_noise (the `b_noise` dimension); 0 = the spec's
    double learning_rate = 0;   ///< its peak learning rate; 0 = at the optimum
    /// step time at each phase of ramp_for(batch_tokens) / the point's own step time
    std::vector<double> ramp_step_time_ratio;
};

struct PointResult {
    double steps = 0;              ///< optimizer steps to the target
    double tokens = 0;             ///< tokens to the target
    double equivalent_steps = 0;   ///< steps x their step time / the final batch's step time
    double learning_rate_opt = 0;  ///< the rule's optimum at this batch (0 = no rule)
    double lr_penalty = 1;         ///< the factor an off-optimum learning rate costs
    /// tokens the reference batch needs at its optimal learning rate (no warm-up, no ramp)
    double reference_tokens = 0;
    /// reference_tokens / tokens: Pollux's (phi + M0)/(phi + M) without ramp, warm-up and
    /// penalty
    double statistical_efficiency = 0;
};

class Model {
  public:
    /// `model` gives N (Kaplan) and DeepSeek's FLOPs per token; `default_reference_batch_tokens`
    /// is the training global batch (Pollux's M0 unless the spec names one);
    /// `training_tokens` feeds DeepSeek's compute budget when the spec has none. Throws
    /// ConfigError naming the cotune key at fault ("cotune.target_loss: ...").
    Model(const CotuneSpec& spec, const ModelSpec& model, double default_reference_batch_tokens,
          double training_tokens);

    const CotuneSpec& spec() const noexcept { return spec_; }
    double reference_batch_tokens() const noexcept { return reference_batch_tokens_; }
    /// DeepSeek's compute budget C in FLOPs (0 unless the rule is deepseek).
    double compute_flops() const noexcept { return compute_flops_; }

    /// The ramp phases a point whose final batch is `batch_tokens` runs through: those of the
    /// spec with a smaller batch (their step_time_ratio left at 1 for the caller to fill).
    std::vector<RampPhase> ramp_for(double batch_tokens) const;

    /// Steps and tokens to the target. Throws ModelError on a batch or B_noise <= 0.
    PointResult evaluate(const PointInput& point) const;

    /// One line for `prism validate`: target, noise model, learning-rate rule (DeepSeek: C,
    /// lr_opt and B_opt), penalty, warm-up, ramp.
    std::string describe() const;

  private:
    CotuneSpec spec_;
    double reference_batch_tokens_ = 0;
    double compute_flops_ = 0;
    double parameters_ = 0;
    /// Kaplan: the profile and the target progress, fixed for the experiment.
    std::optional<NoiseProfile> kaplan_;
    double kaplan_target_progress_ = 0;
};

/// The study of `experiment`'s [cotune] table: M0 defaults to the training global batch and
/// DeepSeek's token count to training.total_tokens. Throws ConfigError as Model does.
Model make_model(const Experiment& experiment);

}  // namespace prism::cotune
