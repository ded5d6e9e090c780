// Analytic evaluator: block-based statistical timing (DESIGN.md section 3) on the reduced model
// of step_model.hpp, as a pipeline of stages in the order the data flows (analytic/):
//   1. group laws (group_law.hpp): the law of a TP group's persistent factor g;
//   2. stage curves (stage_curves.hpp): a replica's makespan against its groups' factors, from
//      passes over the schedule DAG: a linear part plus W, the max of the stages' terms;
//   3. replica types and scenarios (replica_types.hpp): where the slow units land;
//   4. one replica's law (replica_law.hpp): each type's Delta on the x grid, W's masses
//      smoothed by the normal noise;
//   5. the max over replicas (replica_max.hpp): F_D = the scenarios' products of F^count, or the
//      slow units' PGF;
//   6. the regime and the DP sync / optimizer tail (regime.hpp): cells of R, tail nodes;
//   7. the step's CDF (step_cdf.hpp): the regime part convolved with D on a lattice, a monotone
//      cubic between lattice points;
//   8. the metrics: moments, quantiles, slow-step probabilities, histogram, cluster strata.
// Each stage's header states the approximation it makes; the accuracy tests check them against
// Monte Carlo. Speed (sweeps evaluate millions of points): group-factor log CDFs are tabulated
// once per law and cached across points (law_table), as are the slow-unit patterns of a layout
// (unit_patterns) and the regime's cells; replica types share the base type's per-stage terms;
// when each slow unit touches one replica the PGF is linear in the types' CDFs and their mixture
// takes one convolution; the stage curves come from two multi-lane passes over the schedule
// (PeriodicPipeline::makespan_stage_lanes) and the regime shifts from a few DAG runs; the inner
// loops are in kernels.cpp (instruction-set clones, bit-identical).

#include <algorithm>
#include <cmath>
#include <vector>

#include "src/stochastic/detail/analytic/group_law.hpp"
#include "src/stochastic/detail/analytic/regime.hpp"
#include "src/stochastic/detail/analytic/replica_law.hpp"
#include "src/stochastic/detail/analytic/replica_max.hpp"
#include "src/stochastic/detail/analytic/replica_types.hpp"
#include "src/stochastic/detail/analytic/stage_curves.hpp"
#include "src/stochastic/detail/analytic/step_cdf.hpp"
#include "src/stochastic/detail/evaluators.hpp"
#include "src/stochastic/detail/hiccup.hpp"
#include "src/stochastic/step_distribution.hpp"

namespace prism::stochastic::detail {

namespace {

/// The quantiles, slow-step probabilities and histogram of the step from its CDF (a
/// ssta::StepCdf, or a HiccupStep on one).
template <class Cdf>
void step_metrics(const Cdf& cdf, const EvaluationSpec& eval, double deterministic_s,
                  StepDistribution& out) {
    out.p50_s = cdf.quantile(0.5);
    out.p90_s = cdf.quantile(0.9);
    out.p95_s = cdf.quantile(0.95);
    out.p99_s = cdf.quantile(0.99);
    out.p999_s = cdf.quantile(0.999);
    out.p_slow.clear();
    for (double delta : eval.slow_deltas) {
        out.p_slow.push_back(1.0 - cdf.cdf((1.0 + delta) * deterministic_s));
    }
    out.histogram.clear();
    if (eval.histogram && eval.histogram_bins > 0) {
        out.histogram_lo_s = cdf.quantile(0.0005);
        out.histogram_hi_s = cdf.quantile(0.9995);
        if (!(out.histogram_hi_s > out.histogram_lo_s)) {
            out.histogram_hi_s = out.histogram_lo_s * (1 + 1e-12) + 1e-300;
        }
        const int nb = eval.histogram_bins;
        const double w = (out.histogram_hi_s - out.histogram_lo_s) / nb;
        double prev = 0;
        for (int b = 0; b < nb; ++b) {
            const double cur = b == nb - 1 ? 1.0 : cdf.cdf(out.histogram_lo_s + w * (b + 1));
            out.histogram.push_back(static_cast<float>(cur - prev));
            prev = cur;
        }
    }
}

/// Cluster realizations (DESIGN.md section 4: a slow node stays slow): K strata of the
/// persistent-only max D_p (F_D without the transient noise, FP) at its quantiles (k + 1/2) / K;
/// each stratum's mean moves by its quantile's offset from D_p's mean, and keeps the variance
/// the strata leave (the step's variance less theirs).
void cluster_strata(const std::vector<double>& FP, const ssta::Grid& x, int clusters,
                    StepDistribution& out) {
    double p_mean, p_var;
    ssta::grid_moments(FP, x, p_mean, p_var);
    std::vector<double> qs(clusters);
    double between = 0;
    for (int k = 0; k < clusters; ++k) {
        const double u = (k + 0.5) / clusters;
        // invert the tabulated CDF
        const auto it = std::lower_bound(FP.begin(), FP.end(), u);
        const auto i = std::clamp<long>(it - FP.begin(), 1, x.n - 1);
        const double f0 = FP[i - 1], f1 = FP[i];
        const double frac = f1 > f0 ? (u - f0) / (f1 - f0) : 0.5;
        qs[k] = x.at(static_cast<int>(i - 1)) + frac * x.h - p_mean;
    }
    double qm = 0;
    for (double q : qs) qm += q / clusters;
    for (double& q : qs) q -= qm;
    for (double q : qs) between += q * q / clusters;
    // a persistent-only law that the grid does not hold (its CDF not reaching 1 there, as with
    // a deterministic slow state at the grid's edge) gives offsets outside the grid: the
    // strata then keep the marginal moments (one realization's law), never a mean <= 0
    const double span = x.h * (x.n - 1);
    bool valid = std::isfinite(p_mean) && std::isfinite(between) && FP.back() > 0.5;
    for (double q : qs) valid = valid && std::fabs(q) <= span && out.mean_s + q > 0;
    if (!valid) {
        std::fill(qs.begin(), qs.end(), 0.0);
        between = 0;
    }
    const double within = std::max(0.0, out.std_s * out.std_s - between);
    for (int k = 0; k < clusters; ++k) {
        out.cluster_mean_s[k] = out.mean_s + qs[k];
        out.cluster_var_s2[k] = within;
    }
}

}  // namespace

StepDistribution point_with_hiccups(double t_s, double deterministic_s, const HiccupLaw& hiccup,
                                    const EvaluationSpec& eval, std::uint64_t seed,
                                    std::uint64_t point_index) {
    StepDistribution out;
    out.deterministic_s = deterministic_s;
    if (eval.method == Method::montecarlo) {
        std::vector<double> x(static_cast<std::size_t>(std::max(1, eval.samples)), t_s);
        add_hiccups(x, hiccup, seed, point_index);
        summarize_samples(std::move(x), eval, deterministic_s, out);
    } else {
        // S at t_s: S + H has the CDF G(t - t_s) exactly
        step_metrics(HiccupStep(hiccup, [t_s](double t) { return t >= t_s ? 1.0 : 0.0; }, {t_s}),
                     eval, deterministic_s, out);
        out.mean_s = t_s + hiccup.mean();
        out.std_s = std::sqrt(hiccup.var());
    }
    out.cluster_mean_s = {t_s + hiccup.mean()};
    out.cluster_var_s2 = {hiccup.var()};
    return out;
}

void analytic(const StepModel& model, const PersistentLayout& layout, const EvaluationSpec& eval,
              int clusters, StepDistribution& out, const std::vector<double>* query,
              std::vector<double>* cdf_out, int grid_points, const HiccupLaw* hiccup) {
    ssta::trim_law_cache();
    // 1. the group laws: healthy, and without slow members (the base law)
    ssta::GroupLaws laws;
    ssta::group_laws(model, layout, laws);
    // 2. a replica's makespan against its groups' factors, on the schedule
    const ssta::StageCurves curves = ssta::stage_curves(model, laws.clean);
    // 3. where the slow units land: replica types, scenarios or the slow units' PGF
    const ssta::ReplicaSet set(model, layout, curves, laws);
    // 4. each type's Delta on the x grid, with the noise and (for the strata) without
    const ssta::ReplicaLaw law(model, curves, set, grid_points);
    const ssta::Grid& x = law.grid();
    ssta::ReplicaSfs sfs;
    ssta::replica_sfs(model, set, law, clusters, curves.noise_sd(), sfs);
    // 5. the max over the replicas, D
    const ssta::ReplicaMax max(model, set, x, sfs.linear_pgf);
    const std::vector<double> FD = max.table(sfs.type, sfs.mix);
    double d_mean, d_var;
    ssta::grid_moments(FD, x, d_mean, d_var);
    // 6. the regime's cells and the sync / optimizer tail (its normal part collapsed where
    // narrow against D, folded into D where wide against it: regime.hpp)
    const ssta::RegimePart regime = ssta::regime_cells(model, curves, std::sqrt(d_var), x.h);
    // 7. the step: the regime part convolved with D
    const ssta::StepCdf cdf(regime, FD, x, d_mean);
    // 8. the metrics
    const double folded_var = regime.folded_sd * regime.folded_sd;
    ssta::step_moments(regime.cells, d_mean, d_var + folded_var, out.mean_s, out.std_s);
    const auto metrics = [&](const auto& step_cdf) {
        if (query != nullptr && cdf_out != nullptr) {
            cdf_out->clear();
            for (double t : *query) cdf_out->push_back(step_cdf.cdf(t));
        }
        step_metrics(step_cdf, eval, model.deterministic_s, out);
    };
    if (hiccup != nullptr && hiccup->active()) {
        // 9. hiccups: the step plus the largest delay over the nodes, independent (hiccup.hpp)
        std::vector<double> nodes(kHiccupStepNodes);
        for (int k = 0; k < kHiccupStepNodes; ++k) {
            nodes[k] = cdf.quantile((k + 0.5) / kHiccupStepNodes);
        }
        metrics(HiccupStep(
            *hiccup, [&cdf](double t) { return cdf.cdf(t); }, std::move(nodes)));
        out.mean_s += hiccup->mean();
        out.std_s = std::sqrt(out.std_s * out.std_s + hiccup->var());
    } else {
        metrics(cdf);
    }
    out.cluster_mean_s.assign(clusters, out.mean_s);
    out.cluster_var_s2.assign(clusters, out.std_s * out.std_s);
    if (clusters > 1) {
        cluster_strata(max.table(sfs.type_pers, sfs.mix_pers), x, clusters, out);
    }
}

}  // namespace prism::stochastic::detail
