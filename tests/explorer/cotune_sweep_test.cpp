// [cotune] metrics in a sweep: the closed forms row by row, the sharing of step-time
// distributions across learning rates and noise scales, and the example study's answer
// (configs/examples/cotune.toml) in the two noise regimes.

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "explorer/chunk_evaluator.hpp"
#include "explorer/design_space.hpp"
#include "io/experiment_loader.hpp"
#include "src/common/error.hpp"
#include "src/cotune/learning_rate.hpp"
#include "src/model/evaluate.hpp"
#include "src/run/run_model.hpp"

namespace prism::explorer {
namespace {

std::string study(const std::string& variability, const std::string& extra_cotune, bool failures) {
    std::string text = R"(
[experiment]
name = "cotune-test"
seed = 5

[model]
preset = "llama3-8b"

[training]
global_batch = 256
flash_attention = true

[hardware.h100]
preset = "h100-sxm"

[defaults]
zero_stage = 1
recompute = "selective"
sequence_parallel = true
tp = 2

[space]
gpus = [32, 64]
global_batch = [64, 256, 1024]
learning_rate = [1e-4, 2e-4, 4e-4, 8e-4]
b_noise = [1e6, 1e8]

[cotune]
target_tokens = 1e11
lr_rule = "sqrt"
lr_reference = 3e-4
)" + extra_cotune + R"(

[variability]
preset = ")" + variability +
                       R"("

[evaluation]
method = "analytic"
sensitivity = false
)";
    if (failures) {
        text += R"(
[failures]
enabled = true
checkpoint_bandwidth = "500 GB/s"
detection = "2 min"
restart = "10 min"

[[failures.cause]]
name = "gpu"
mtbf = "20000 h"
)";
    }
    return text;
}

std::size_t column(const Evaluator& ev, const std::string& name) {
    const int k = find_metric(ev.schema(), name);
    EXPECT_GE(k, 0) << name;
    return static_cast<std::size_t>(std::max(k, 0));
}

ChunkResult sweep(const DesignSpace& space, const Evaluator& evaluator) {
    const ChunkEvaluator chunk(space, evaluator);
    return chunk(WorkOrder{0, 0, space.size()});
}

TEST(CotuneSweep, RowsFollowTheClosedForms) {
    // No variability and no failures: the time to target is exactly the steps (rounded up to
    // whole steps) times the deterministic step. Constant B_noise, no warm-up, no ramp:
    // S = s* (1 + Bn/B) x penalty with s* = E_ref / (M0 + Bn), tokens = S x B, efficiency =
    // (Bn + M0)/(Bn + B) / penalty, goodput = tokens_per_s_mean x efficiency.
    const Experiment e = io::parse_experiment(study("none", "", false), "study.toml");
    const DesignSpace space(e);
    const Evaluator ev(e);
    const ChunkResult all = sweep(space, ev);
    const double m0 = 256.0 * 8192;
    std::size_t ok = 0;

    for (const PointResult& r : all.rows) {
        if (r.status != PointStatus::ok) continue;
        ++ok;
        const DesignPoint p = space.point(r.index);
        const double batch = static_cast<double>(p.global_batch_seqs) * 8192;
        const double bn = p.b_noise_tokens;
        const double lr_opt = 3e-4 * std::sqrt(batch / m0);
        const double ln = std::log(p.learning_rate / lr_opt);
        const double penalty = 1.0 + 0.1 * ln * ln;
        const double steps = 1e11 / (m0 + bn) * (1.0 + bn / batch) * penalty;
        const auto v = [&](const char* name) { return r.values[column(ev, name)]; };

        EXPECT_NEAR(v("steps_to_target") / steps, 1.0, 1e-12) << r.index;
        EXPECT_NEAR(v("tokens_to_target") / (v("steps_to_target") * batch), 1.0, 1e-12);
        EXPECT_NEAR(v("statistical_efficiency") * penalty, (bn + m0) / (bn + batch), 1e-12);
        EXPECT_NEAR(
            v("goodput_tokens_per_s") / (v("tokens_per_s_mean") * v("statistical_efficiency")), 1.0,
            1e-12);
        EXPECT_NEAR(v("learning_rate_opt"), lr_opt, 1e-15);
        const double time = std::ceil(steps) * v("step_time_s");
        EXPECT_NEAR(v("time_to_target_p50_days") * 86400.0 / time, 1.0, 1e-12);
        EXPECT_NEAR(v("time_to_target_p95_days") * 86400.0 / time, 1.0, 1e-12);
        EXPECT_NEAR(v("gpu_hours_to_target") / (time * static_cast<double>(p.gpus()) / 3600.0), 1.0,
                    1e-12);
    }
    EXPECT_GT(ok, 32u);
}

TEST(CotuneSweep, FailuresAndStepNoiseEnterThroughTheRunModel) {
    // With variability and failures, the time to target is the run model's distribution of
    // ceil(equivalent steps) steps of this point (checked against evaluate_run directly).
    const Experiment e = io::parse_experiment(study("prism-paper", "", true), "study.toml");
    const DesignSpace space(e);
    const Evaluator ev(e);
    const ChunkResult all = sweep(space, ev);
    std::size_t checked = 0;

    for (const PointResult& r : all.rows) {
        if (r.status != PointStatus::ok || checked >= 6) continue;
        const DesignPoint p = space.point(r.index);
        // The same point's distribution: a run of total_tokens = its tokens reproduces it.
        Experiment with_run = e;
        with_run.training.total_tokens = r.values[column(ev, "tokens_to_target")];
        const Evaluator run_ev(with_run);
        const PointResult run = run_ev.evaluate(p, r.index, space.stream_index(r.index), nullptr);
        const auto v = [&](const char* name) { return r.values[column(ev, name)]; };
        const auto w = [&](const char* name) { return run.values[column(run_ev, name)]; };
        // tokens / tokens per step = the steps (whole), the same ones the study ran
        ASSERT_EQ(w("steps_total"), std::ceil(v("steps_to_target")));

        EXPECT_NEAR(v("time_to_target_p50_days") / w("run_time_p50_days"), 1.0, 1e-12);
        EXPECT_NEAR(v("time_to_target_p95_days") / w("run_time_p95_days"), 1.0, 1e-12);
        EXPECT_NEAR(v("gpu_hours_to_target") / w("gpu_hours_mean"), 1.0, 1e-12);
        EXPECT_GT(w("interruptions_mean"), 0.0);
        EXPECT_GT(v("time_to_target_p95_days"), v("time_to_target_p50_days"));
        ++checked;
    }
    EXPECT_EQ(checked, 6u);
}

TEST(CotuneSweep, LearningRatesAndNoiseScalesShareOneStepTimeDistribution) {
    // 4 learning rates x 2 noise scales = 8 points per distribution; every point equals what
    // it gives alone (no cache), and the step metrics are those of its stream's point.
    const Experiment e =
        io::parse_experiment(study("prism-paper", "warmup_steps = 500\n", true), "study.toml");
    const DesignSpace space(e);
    const Evaluator ev(e);
    ASSERT_EQ(space.points_per_stream(), 8u);
    const ChunkEvaluator chunk(space, ev);
    const ChunkResult all = chunk(WorkOrder{0, 0, space.size()});
    std::set<std::uint64_t> streams;
    std::size_t ok = 0;
    bool lr_matters = false, noise_matters = false;

    for (const PointResult& r : all.rows) {
        const PointResult alone =
            ev.evaluate(space.point(r.index), r.index, space.stream_index(r.index), nullptr);
        ASSERT_EQ(r.values.size(), alone.values.size());
        for (std::size_t k = 0; k < r.values.size(); ++k) {
            EXPECT_TRUE(r.values[k] == alone.values[k] ||
                        (std::isnan(r.values[k]) && std::isnan(alone.values[k])))
                << r.index << " " << ev.schema()[k].name;
        }
        if (r.status != PointStatus::ok) continue;
        ++ok;
        streams.insert(space.stream_index(r.index));
        const PointResult& s =
            all.rows[static_cast<std::size_t>(std::find_if(all.rows.begin(), all.rows.end(),
                                                           [&](const PointResult& x) {
                                                               return x.index ==
                                                                      space.stream_index(r.index);
                                                           }) -
                                              all.rows.begin())];
        const std::size_t p95 = column(ev, "step_time_p95_s");
        const std::size_t ttt = column(ev, "time_to_target_p95_days");
        EXPECT_EQ(r.values[p95], s.values[p95]);
        const DesignPoint pr = space.point(r.index), ps = space.point(s.index);
        if (pr.learning_rate != ps.learning_rate && r.values[ttt] != s.values[ttt]) {
            lr_matters = true;
        }
        if (pr.b_noise_tokens != ps.b_noise_tokens && r.values[ttt] != s.values[ttt]) {
            noise_matters = true;
        }
    }
    EXPECT_EQ(chunk.step_cache().misses(), streams.size());
    EXPECT_EQ(chunk.step_cache().hits(), ok - streams.size());
    EXPECT_TRUE(lr_matters);
    EXPECT_TRUE(noise_matters);
}

TEST(CotuneSweep, DeepSeekLawsCanBeTheLearningRateRule) {
    // C = 1e20 FLOPs: lr_opt = 0.3118 x 10^-2.5 = 9.85998e-4 at B_opt = 0.2920 x 1e20^0.3271 =
    // 1.017145e6 tokens, and at another batch B that times sqrt(B / B_opt) (Adam's rule).
    std::string text = study("none", "", false);
    text.replace(text.find("lr_rule = \"sqrt\"\nlr_reference = 3e-4"),
                 std::string("lr_rule = \"sqrt\"\nlr_reference = 3e-4").size(),
                 "lr_rule = \"deepseek\"\ncompute_budget = 1e20");
    const Experiment e = io::parse_experiment(text, "study.toml");
    const DesignSpace space(e);
    const Evaluator ev(e);
    const ChunkResult all = sweep(space, ev);

    std::size_t checked = 0;
    for (const PointResult& r : all.rows) {
        if (r.status != PointStatus::ok) continue;
        const double batch_tokens =
            static_cast<double>(space.point(r.index).global_batch_seqs) * e.model.seq;
        const double expected = 9.85998e-4 * std::sqrt(batch_tokens / 1.017145e6);
        EXPECT_NEAR(r.values[column(ev, "learning_rate_opt")] / expected, 1.0, 1e-5);
        ++checked;
    }
    EXPECT_GT(checked, 0u);
}

TEST(CotuneSweep, ABatchRampThatDoesNotSplitMakesThePointInfeasible) {
    // 32 GPUs at tp 2 = dp 16: a 8-sequence ramp phase does not split into dp x microbatch
    const Experiment e = io::parse_experiment(
        study("none", "batch_ramp = [{ batch_tokens = 65536, until_tokens = 1e9 }]\n", false),
        "study.toml");
    const DesignSpace space(e);
    const Evaluator ev(e);
    const ChunkResult all = sweep(space, ev);
    std::size_t ramp_infeasible = 0;

    for (const PointResult& r : all.rows) {
        if (r.status == PointStatus::infeasible &&
            r.reason.starts_with("cotune.batch_ramp: the 65536-token phase (8 sequences) cannot "
                                 "run here: global_batch is not a multiple of dp * microbatch")) {
            ++ramp_infeasible;
        }
    }
    EXPECT_GT(ramp_infeasible, 0u);
}

/// Per b_noise value of the example study: the global batch of the ok point with the smallest
/// time_to_target_p50_days, and of the one with the largest tokens_per_s (restricted to points
/// with `gpus` GPUs when gpus > 0).
struct Optima {
    std::int64_t time_batch = 0;
    std::int64_t throughput_batch = 0;
};

std::map<double, Optima> optima(const DesignSpace& space, const Evaluator& ev,
                                const ChunkResult& all, std::int64_t gpus) {
    std::map<double, std::pair<double, Optima>> best_time, best_thr;
    for (const PointResult& r : all.rows) {
        if (r.status != PointStatus::ok) continue;
        const DesignPoint p = space.point(r.index);
        if (gpus > 0 && p.gpus() != gpus) continue;
        const double bn = p.b_noise_tokens;
        const double time = r.values[column(ev, "time_to_target_p50_days")];
        const double thr = r.values[column(ev, "tokens_per_s")];
        auto [t, t_new] = best_time.try_emplace(bn, time, Optima{});
        if (t_new || time < t->second.first) t->second = {time, {p.global_batch_seqs, 0}};
        auto [h, h_new] = best_thr.try_emplace(bn, -thr, Optima{});
        if (h_new || -thr < h->second.first) h->second = {-thr, {0, p.global_batch_seqs}};
    }
    std::map<double, Optima> out;
    for (const auto& [bn, t] : best_time) {
        out[bn] = {t.second.time_batch, best_thr.at(bn).second.throughput_batch};
    }
    return out;
}

TEST(CotuneExample, SmallNoiseScalePrefersSmallerBatchesThanThroughputLargeConverges) {
    const Experiment e =
        io::load_experiment(std::string(PRISM_SOURCE_DIR) + "/configs/examples/cotune.toml");
    const DesignSpace space(e);
    const Evaluator ev(e);
    const ChunkResult all = sweep(space, ev);
    ASSERT_EQ(space.points_per_stream(), 16u);  // 8 learning rates x 2 noise scales

    for (std::int64_t gpus : {0, 256, 512, 1024, 2048}) {
        const std::map<double, Optima> o = optima(space, ev, all, gpus);
        ASSERT_EQ(o.size(), 2u);
        const Optima& small = o.at(4.0e6);
        const Optima& large = o.at(4.0e10);

        EXPECT_LT(small.time_batch, small.throughput_batch) << gpus << " GPUs";
        EXPECT_EQ(large.time_batch, large.throughput_batch) << gpus << " GPUs";
    }
}

// Issue 33, item 4: steps to target above 2^63 were cast to one step (time to target 3.9 s),
// so those points ranked first. Now such a point fails with the reason, and `validate` refuses
// the values that lead there (target_tokens 1e26, warmup_steps 1e300, lr_penalty 1e300).
TEST(CotuneSweep, StepsToTargetPast2To53FailThePointInsteadOfRankingFirst) {
    Experiment e = io::parse_experiment(study("none", "", false), "study.toml");
    e.cotune.target_tokens = 1e26;  // past what validation allows: the evaluator's own guard
    const DesignSpace space(e);
    const Evaluator ev(e);

    const ChunkResult all = sweep(space, ev);

    std::size_t failed = 0;
    for (const PointResult& r : all.rows) {
        EXPECT_NE(r.status, PointStatus::ok) << r.index;
        if (r.status != PointStatus::failed) continue;
        ++failed;
        EXPECT_NE(r.reason.find("steps to the target, more than 2^53"), std::string::npos)
            << r.reason;
    }
    EXPECT_GT(failed, 32u);
}

TEST(CotuneSweep, ValidationRefusesTargetsAndStepCountsPastTheLimits) {
    const auto message_of = [](const std::string& extra, const std::string& target) {
        std::string text = study("none", extra, false);
        if (!target.empty()) {
            text.replace(text.find("target_tokens = 1e11"), 20, target);
        }
        try {
            io::parse_experiment(text, "study.toml");
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };

    EXPECT_NE(message_of("", "target_tokens = 1e26")
                  .find("cotune.target_tokens: 1e+26 is above the limit of 1e+18 tokens"),
              std::string::npos)
        << message_of("", "target_tokens = 1e26");
    EXPECT_NE(message_of("warmup_steps = 1e300", "")
                  .find("cotune.warmup_steps: 1e+300 is more than 2^53 steps"),
              std::string::npos)
        << message_of("warmup_steps = 1e300", "");
    EXPECT_NE(message_of("lr_penalty = { coefficient = 1e300 }", "")
                  .find("cotune.lr_penalty.coefficient: 1e+300 is above the limit of 100"),
              std::string::npos)
        << message_of("lr_penalty = { coefficient = 1e300 }", "");
    EXPECT_EQ(message_of("", "target_tokens = 1e18"), "no error");
}

}  // namespace
}  // namespace prism::explorer
