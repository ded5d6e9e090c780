// Issue 31's reproductions (tests/data/experiments/stragglers, a new user's Llama 3 70B study on
// up to 2,048 H100) as regression tests. Each compares against an independent truth: the
// deterministic model with the slowed kernels scaled in the profile (every unit slow), Monte
// Carlo (the reference evaluator), and Jensen's inequality (the step is a max-plus expression of
// the durations, convex and nondecreasing in each).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/experiment_loader.hpp"
#include "src/model/design_space.hpp"
#include "src/model/deterministic.hpp"
#include "src/stochastic/step_distribution.hpp"

namespace {

std::filesystem::path straggler_file(const std::string& name) {
    return std::filesystem::path(PRISM_TEST_DATA_DIR) / "experiments" / "stragglers" / name;
}

/// The point of `e` whose dimensions take the values of `text` ("gpus=2048,tp=8,...", every
/// dimension named).
prism::DesignPoint point_of(const prism::Experiment& e, const std::string& text) {
    std::map<std::string, std::string> want;
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t comma = std::min(text.find(',', pos), text.size());
        const std::string item = text.substr(pos, comma - pos);
        const size_t eq = item.find('=');
        want[item.substr(0, eq)] = item.substr(eq + 1);
        pos = comma + 1;
    }
    std::vector<std::size_t> digits;
    for (const auto& dim : e.space.dimensions) {
        const std::string& v = want.at(dim.name);
        std::size_t k = 0;
        for (; k < dim.values.size(); ++k) {
            const auto& x = dim.values[k];
            const std::string s = x.type == prism::DimensionValue::Type::string ? x.s
                                  : x.type == prism::DimensionValue::Type::integer
                                      ? std::to_string(x.i)
                                      : std::string{};
            if (s == v) break;
        }
        EXPECT_LT(k, dim.values.size()) << dim.name << "=" << v;
        digits.push_back(k);
    }
    bool not_divisible = false;
    return prism::decode_point(e, digits, &not_divisible);
}

prism::StepDistribution evaluate(const prism::Experiment& e, const prism::DesignPoint& p,
                                 prism::Method method, std::uint32_t deterministic_classes = 0) {
    const auto r = prism::evaluate_deterministic(e, p);
    prism::EvaluationSpec eval = e.evaluation;
    eval.method = method;
    eval.samples = 2000;
    return prism::stochastic::step_distribution_masked(r.profile, p, e.hardware[p.hardware],
                                                       e.cluster, e.variability, eval, e.seed, 0,
                                                       deterministic_classes);
}

/// The profile with every compute op of the layers, the embedding and the head (the kernels a
/// slow GPU slows: step_model.hpp) `k` times slower: the hardware table with those kernels k
/// times slower.
prism::StepProfile slowed(prism::StepProfile p, double k) {
    auto scale = [k](prism::SegmentList& segs) {
        for (auto& seg : segs) {
            for (auto& op : seg.ops) {
                if (!prism::is_communication(op.cls)) op.time_s *= k;
            }
        }
    };
    for (auto* s : {&p.layer_forward, &p.layer_backward, &p.embedding_forward,
                    &p.embedding_backward, &p.head_forward, &p.head_backward}) {
        scale(*s);
    }
    return p;
}

constexpr const char* kZero3Point =
    "gpus=2048,tp=8,pp=4,cp=1,microbatch=2,zero_stage=3,recompute=none,interleave=5,"
    "global_batch=2048";

TEST(Stragglers, EveryGpuThreeTimesSlowIsTheHardwareThreeTimesSlowerForZero3AndZero1) {
    const auto e = prism::io::load_experiment(straggler_file("all_gpus_slow.toml"));

    for (const char* zero : {"zero_stage=3", "zero_stage=1"}) {
        std::string text = kZero3Point;
        text.replace(text.find("zero_stage=3"), 12, zero);
        const auto p = point_of(e, text);
        const auto r = prism::evaluate_deterministic(e, p);
        const double truth = prism::deterministic_step_time(slowed(r.profile, 3.0));
        const auto a = evaluate(e, p, prism::Method::analytic);
        const auto mc = evaluate(e, p, prism::Method::montecarlo);

        std::printf(
            "  %s: deterministic %.3f s, compute x3 %.3f s, analytic mean %.3f p50 %.3f, "
            "Monte Carlo mean %.3f\n",
            zero, r.step_time_s, truth, a.mean_s, a.p50_s, mc.mean_s);
        EXPECT_GT(truth, 1.5 * r.step_time_s) << zero;
        EXPECT_NEAR(mc.mean_s, truth, 1e-9 * truth) << zero;
        EXPECT_NEAR(mc.p99_s, truth, 1e-9 * truth) << zero;
        EXPECT_NEAR(a.mean_s, truth, 1e-6 * truth) << zero;
        EXPECT_NEAR(a.p50_s, truth, 1e-6 * truth) << zero;
        EXPECT_NEAR(a.p99_s, truth, 1e-6 * truth) << zero;
    }
}

TEST(Stragglers, FivePercentOfGpusThreeTimesSlowGiveAFiniteSlowerStep) {
    const auto e = prism::io::load_experiment(straggler_file("negative_mean.toml"));
    const auto p = point_of(e, kZero3Point);
    const auto r = prism::evaluate_deterministic(e, p);
    const double all_slow = prism::deterministic_step_time(slowed(r.profile, 3.0));

    for (const auto method : {prism::Method::analytic, prism::Method::montecarlo}) {
        const auto d = evaluate(e, p, method);

        // 5% of 512 GPUs per stage: every stage holds a slow GPU with probability 1 - 1e-11,
        // and ZeRO-3 runs each stage in lockstep over its GPUs, so the step is the all-slow one
        EXPECT_NEAR(d.mean_s, all_slow, 1e-3 * all_slow);
        for (double m : d.cluster_mean_s) EXPECT_GT(m, 0.0);
    }
}

TEST(Stragglers, OnePercentOfNodesSlowAndNothingElseTheEvaluatorsAgree) {
    const auto e = prism::io::load_experiment(straggler_file("slow_nodes_only.toml"));
    const auto p = point_of(e,
                            "gpus=2048,tp=8,pp=1,cp=1,microbatch=1,zero_stage=1,recompute=full,"
                            "interleave=1,global_batch=2048");
    const auto r = prism::evaluate_deterministic(e, p);
    const double slow = prism::deterministic_step_time(slowed(r.profile, 1.5));
    // 256 replicas of one node each: the step is the slow replica's unless no node of the 256
    // is slow (probability 0.99^256 = 0.076), a closed form
    const double p_none = std::pow(0.99, 256);
    const double mean = p_none * r.step_time_s + (1 - p_none) * slow;

    const auto a = evaluate(e, p, prism::Method::analytic);
    const auto mc = evaluate(e, p, prism::Method::montecarlo);

    std::printf(
        "  deterministic %.3f s, slow replica %.3f s, closed-form mean %.4f s; analytic "
        "mean %.4f p50 %.4f; Monte Carlo mean %.4f p50 %.4f\n",
        r.step_time_s, slow, mean, a.mean_s, a.p50_s, mc.mean_s, mc.p50_s);
    EXPECT_NEAR(a.mean_s, mean, 2e-3 * mean);   // the grid (README: 257 points)
    EXPECT_NEAR(a.p50_s, slow, 2e-3 * slow);    // the median replica max is the slow one
    EXPECT_NEAR(mc.mean_s, mean, 0.01 * mean);  // 2,000 draws: sd 0.27 s / sqrt(2000)
    EXPECT_NEAR(mc.p50_s, slow, 1e-9 * slow);
}

TEST(Stragglers, MakingGemmsDeterministicNeverRaisesTheMean) {
    const auto e = prism::io::load_experiment(straggler_file("llama70b_2048.toml"));
    const auto p = point_of(e,
                            "gpus=1024,tp=2,pp=2,cp=1,microbatch=1,zero_stage=3,recompute=full,"
                            "interleave=5,global_batch=2048");
    const auto gemm = 1u << static_cast<int>(prism::KernelClass::gemm);

    for (const auto method : {prism::Method::analytic, prism::Method::montecarlo}) {
        const auto noisy = evaluate(e, p, method);
        const auto quiet = evaluate(e, p, method, gemm);

        std::printf("  %s: mean %.4f s -> %.4f s without GEMM noise, p95 %.4f -> %.4f s\n",
                    method == prism::Method::analytic ? "analytic" : "Monte Carlo", noisy.mean_s,
                    quiet.mean_s, noisy.p95_s, quiet.p95_s);
        // Jensen (the step is convex in the durations); Monte Carlo: the same streams, 2,000
        // draws of a step with sd ~0.6 s (5 standard errors)
        const double tol = method == prism::Method::analytic ? 1e-4 * noisy.mean_s
                                                             : 5 * noisy.std_s / std::sqrt(2000.0);
        EXPECT_LE(quiet.mean_s, noisy.mean_s + tol);
        // a quantile is not convex: its drop may be negative within README's 1% of p95
        EXPECT_GE(noisy.p95_s - quiet.p95_s, -0.01 * noisy.p95_s);
    }
}

}  // namespace
