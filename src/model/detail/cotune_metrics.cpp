#include "src/model/detail/cotune_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "src/common/error.hpp"
#include "src/model/design_space.hpp"
#include "src/model/metrics.hpp"

namespace prism::detail {

namespace {

constexpr double kSecondsPerHour = 3600.0;

}  // namespace

double batch_tokens(const Experiment& e, const DesignPoint& p) {
    const std::int64_t seqs =
        p.global_batch_seqs > 0 ? p.global_batch_seqs : e.training.global_batch_seqs;
    return static_cast<double>(seqs) * e.model.seq;
}

std::optional<std::string> ramp_step_time_ratios(const Experiment& e, const cotune::Model& model,
                                                 const DesignPoint& point,
                                                 const DeterministicResult& det,
                                                 std::vector<double>& ratios) {
    ratios.clear();
    for (const cotune::RampPhase& phase : model.ramp_for(batch_tokens(e, point))) {
        DesignPoint q = point;
        q.global_batch_seqs = static_cast<std::int64_t>(phase.batch_tokens) / e.model.seq;
        if (auto why = filter_reason(e, q)) {
            return fmt::format(
                "cotune.batch_ramp: the {:.0f}-token phase ({} sequences) cannot "
                "run here: {}",
                phase.batch_tokens, q.global_batch_seqs, *why);
        }
        // The deterministic ratio scales the point's step-time distribution to the phase's
        // batch (fewer microbatches: a larger bubble share, the same DP sync).
        ratios.push_back(evaluate_deterministic(e, q).step_time_s / det.step_time_s);
    }
    return std::nullopt;
}

CotuneMetrics evaluate_cotune(const Experiment& e, const cotune::Model& model,
                              const DesignPoint& point, std::vector<double> ramp_ratios,
                              RunInput run, double step_time_mean_s) {
    cotune::PointInput in;
    in.batch_tokens = batch_tokens(e, point);
    in.b_noise_tokens = point.b_noise_tokens;
    in.learning_rate = point.learning_rate;
    in.ramp_step_time_ratio = std::move(ramp_ratios);
    const cotune::PointResult r = model.evaluate(in);

    CotuneMetrics m;
    m.steps = r.steps;
    m.tokens = r.tokens;
    m.statistical_efficiency = r.statistical_efficiency;
    m.learning_rate_opt = r.learning_rate_opt > 0 ? r.learning_rate_opt : kNaN;
    // The run model takes whole steps of the point's own step time; the ramp's cheaper steps
    // enter as fewer equivalent steps.
    // Past 2^53 (or infinite: an efficiency of 0) the cast to 64 bits is undefined and gave one
    // step, ranking the point first (issue 33): such a point cannot reach the target.
    constexpr double kMaxSteps = 9007199254740992.0;  // 2^53
    if (!(r.equivalent_steps <= kMaxSteps)) {
        throw ModelError(fmt::format(
            "cotune: {:.3g} steps to the target, more than 2^53: out of this point's reach",
            r.equivalent_steps));
    }
    run.steps = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(r.equivalent_steps)));
    const RunAnalysis a = analyze_run(run);
    m.time_mean_s = a.run_time.mean_s();
    m.time_p50_s = a.run_time.quantile(0.5);
    m.time_p95_s = a.run_time.quantile(0.95);
    m.gpu_hours = static_cast<double>(run.gpus) * m.time_mean_s / kSecondsPerHour;
    // Pollux's goodput, throughput x efficiency: reference tokens of progress per second of
    // failure-free training at the mean step time (without a ramp: tokens_per_s_mean x
    // statistical_efficiency).
    m.goodput_tokens_per_s = r.reference_tokens / (r.equivalent_steps * step_time_mean_s);
    return m;
}

}  // namespace prism::detail
