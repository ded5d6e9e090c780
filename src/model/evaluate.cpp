#include "src/model/evaluate.hpp"

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/common/error.hpp"
#include "src/model/design_space.hpp"
#include "src/model/detail/cotune_metrics.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/flops.hpp"
#include "src/run/run_model.hpp"
#include "src/stochastic/step_distribution.hpp"

namespace prism {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kDay = 86400.0;

/// "0.05" -> "5", "0.025" -> "2p5": metric names stay identifiers.
std::string percent_name(double fraction) {
    const double pct = fraction * 100.0;
    std::string s = std::to_string(static_cast<long long>(std::llround(pct * 10)));
    if (s.size() > 1 && s.back() == '0') {
        s.pop_back();
    } else if (s.size() == 1) {
        s = "0p" + s;
    } else {
        s.insert(s.size() - 1, "p");
    }
    return s;
}

std::string deadline_name(double seconds) {
    if (std::fmod(seconds, kDay) == 0)
        return std::to_string(static_cast<long long>(seconds / kDay)) + "d";
    if (std::fmod(seconds, 3600.0) == 0) {
        return std::to_string(static_cast<long long>(seconds / 3600.0)) + "h";
    }
    return std::to_string(static_cast<long long>(std::llround(seconds))) + "s";
}

bool has_run_metrics(const Experiment& e) { return e.training.total_tokens > 0; }

double peak_flop_per_s(const Experiment& e, const HardwareSpec& hw) {
    return e.training.precision == Precision::fp8 && hw.gpu.peak_fp8_flop_per_s > 0
               ? hw.gpu.peak_fp8_flop_per_s
               : hw.gpu.peak_bf16_flop_per_s;
}

/// Fills the schema and the row together so that names and values cannot drift apart.
class RowBuilder {
  public:
    RowBuilder(MetricSchema* schema, std::vector<double>* values)
        : schema_(schema), values_(values) {}

    void add(const std::string& name, const std::string& unit, const std::string& description,
             double value) {
        if (schema_) schema_->push_back({name, unit, description});
        if (values_) values_->push_back(value);
    }

  private:
    MetricSchema* schema_;
    std::vector<double>* values_;
};

struct StochasticPart {
    StepDistribution dist;
    Sensitivity sens;
    bool have_sensitivity = false;
    double healthy_mean_s = 0;  ///< the law without slow units (straggler draining), 0 = none
    double healthy_var_s2 = 0;
    /// p50 and p95 of the same point with moe_force_balance = true (MoE experiments; equal to
    /// the point's own where no routing law is active)
    double balanced_p50_s = kNaN;
    double balanced_p95_s = kNaN;
};

/// The forced-balance quantiles of an MoE point (StochasticPart::balanced_*): the point's own
/// where no routing law is active (forced balance, ep 1: the model is then the same); else the
/// same point evaluated under `balanced` (moe_force_balance = true): its deterministic model,
/// whose routed ops run at the balanced load (not a rescaling of the routing law's: tiles and
/// the GEMM curve make them non-linear in the load), and its step-time distribution on the
/// same random streams, as a separate evaluation of it gives.
void balanced_quantiles(const Experiment* balanced, const DesignPoint& p,
                        const DeterministicResult& det, std::uint64_t stream_index,
                        StochasticPart& st) {
    if (balanced == nullptr || !det.profile.routing.active()) {
        st.balanced_p50_s = st.dist.p50_s;
        st.balanced_p95_s = st.dist.p95_s;
        return;
    }
    const DeterministicResult forced = evaluate_deterministic(*balanced, p);
    if (!forced.feasible) return;  // NaN shares (the memory does not depend on the routing)
    const HardwareSpec& hw = balanced->hardware.at(static_cast<std::size_t>(p.hardware));
    const StepDistribution d =
        step_distribution(forced.profile, p, hw, balanced->cluster, balanced->variability,
                          balanced->evaluation, balanced->seed, stream_index);
    st.balanced_p50_s = d.p50_s;
    st.balanced_p95_s = d.p95_s;
}

/// Whether the run model drains stragglers of this experiment: it needs the healthy law.
bool drains_stragglers(const Experiment& e) {
    return e.failures.straggler_detection_s > 0 && e.variability.persistent.slow_probability > 0 &&
           e.training.total_tokens > 0;
}

/// What the run model needs of a point, but its steps.
RunInput run_input(const Experiment& e, const DesignPoint& p, const HardwareSpec& hw, double step_s,
                   const StepDistribution* dist) {
    RunInput in;
    in.deterministic_step_s = step_s;
    if (dist && !dist->cluster_mean_s.empty()) {
        in.cluster_mean_s = dist->cluster_mean_s;
        in.cluster_var_s2 = dist->cluster_var_s2;
    } else {
        in.cluster_mean_s = {step_s};
        in.cluster_var_s2 = {0.0};
    }
    in.gpus = p.gpus();
    in.gpus_per_node = hw.gpus_per_node;
    // Checkpoint: bf16 weights + fp32 master weights, Adam moments: 14 bytes/param.
    in.checkpoint_bytes = 14.0 * total_params(e.model);
    in.failures = e.failures;
    in.checkpoint_interval_override_s = p.checkpoint_interval_s;
    in.step_autocorrelation = e.variability.step_autocorrelation;
    return in;
}

/// The [cotune] metrics (DESIGN.md section 6); NaN without `cot`.
void add_cotune_rows(const detail::CotuneMetrics* cot, RowBuilder& row) {
    auto v = [&](double detail::CotuneMetrics::*field) { return cot ? cot->*field : kNaN; };
    using M = detail::CotuneMetrics;
    row.add("steps_to_target", "1",
            "optimizer steps to the [cotune] target: S_min (1 + B_noise/B) with warm-up, batch "
            "ramp and learning-rate penalty",
            v(&M::steps));
    row.add("tokens_to_target", "tokens", "tokens trained to the [cotune] target", v(&M::tokens));
    // run-level durations in days, as run_time_*_days (step-level ones in seconds)
    auto days = [&](double detail::CotuneMetrics::*field) { return v(field) / kDay; };
    row.add("time_to_target_mean_days", "days",
            "mean time to the target: its steps at the stochastic step time, with failures and "
            "checkpoints where [failures] is on",
            days(&M::time_mean_s));
    row.add("time_to_target_p50_days", "days", "median time to the target", days(&M::time_p50_s));
    row.add("time_to_target_p95_days", "days", "95th percentile of the time to the target",
            days(&M::time_p95_s));
    row.add("gpu_hours_to_target", "GPU h", "GPU-hours to the target, mean", v(&M::gpu_hours));
    row.add("goodput_tokens_per_s", "tokens/s",
            "Pollux goodput: reference-batch tokens of progress per second (throughput x "
            "statistical efficiency)",
            v(&M::goodput_tokens_per_s));
    row.add("statistical_efficiency", "1",
            "tokens the reference batch needs / tokens this point needs (Pollux's "
            "(phi + M0)/(phi + M) with a constant B_noise)",
            v(&M::statistical_efficiency));
    row.add("learning_rate_opt", "1", "optimal peak learning rate of the [cotune] rule here",
            v(&M::learning_rate_opt));
}

/// One pass over the metric definitions: with `det == nullptr` only the schema is built.
void build_row(const Experiment& e, const DesignPoint& p, const DeterministicResult* det,
               const StochasticPart* st, const BaselineFigures& baseline,
               std::uint64_t stream_index, RowBuilder& row, bool run = true,
               const detail::CotuneMetrics* cot = nullptr) {
    const bool have = det != nullptr;
    const HardwareSpec& hw = e.hardware.at(static_cast<std::size_t>(p.hardware));
    const double gpus = static_cast<double>(p.gpus());
    const double step = have ? det->step_time_s : kNaN;
    const double tokens = have ? det->tokens_per_step : kNaN;
    const double peak = peak_flop_per_s(e, hw);

    row.add("gpus", "1", "GPUs of the point (tp pp dp cp)", gpus);
    row.add("step_time_s", "s", "deterministic step time (no variability)", step);
    row.add("tokens_per_s", "tokens/s", "tokens per second at the deterministic step time",
            tokens / step);
    row.add("model_tflops_per_gpu", "TFLOP/s",
            "model TFLOP/s per GPU, the MFU numerator: 6 x matrix params x tokens + causal "
            "attention (GQA, gated MLP as they are; no recomputation)",
            have ? det->model_flops_per_step / step / gpus / 1e12 : kNaN);
    row.add("hardware_tflops_per_gpu", "TFLOP/s",
            "TFLOP/s per GPU the GPUs execute: recomputation and unfused attention's full "
            "square included",
            have ? det->hardware_flops_per_step / step / gpus / 1e12 : kNaN);
    row.add("megatron_tflops_per_gpu", "TFLOP/s",
            "TFLOP/s per GPU by Megatron's formula 96Bslh^2(1+s/6h+V/16lh) (MHA, 4h MLP, full "
            "recompute; was tflops_per_gpu), for papers that report it",
            have ? det->megatron_flops_per_step / step / gpus / 1e12 : kNaN);
    row.add("mfu", "1", "model FLOPs utilization: model_tflops_per_gpu / peak, deterministic",
            have ? det->model_flops_per_step / step / gpus / peak : kNaN);
    row.add("memory_per_gpu_gib", "GiB", "peak memory per GPU (the most loaded pipeline stage)",
            have ? det->memory.total_bytes() / kGiB : kNaN);
    row.add("memory_fraction", "1", "memory per GPU / HBM capacity",
            have ? det->memory.total_bytes() / hw.gpu.hbm_bytes : kNaN);
    row.add("bubble_fraction", "1", "pipeline idle time of the busiest stage / step time",
            have ? det->breakdown.bubble_s / step : kNaN);
    row.add("exposed_comm_s", "s",
            "TP + CP + DP communication and blocking pipeline transfers (DeepSpeed's) not hidden "
            "by compute, per step",
            have ? det->breakdown.tp_comm_exposed_s + det->breakdown.cp_comm_exposed_s +
                       det->breakdown.dp_comm_exposed_s + det->breakdown.pp_comm_exposed_s
                 : kNaN);
    if (e.model.is_moe()) {
        // the MoE lines of the busiest stage (Breakdown, docs/moe_outputs.md)
        auto line = [&](double Breakdown::*field) { return have ? det->breakdown.*field : kNaN; };
        row.add("moe_router_s", "s",
                "MoE router GEMM, softmax / top-k and permute of the busiest stage's layers per "
                "step (part of its compute)",
                line(&Breakdown::moe_router_s));
        row.add("moe_dispatch_s", "s",
                "MoE dispatch (all-to-all, expert-TP gather) of the busiest stage per step, "
                "before overlap",
                line(&Breakdown::moe_dispatch_s));
        row.add("moe_expert_compute_s", "s",
                "MoE expert compute (grouped expert GEMMs, shared experts) of the busiest stage "
                "per step (part of its compute)",
                line(&Breakdown::moe_expert_compute_s));
        row.add("moe_combine_s", "s",
                "MoE combine (all-to-all, expert-TP reduce-scatter) of the busiest stage per "
                "step, before overlap",
                line(&Breakdown::moe_combine_s));
        row.add("moe_a2a_exposed_s", "s",
                "MoE dispatch and combine not hidden by compute, per step (part of the step; "
                "not in exposed_comm_s)",
                line(&Breakdown::ep_comm_exposed_s));
    }
    if (e.baseline) {
        row.add("speedup_vs_baseline", "1",
                "tokens per second / the baseline's tokens per second (deterministic)",
                tokens / step / baseline.tokens_per_s);
        row.add("step_speedup_vs_baseline", "1",
                "baseline step time / this step time (deterministic; was speedup_vs_baseline; "
                "not a throughput ratio when the global batches differ)",
                baseline.step_s / step);
    }

    // Step-time distribution (DESIGN.md sections 2, 3, 5).
    const StepDistribution* dist = st ? &st->dist : nullptr;
    auto q = [&](double StepDistribution::*field) { return dist ? dist->*field : kNaN; };
    row.add("step_time_mean_s", "s", "mean step time with variability",
            q(&StepDistribution::mean_s));
    row.add("step_time_std_s", "s", "standard deviation of the step time",
            q(&StepDistribution::std_s));
    row.add("step_time_p50_s", "s", "median step time", q(&StepDistribution::p50_s));
    row.add("step_time_p90_s", "s", "90th percentile of the step time",
            q(&StepDistribution::p90_s));
    row.add("step_time_p95_s", "s", "95th percentile of the step time",
            q(&StepDistribution::p95_s));
    row.add("step_time_p99_s", "s", "99th percentile of the step time",
            q(&StepDistribution::p99_s));
    row.add("step_time_p999_s", "s", "99.9th percentile of the step time",
            q(&StepDistribution::p999_s));
    row.add("tail_ratio_p99", "1", "p99 step time / deterministic step time",
            q(&StepDistribution::p99_s) / step);
    for (std::size_t k = 0; k < e.evaluation.slow_deltas.size(); ++k) {
        const double delta = e.evaluation.slow_deltas[k];
        row.add("p_slow_" + percent_name(delta) + "pct", "1",
                "probability that a step is more than " + percent_name(delta) +
                    "% slower than deterministic",
                dist && k < dist->p_slow.size() ? dist->p_slow[k] : kNaN);
    }
    row.add("tokens_per_s_mean", "tokens/s", "tokens per second at the mean step time",
            tokens / q(&StepDistribution::mean_s));
    row.add("tokens_per_s_p95", "tokens/s", "tokens per second at the p95 step time",
            tokens / q(&StepDistribution::p95_s));
    row.add("mfu_mean", "1", "model FLOPs utilization at the mean step time",
            have ? det->model_flops_per_step / q(&StepDistribution::mean_s) / gpus / peak : kNaN);
    row.add("mfu_p95", "1", "model FLOPs utilization at the p95 step time",
            have ? det->model_flops_per_step / q(&StepDistribution::p95_s) / gpus / peak : kNaN);
    if (e.model.is_moe() && e.evaluation.routing_share) {
        // (p - p with the router forced to balance) / p; 0 where no routing law is active
        auto share = [&](double StepDistribution::*field, double StochasticPart::*balanced) {
            if (!st) return kNaN;
            const double p_s = st->dist.*field;
            return p_s == st->*balanced ? 0.0 : (p_s - st->*balanced) / p_s;
        };
        row.add("routing_share_p50", "1",
                "MoE routing imbalance's share of the median step: (p50 - p50 with "
                "moe_force_balance = true) / p50; 0 without a routing law (forced balance, ep 1)",
                share(&StepDistribution::p50_s, &StochasticPart::balanced_p50_s));
        row.add("routing_share_p95", "1",
                "MoE routing imbalance's share of the p95 step: (p95 - p95 with "
                "moe_force_balance = true) / p95; 0 without a routing law (forced balance, ep 1)",
                share(&StepDistribution::p95_s, &StochasticPart::balanced_p95_s));
    }
    if (e.evaluation.sensitivity) {
        for (int c = 0; c < kKernelClassCount; ++c) {
            const std::string cls = kKernelClassNames[c];
            row.add("sens_p95_" + cls + "_s", "s",
                    "drop in p95 step time when " + cls + " kernels are made deterministic",
                    st && st->have_sensitivity ? st->sens.p95_drop_s[c] : kNaN);
        }
        for (int c = 0; c < kKernelClassCount; ++c) {
            const std::string cls = kKernelClassNames[c];
            row.add("sens_var_" + cls + "_s2", "s^2",
                    "drop in step-time variance when " + cls + " kernels are made deterministic",
                    st && st->have_sensitivity ? st->sens.variance_drop_s2[c] : kNaN);
        }
        if (e.model.is_moe() && !e.training.moe_force_balance) {
            // the routing class: the busiest EP rank's load made deterministic at its mean
            row.add("sens_p95_routing_s", "s",
                    "drop in p95 step time when the MoE routing load is made deterministic",
                    st && st->have_sensitivity ? st->sens.routing_p95_drop_s : kNaN);
            row.add("sens_var_routing_s2", "s^2",
                    "drop in step-time variance when the MoE routing load is made deterministic",
                    st && st->have_sensitivity ? st->sens.routing_variance_drop_s2 : kNaN);
        }
        if (e.variability.documents.active()) {
            // the documents class: every microbatch's masked attention at E[S]
            row.add("sens_p95_documents_s", "s",
                    "drop in p95 step time when the packed documents' attention is made "
                    "deterministic at its mean",
                    st && st->have_sensitivity ? st->sens.documents_p95_drop_s : kNaN);
            row.add("sens_var_documents_s2", "s^2",
                    "drop in step-time variance when the packed documents' attention is made "
                    "deterministic at its mean",
                    st && st->have_sensitivity ? st->sens.documents_variance_drop_s2 : kNaN);
        }
    }

    if (has_run_metrics(e)) {
        const double tokens_per_step = have ? tokens : 1;
        const auto steps =
            static_cast<std::int64_t>(std::ceil(e.training.total_tokens / tokens_per_step));
        RunMetrics run_metrics;
        const bool have_run = have && run;
        if (have_run) {
            RunInput in = run_input(e, p, hw, step, dist);
            in.steps = steps;
            if (st != nullptr) {
                in.healthy_mean_s = st->healthy_mean_s;
                in.healthy_var_s2 = st->healthy_var_s2;
            }
            run_metrics = evaluate_run(in, e.seed, stream_index);
        }
        row.add("steps_total", "1", "optimizer steps of the run (total_tokens / tokens per step)",
                have ? static_cast<double>(steps) : kNaN);
        row.add("run_time_p50_days", "days", "median run time incl. failures and checkpoints",
                have_run ? run_metrics.run_time_p50_days : kNaN);
        row.add("run_time_p95_days", "days", "95th percentile of the run time",
                have_run ? run_metrics.run_time_p95_days : kNaN);
        row.add("run_time_p99_days", "days", "99th percentile of the run time",
                have_run ? run_metrics.run_time_p99_days : kNaN);
        row.add("ettr", "1", "effective training time ratio: failure-free compute / run time",
                have_run ? run_metrics.ettr : kNaN);
        row.add("interruptions_mean", "1", "expected failures striking the job",
                have_run ? run_metrics.interruptions_mean : kNaN);
        row.add("gpu_hours_mean", "GPU h", "GPU-hours of the run, mean",
                have_run ? run_metrics.gpu_hours_mean : kNaN);
        row.add("gpu_hours_p95", "GPU h", "GPU-hours of the run, 95th percentile",
                have_run ? run_metrics.gpu_hours_p95 : kNaN);
        for (std::size_t k = 0; k < e.failures.deadlines_s.size(); ++k) {
            const double d = e.failures.deadlines_s[k];
            row.add("p_run_le_" + deadline_name(d), "1",
                    "probability that the run finishes within " + deadline_name(d),
                    have_run && k < run_metrics.p_run_le_deadline.size()
                        ? run_metrics.p_run_le_deadline[k]
                        : kNaN);
        }
        row.add("checkpoint_interval_s", "s", "compute time between checkpoints used",
                have_run ? run_metrics.checkpoint_interval_s : kNaN);
        row.add("checkpoint_interval_opt_s", "s",
                "checkpoint interval minimizing the expected run time",
                have_run ? run_metrics.checkpoint_interval_opt_s : kNaN);
    }
    if (e.cotune.enabled) add_cotune_rows(cot, row);
}

}  // namespace

MetricSchema metric_schema(const Experiment& experiment) {
    MetricSchema schema;
    RowBuilder row(&schema, nullptr);
    DesignPoint p = experiment.defaults;
    if (experiment.hardware.empty()) {
        // Schema only: build with a placeholder hardware entry so the loop can run.
        Experiment copy = experiment;
        copy.hardware.emplace_back();
        p.hardware = 0;
        build_row(copy, p, nullptr, nullptr, {}, 0, row);
        return schema;
    }
    p.hardware = 0;
    build_row(experiment, p, nullptr, nullptr, {}, 0, row);
    return schema;
}

Evaluator::Evaluator(const Experiment& experiment)
    : experiment_(&experiment), schema_(metric_schema(experiment)) {
    if (experiment.cotune.enabled) {
        cotune_.emplace(
            experiment.cotune, experiment.model,
            static_cast<double>(experiment.training.global_batch_seqs) * experiment.model.seq,
            experiment.training.total_tokens);
    }
    if (experiment.baseline) {
        if (auto why = filter_reason(experiment, *experiment.baseline)) {
            throw ConfigError(experiment.file + ": experiment.baseline: " + *why);
        }
        const DeterministicResult base = evaluate_deterministic(experiment, *experiment.baseline);
        baseline_.step_s = base.step_time_s;
        baseline_.tokens_per_s = base.tokens_per_step / base.step_time_s;
    }
    if (experiment.model.is_moe() && experiment.evaluation.routing_share &&
        !experiment.training.moe_force_balance) {
        auto balanced = std::make_shared<Experiment>(experiment);
        balanced->training.moe_force_balance = true;
        balanced->evaluation.histogram = false;  // only its quantiles are used
        balanced_ = std::move(balanced);
    }
}

namespace {

/// Whether two points run the same training steps: equal in every field but learning_rate and
/// checkpoint_interval_s.
bool same_steps(const DesignPoint& a, const DesignPoint& b) {
    return a.tp == b.tp && a.pp == b.pp && a.dp == b.dp && a.cp == b.cp &&
           a.microbatch == b.microbatch && a.zero_stage == b.zero_stage &&
           a.recompute == b.recompute && a.sequence_parallel == b.sequence_parallel &&
           a.interleave == b.interleave && a.hardware == b.hardware &&
           a.placement.kind == b.placement.kind && a.placement.order == b.placement.order &&
           a.global_batch_seqs == b.global_batch_seqs;
}

}  // namespace

PointResult Evaluator::screen(const DesignPoint& point, std::uint64_t index,
                              std::uint64_t stream_index) const {
    PointResult result;
    result.index = index;
    const DeterministicResult det = evaluate_deterministic(*experiment_, point);
    const Experiment& e = *experiment_;
    RowBuilder row(nullptr, &result.values);
    result.values.reserve(schema_.size());
    std::optional<std::string> infeasible;
    if (!det.feasible) {
        infeasible = det.reason;
    } else if (cotune_) {
        std::vector<double> ramp_ratios;
        infeasible = detail::ramp_step_time_ratios(e, *cotune_, point, det, ramp_ratios);
    }
    build_row(e, point, &det, nullptr, baseline_, stream_index, row, false);
    if (infeasible) {
        result.status = PointStatus::infeasible;
        result.reason = *infeasible;
    } else {
        result.status = PointStatus::dominated;
    }
    return result;
}

PointResult Evaluator::evaluate(const DesignPoint& point, std::uint64_t index,
                                std::uint64_t stream_index, StepCache* cache) const {
    PointResult result;
    result.index = index;
    const DeterministicResult det = evaluate_deterministic(*experiment_, point);
    const Experiment& e = *experiment_;
    const HardwareSpec& hw = e.hardware.at(static_cast<std::size_t>(point.hardware));
    RowBuilder row(nullptr, &result.values);
    result.values.reserve(schema_.size());
    std::vector<double> ramp_ratios;
    std::optional<std::string> infeasible;
    if (!det.feasible) {
        infeasible = det.reason;
    } else if (cotune_) {
        infeasible = detail::ramp_step_time_ratios(e, *cotune_, point, det, ramp_ratios);
    }
    if (infeasible) {
        // A point that does not fit (or cannot run the [cotune] batch ramp) runs no step: its
        // deterministic figures say by how much it misses; distributions and run times stay NaN
        // (and cost nothing).
        build_row(e, point, &det, nullptr, baseline_, stream_index, row, false);
        result.status = PointStatus::infeasible;
        result.reason = *infeasible;
        return result;
    }
    StochasticPart st;
    StepCache::Entry* cached = nullptr;
    if (cache != nullptr) {
        const auto it = cache->entries_.find(stream_index);
        if (it != cache->entries_.end() && same_steps(it->second.point, point)) {
            cached = &it->second;
        }
    }
    if (cached != nullptr) {
        ++cache->hits_;
        st.dist = cached->dist;
        st.sens = cached->sens;
        st.have_sensitivity = cached->have_sensitivity;
        st.healthy_mean_s = cached->healthy_mean_s;
        st.healthy_var_s2 = cached->healthy_var_s2;
        st.balanced_p50_s = cached->balanced_p50_s;
        st.balanced_p95_s = cached->balanced_p95_s;
    } else {
        st.dist = step_distribution(det.profile, point, hw, e.cluster, e.variability, e.evaluation,
                                    e.seed, stream_index);
        if (e.evaluation.sensitivity) {
            st.sens = sensitivity(det.profile, point, hw, e.cluster, e.variability, e.evaluation,
                                  e.seed, stream_index, st.dist);
            st.have_sensitivity = true;
        }
        if (drains_stragglers(e)) {
            // the cluster after its slow units are drained: the same law without them
            VariabilitySpec healthy = e.variability;
            healthy.persistent.slow_probability = 0;
            const StepDistribution h = step_distribution(det.profile, point, hw, e.cluster, healthy,
                                                         e.evaluation, e.seed, stream_index);
            st.healthy_mean_s = h.mean_s;
            st.healthy_var_s2 = h.std_s * h.std_s;
        }
        if (e.model.is_moe() && e.evaluation.routing_share)
            balanced_quantiles(balanced_.get(), point, det, stream_index, st);
        if (cache != nullptr) {
            ++cache->misses_;
            if (cache->entries_.size() >= cache->capacity_) cache->entries_.clear();
            cache->entries_[stream_index] = {point,
                                             st.dist,
                                             st.sens,
                                             st.have_sensitivity,
                                             st.healthy_mean_s,
                                             st.healthy_var_s2,
                                             st.balanced_p50_s,
                                             st.balanced_p95_s};
        }
    }
    std::optional<detail::CotuneMetrics> cot;
    if (cotune_) {
        RunInput in = run_input(e, point, hw, det.step_time_s, &st.dist);
        in.healthy_mean_s = st.healthy_mean_s;
        in.healthy_var_s2 = st.healthy_var_s2;
        cot = detail::evaluate_cotune(e, *cotune_, point, std::move(ramp_ratios), std::move(in),
                                      st.dist.mean_s);
    }
    build_row(e, point, &det, &st, baseline_, stream_index, row, true, cot ? &*cot : nullptr);
    if (e.evaluation.histogram) {
        result.histogram = st.dist.histogram;
        result.histogram_lo_s = st.dist.histogram_lo_s;
        result.histogram_hi_s = st.dist.histogram_hi_s;
    }
    if (result.values.size() != schema_.size()) {
        throw ModelError("evaluate: metric row has " + std::to_string(result.values.size()) +
                         " values for a schema of " + std::to_string(schema_.size()));
    }
    return result;
}

stochastic::Verification verify_point(const Experiment& e, const DesignPoint& point,
                                      std::uint64_t stream_index,
                                      const std::function<bool()>& stop) {
    const DeterministicResult det = evaluate_deterministic(e, point);
    if (!det.feasible) throw ModelError("verify: the point does not fit: " + det.reason);
    const HardwareSpec& hw = e.hardware.at(static_cast<std::size_t>(point.hardware));
    return stochastic::verify_monte_carlo(det.profile, point, hw, e.cluster, e.variability,
                                          e.evaluation, e.seed, stream_index, stop);
}

}  // namespace prism
