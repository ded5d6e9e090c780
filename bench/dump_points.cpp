// Every figure the stochastic evaluators give on a fixed set of points, one value per line at 17
// significant digits, so that a refactoring can be shown bit-identical by diffing two runs:
//   ./dump_points [--no-mc] > before.txt   ...   diff before.txt after.txt
// The points: the 26 configurations of the 405B-class sweep (bench/points_405b.hpp) with
// ordered, random and variability-aware placement, without persistent variability, and on a
// coarse grid; every point of the quickstart (configs/quickstart.toml) as the sweep evaluates it
// (all metrics, sensitivity and run model included) and its step distribution under each
// placement; the accuracy tests' matrix and shapes (tests/src/stochastic/), with the analytic
// CDF at Monte Carlo draws; narrow steps (a step sd of 1e-5 to 1e-3 of its mean). Monte Carlo
// figures (1,000-2,000 samples per point) unless --no-mc.
// About a minute on one core with Monte Carlo.

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <tuple>
#include <vector>

#include "bench/points_405b.hpp"
#include "explorer/design_space.hpp"
#include "io/experiment_loader.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/evaluate.hpp"
#include "src/stochastic/step_distribution.hpp"
#include "tests/src/stochastic/accuracy_matrix.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace {

using namespace prism;

std::size_t values = 0;  // lines printed

void put(const std::string& key, double x) {
    std::printf("%s %.17g\n", key.c_str(), x);
    ++values;
}

/// Every field of a step-time distribution under `key`.
void dump(const std::string& key, const StepDistribution& d) {
    put(key + " det", d.deterministic_s);
    put(key + " mean", d.mean_s);
    put(key + " std", d.std_s);
    put(key + " p50", d.p50_s);
    put(key + " p90", d.p90_s);
    put(key + " p95", d.p95_s);
    put(key + " p99", d.p99_s);
    put(key + " p999", d.p999_s);
    for (size_t i = 0; i < d.p_slow.size(); ++i)
        put(key + " p_slow" + std::to_string(i), d.p_slow[i]);
    put(key + " hist_lo", d.histogram_lo_s);
    put(key + " hist_hi", d.histogram_hi_s);
    for (size_t i = 0; i < d.histogram.size(); ++i) {
        put(key + " hist" + std::to_string(i), d.histogram[i]);
    }
    for (size_t k = 0; k < d.cluster_mean_s.size(); ++k) {
        put(key + " cluster_mean" + std::to_string(k), d.cluster_mean_s[k]);
        put(key + " cluster_var" + std::to_string(k), d.cluster_var_s2[k]);
    }
}

/// One point: the analytic distribution, its CDF at Monte Carlo draws, and the Monte Carlo one.
void dump_point(const std::string& key, const StepProfile& profile, const DesignPoint& point,
                const HardwareSpec& hw, const ClusterSpec& cluster, const VariabilitySpec& v,
                int grid_points, int mc_samples, std::uint64_t index) {
    EvaluationSpec eval;
    eval.histogram = true;
    eval.histogram_bins = 16;
    eval.grid_points = grid_points;
    dump(key + " an", step_distribution(profile, point, hw, cluster, v, eval, 2026, index));
    if (mc_samples <= 0) return;
    const auto x =
        stochastic::monte_carlo_samples(profile, point, hw, cluster, v, 200, 2026, index + 1);
    const auto f = stochastic::analytic_cdf(profile, point, hw, cluster, v, x, grid_points);
    for (size_t i = 0; i < f.size(); i += 10) put(key + " cdf" + std::to_string(i), f[i]);
    eval.method = Method::montecarlo;
    eval.samples = mc_samples;
    dump(key + " mc", step_distribution(profile, point, hw, cluster, v, eval, 2026, index));
}

void sweep_405b(int mc) {
    const bench::Sweep405B sweep;
    const auto& hw = sweep.base.experiment.hardware[0];
    const auto& cluster = sweep.base.experiment.cluster;
    auto clean = bench::prism_paper(false);
    clean.persistent.spatial.cv = 0;
    clean.persistent.slow_probability = 0;
    struct Variant {
        const char* name;
        PlacementKind kind;
        VariabilitySpec v;
        int grid, mc;
    };
    const Variant variants[] = {
        {"ordered", PlacementKind::ordered, bench::prism_paper(false), 257, mc},
        {"random", PlacementKind::random, bench::prism_paper(false), 257, mc},
        {"aware", PlacementKind::variability_aware, bench::prism_paper(false), 257, 0},
        {"nopersistent", PlacementKind::ordered, clean, 257, 0},
        {"grid65", PlacementKind::ordered, bench::prism_paper(false), 65, 0},
        {"heavytail", PlacementKind::ordered, bench::prism_paper(true), 257, 0}};
    for (const auto& var : variants) {
        for (size_t i = 0; i < sweep.points.size(); ++i) {
            DesignPoint pt = sweep.points[i];
            pt.placement.kind = var.kind;
            dump_point(std::string("405b ") + var.name + " " + std::to_string(i), sweep.profiles[i],
                       pt, hw, cluster, var.v, var.grid, var.mc, i);
        }
    }
}

void quickstart(int mc) {
    Experiment ex = io::load_experiment(std::string(PRISM_SOURCE_DIR) + "/configs/quickstart.toml");
    ex.evaluation.histogram = true;
    ex.evaluation.histogram_bins = 16;
    const explorer::DesignSpace space(ex);
    const Evaluator evaluator(ex);
    for (std::uint64_t i = 0; i < space.size(); ++i) {
        const auto decoded = space.decode(i);
        if (decoded.filtered) continue;
        const std::string key = "quickstart " + std::to_string(i);
        const auto row = evaluator.evaluate(decoded.point, i, space.stream_index(i), nullptr);
        put(key + " status", static_cast<double>(row.status));
        for (size_t m = 0; m < row.values.size(); ++m) {
            put(key + " " + evaluator.schema()[m].name, row.values[m]);
        }
        for (size_t b = 0; b < row.histogram.size(); ++b) {
            put(key + " hist" + std::to_string(b), row.histogram[b]);
        }
        StepProfile profile;
        try {
            profile = evaluate_deterministic(ex, decoded.point).profile;
        } catch (const std::exception&) {
            continue;
        }
        const auto& hw = ex.hardware.at(static_cast<size_t>(decoded.point.hardware));
        for (const auto kind : {PlacementKind::random, PlacementKind::variability_aware}) {
            DesignPoint pt = decoded.point;
            pt.placement.kind = kind;
            dump_point(key + (kind == PlacementKind::random ? " random" : " aware"), profile, pt,
                       hw, ex.cluster, ex.variability, 257, 0, i);
        }
        if (mc > 0) {
            EvaluationSpec eval;
            eval.method = Method::montecarlo;
            eval.samples = mc;
            dump(key + " mc", step_distribution(profile, decoded.point, hw, ex.cluster,
                                                ex.variability, eval, ex.seed, i));
        }
    }
}

void accuracy_shapes(int mc) {
    const auto hw = testing::test_hardware();
    std::uint64_t index = 0;
    for (const auto& c : testing::matrix()) {
        const auto s = testing::setup(c);
        dump_point("matrix " + c.name, s.profile, s.point, hw, s.cluster, s.var, 257, mc, index++);
        dump_point("matrix " + c.name + " grid2049", s.profile, s.point, hw, s.cluster, s.var, 2049,
                   0, index++);
    }
    // the other accuracy tests' shapes: (tp, pp, dp, microbatches, chunks, fsdp, slow
    // probability, slow factor, placement, slow nodes or GPUs, regime cv)
    struct Shape {
        int tp, pp, dp, mb, v;
        bool fsdp;
        double q, factor;
        PlacementKind kind;
        bool per_node;
        double regime_cv;
    };
    const auto ord = PlacementKind::ordered, rnd = PlacementKind::random;
    const auto aware = PlacementKind::variability_aware;
    const Shape shapes[] = {{4, 4, 2, 8, 2, false, 0.0, 1.5, ord, true, 0.1},
                            {8, 4, 16, 8, 2, false, 0.01, 1.5, ord, true, 0.1},
                            {8, 8, 32, 16, 2, false, 0.002, 1.5, ord, true, 0.1},
                            {8, 4, 64, 8, 4, false, 0.0, 1.5, ord, true, 0.1},
                            {8, 4, 16, 8, 1, false, 0.01, 1.5, rnd, true, 0.1},
                            {8, 4, 16, 8, 1, false, 0.01, 1.5, rnd, false, 0.1},
                            {8, 4, 1, 8, 1, false, 0.05, 1.5, rnd, true, 0.1},
                            {8, 8, 256, 16, 1, false, 0.01, 1.5, rnd, true, 0.1},
                            {8, 1, 512, 2, 1, false, 0.0, 1.5, ord, true, 0.3},
                            {8, 4, 64, 8, 1, false, 0.0, 1.5, ord, true, 0.3},
                            {4, 4, 64, 16, 1, false, 0.01, 1.14, ord, true, 0.1},
                            {2, 8, 32, 4, 1, false, 0.01, 1.14, ord, true, 0.1},
                            {4, 16, 16, 8, 1, false, 0.01, 1.14, ord, true, 0.1},
                            {2, 2, 32, 4, 1, true, 0.01, 1.14, ord, true, 0.1},
                            {4, 4, 16, 8, 1, true, 0.01, 1.14, ord, true, 0.1},
                            {2, 4, 16, 8, 1, true, 0.01, 1.5, ord, true, 0.1},
                            {8, 4, 8, 8, 1, true, 0.01, 1.14, rnd, true, 0.1},
                            {8, 4, 8, 8, 1, true, 0.01, 1.14, aware, true, 0.1},
                            {8, 4, 16, 8, 1, false, 0.01, 1.5, aware, true, 0.1},
                            {4, 4, 32, 8, 1, false, 0.02, 1.5, aware, true, 0.1}};
    for (const auto& sh : shapes) {
        auto s = testing::pipeline_shape(sh.tp, sh.pp, sh.dp, sh.mb, sh.fsdp);
        s.chunks = sh.v;
        s.layers_per_chunk = sh.v > 1 ? 2 : 4;
        auto var = testing::prism_like(sh.q);
        var.persistent.slow_factor = sh.factor;
        var.persistent.slow_per_node = sh.per_node;
        var.comm_regime.cv = sh.regime_cv;
        if (sh.regime_cv > 0.2) var.persistent.spatial.cv = 0;
        ClusterSpec cluster;
        if (sh.kind != ord)
            cluster.total_gpus = static_cast<std::int64_t>(sh.tp) * sh.pp * sh.dp + 64;
        char key[96];
        std::snprintf(key, sizeof key, "shape tp%d pp%d dp%d mb%d v%d fsdp%d q%g f%g k%d n%d r%g",
                      sh.tp, sh.pp, sh.dp, sh.mb, sh.v, sh.fsdp ? 1 : 0, sh.q, sh.factor,
                      static_cast<int>(sh.kind), sh.per_node ? 1 : 0, sh.regime_cv);
        const bool big = sh.tp * sh.pp * sh.dp > 4096;
        dump_point(key, testing::make_profile(s), testing::design_point(s, sh.kind), hw, cluster,
                   var, 257, big ? 0 : mc, index++);
    }
}

/// Narrow steps (tests/src/stochastic/narrow_test.cpp): a step sd of 1e-5 to 1e-3 of its mean
/// from the transient noise (the DP sync's one draw carrying most of it), with and without a
/// regime, and a sync that only just hides behind the backward pass.
void narrow_shapes(int mc) {
    const auto hw = testing::test_hardware();
    std::uint64_t index = 1000;
    for (const auto& [tp, pp, dp, scale, regime_cv, rectified] :
         {std::tuple{8, 4, 8, 0.018, 0.0, false}, std::tuple{8, 4, 8, 0.18, 0.0, false},
          std::tuple{8, 4, 8, 0.01, 0.0015, false}, std::tuple{8, 4, 8, 0.01, 0.0, true},
          std::tuple{8, 1, 64, 0.05, 0.0, false}}) {
        const auto s = testing::pipeline_shape(tp, pp, dp, 8);
        auto profile = testing::make_profile(s);
        if (rectified) profile.dp_overlap_s = profile.dp_sync[0].ops[0].time_s;
        VariabilitySpec var = testing::prism_like(0.0);
        var.persistent.spatial = DistributionSpec{};
        for (auto& t : var.transient) t.cv *= scale;
        var.comm_regime =
            regime_cv > 0 ? testing::dist(DistKind::lognormal, regime_cv) : DistributionSpec{};
        char key[96];
        std::snprintf(key, sizeof key, "narrow tp%d pp%d dp%d x%g r%g rect%d", tp, pp, dp, scale,
                      regime_cv, rectified ? 1 : 0);
        dump_point(key, profile, testing::design_point(s), hw, {}, var, 257, mc, index++);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const bool mc = !(argc > 1 && std::strcmp(argv[1], "--no-mc") == 0);
    try {
        sweep_405b(mc ? 1000 : 0);
        quickstart(mc ? 1000 : 0);
        accuracy_shapes(mc ? 2000 : 0);
        narrow_shapes(mc ? 2000 : 0);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dump_points: %s\n", e.what());
        return 1;
    }
    std::fprintf(stderr, "dump_points: %zu values\n", values);
}
