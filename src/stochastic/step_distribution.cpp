#include "src/stochastic/step_distribution.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "src/common/error.hpp"
#include "src/stochastic/detail/evaluators.hpp"
#include "src/stochastic/detail/persistent.hpp"
#include "src/stochastic/detail/step_model.hpp"

namespace prism {

namespace {

bool deterministic_spec(const DistributionSpec& d) {
    switch (d.kind) {
        case DistKind::constant:
            return true;
        case DistKind::empirical:
            return d.samples.empty() ||
                   std::all_of(d.samples.begin(), d.samples.end(),
                               [&](double x) { return x == d.samples.front(); });
        case DistKind::mixture:
            return std::all_of(d.components.begin(), d.components.end(), [](const auto& c) {
                return c.weight <= 0 || deterministic_spec(c.dist);
            });
        default:
            return d.cv == 0;
    }
}

/// A distribution that is deterministic and equal to 1 leaves every kernel at its base time.
bool unit_constant(const DistributionSpec& d) {
    if (!deterministic_spec(d)) return false;
    const stochastic::Distribution dist(d);
    return dist.quantile(0.5) == 1.0;
}

StepDistribution point_mass(double t, const EvaluationSpec& eval) {
    StepDistribution out;
    out.deterministic_s = t;
    out.mean_s = out.p50_s = out.p90_s = out.p95_s = out.p99_s = out.p999_s = t;
    out.std_s = 0;
    out.p_slow.assign(eval.slow_deltas.size(), 0.0);
    for (size_t i = 0; i < eval.slow_deltas.size(); ++i) {
        out.p_slow[i] = t > (1.0 + eval.slow_deltas[i]) * t ? 1.0 : 0.0;
    }
    if (eval.histogram && eval.histogram_bins > 0) {
        out.histogram.assign(eval.histogram_bins, 0.0f);
        out.histogram[0] = 1.0f;
        out.histogram_lo_s = t;
        out.histogram_hi_s = t;
    }
    out.cluster_mean_s = {t};
    out.cluster_var_s2 = {0.0};
    return out;
}

/// Bit c set when some op of kernel class c takes time in the profile: masking a class with no
/// such op leaves the distribution unchanged (its sensitivity is exactly 0).
std::uint32_t classes_in(const StepProfile& p) {
    std::uint32_t used = 0;
    for (const SegmentList* list :
         {&p.layer_forward, &p.layer_backward, &p.embedding_forward, &p.embedding_backward,
          &p.head_forward, &p.head_backward, &p.dp_sync, &p.optimizer, &p.dataloader}) {
        for (const auto& seg : *list) {
            for (const auto& op : seg.ops) {
                if (op.time_s > 0) used |= 1u << static_cast<int>(op.cls);
            }
        }
    }
    if (p.p2p.time_s > 0 && p.stages * p.chunks > 1) used |= 1u << static_cast<int>(p.p2p.cls);
    return used;
}

}  // namespace

bool VariabilitySpec::is_deterministic() const {
    for (const auto& d : transient) {
        if (!unit_constant(d)) return false;
    }
    if (!unit_constant(comm_regime)) return false;
    if (!unit_constant(persistent.spatial)) return false;
    return persistent.slow_probability <= 0 || persistent.slow_factor == 1.0;
}

namespace stochastic {

namespace {

/// detail::make_layout, memoized per thread: the layout is a function of the group sizes, the
/// placement, the machine size and the order of the stages by work (variability-aware
/// preference), which a sweep repeats across millions of points; building it walks every GPU.
std::shared_ptr<const detail::PersistentLayout> layout_for(const detail::StepModel& model,
                                                           const DesignPoint& point,
                                                           const HardwareSpec& hardware,
                                                           const ClusterSpec& cluster) {
    if (model.persistent_deterministic) {
        return std::make_shared<const detail::PersistentLayout>(
            detail::make_layout(model, point, hardware, cluster));
    }
    std::vector<std::int64_t> key{model.stages,
                                  model.dp,
                                  model.group_gpus,
                                  model.slow_unit_gpus,
                                  point.tp,
                                  point.cp,
                                  static_cast<std::int64_t>(point.placement.kind),
                                  cluster.total_gpus};
    for (const ParallelDim d : point.placement.order) key.push_back(static_cast<int>(d));
    std::vector<int> order(model.stages);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return model.stage_work_s[a] < model.stage_work_s[b]; });
    key.insert(key.end(), order.begin(), order.end());
    thread_local std::map<std::vector<std::int64_t>,
                          std::shared_ptr<const detail::PersistentLayout>>
        cache;
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    auto layout = std::make_shared<const detail::PersistentLayout>(
        detail::make_layout(model, point, hardware, cluster));
    if (cache.size() >= 64) cache.clear();
    cache.emplace(std::move(key), layout);
    return layout;
}

}  // namespace

StepDistribution step_distribution_masked(const StepProfile& profile, const DesignPoint& point,
                                          const HardwareSpec& hardware, const ClusterSpec& cluster,
                                          const VariabilitySpec& variability,
                                          const EvaluationSpec& evaluation, std::uint64_t seed,
                                          std::uint64_t point_index,
                                          std::uint32_t deterministic_classes,
                                          bool cluster_strata) {
    VariabilitySpec spec = variability;
    for (int c = 0; c < kKernelClassCount; ++c) {
        if (deterministic_classes & (1u << c)) spec.transient[c] = DistributionSpec{};
    }
    if (spec.is_deterministic()) {
        return point_mass(deterministic_step_time(profile), evaluation);
    }
    const auto model =
        detail::build_step_model(profile, point, hardware, cluster, spec, deterministic_classes);
    const auto layout_ptr = layout_for(model, point, hardware, cluster);
    const detail::PersistentLayout& layout = *layout_ptr;
    const int clusters =
        model.persistent_deterministic || !cluster_strata ? 1 : kClusterRealizations;
    StepDistribution out;
    out.deterministic_s = model.deterministic_s;
    if (evaluation.method == Method::montecarlo) {
        if (evaluation.samples < 1) {
            throw ConfigError(
                fmt::format("evaluation.samples must be >= 1, got {}", evaluation.samples));
        }
        auto x = detail::monte_carlo(model, layout, evaluation.samples, seed, point_index);
        detail::summarize_samples(std::move(x), evaluation, model.deterministic_s, out);
        if (clusters == 1) {
            out.cluster_mean_s = {out.mean_s};
            out.cluster_var_s2 = {out.std_s * out.std_s};
        } else {
            // a quarter of the sample budget again, spread over the realizations
            const int per = std::clamp(evaluation.samples / (4 * clusters), 2, 64);
            detail::monte_carlo_clusters(model, layout, clusters, per, seed, point_index,
                                         out.cluster_mean_s, out.cluster_var_s2);
        }
    } else {
        detail::analytic(model, layout, evaluation, clusters, out, nullptr, nullptr,
                         evaluation.grid_points);
    }
    return out;
}

std::vector<double> monte_carlo_samples(const StepProfile& profile, const DesignPoint& point,
                                        const HardwareSpec& hardware, const ClusterSpec& cluster,
                                        const VariabilitySpec& variability, int samples,
                                        std::uint64_t seed, std::uint64_t point_index) {
    const auto model = detail::build_step_model(profile, point, hardware, cluster, variability);
    const auto layout = detail::make_layout(model, point, hardware, cluster);
    return detail::monte_carlo(model, layout, samples, seed, point_index);
}

std::vector<double> analytic_cdf(const StepProfile& profile, const DesignPoint& point,
                                 const HardwareSpec& hardware, const ClusterSpec& cluster,
                                 const VariabilitySpec& variability, const std::vector<double>& t_s,
                                 int grid_points) {
    const auto model = detail::build_step_model(profile, point, hardware, cluster, variability);
    const auto layout = detail::make_layout(model, point, hardware, cluster);
    const int clusters = model.persistent_deterministic ? 1 : kClusterRealizations;
    StepDistribution out;
    std::vector<double> cdf;
    detail::analytic(model, layout, EvaluationSpec{}, clusters, out, &t_s, &cdf,
                     grid_points > 0 ? grid_points : detail::kAnalyticGridPoints);
    return cdf;
}

}  // namespace stochastic

StepDistribution step_distribution(const StepProfile& profile, const DesignPoint& point,
                                   const HardwareSpec& hardware, const ClusterSpec& cluster,
                                   const VariabilitySpec& variability,
                                   const EvaluationSpec& evaluation, std::uint64_t seed,
                                   std::uint64_t point_index) {
    return stochastic::step_distribution_masked(profile, point, hardware, cluster, variability,
                                                evaluation, seed, point_index, 0);
}

Sensitivity sensitivity(const StepProfile& profile, const DesignPoint& point,
                        const HardwareSpec& hardware, const ClusterSpec& cluster,
                        const VariabilitySpec& variability, const EvaluationSpec& evaluation,
                        std::uint64_t seed, std::uint64_t point_index) {
    EvaluationSpec eval = evaluation;
    eval.histogram = false;
    const auto base =
        step_distribution(profile, point, hardware, cluster, variability, eval, seed, point_index);
    return sensitivity(profile, point, hardware, cluster, variability, evaluation, seed,
                       point_index, base);
}

Sensitivity sensitivity(const StepProfile& profile, const DesignPoint& point,
                        const HardwareSpec& hardware, const ClusterSpec& cluster,
                        const VariabilitySpec& variability, const EvaluationSpec& evaluation,
                        std::uint64_t seed, std::uint64_t point_index,
                        const StepDistribution& base) {
    Sensitivity s;
    EvaluationSpec eval = evaluation;
    eval.histogram = false;
    const std::uint32_t used = classes_in(profile);
    for (int c = 0; c < kKernelClassCount; ++c) {
        if (deterministic_spec(variability.transient[c])) continue;
        if (!(used & (1u << c))) continue;
        // only p95 and the variance are needed: no per-realization strata
        const auto d =
            stochastic::step_distribution_masked(profile, point, hardware, cluster, variability,
                                                 eval, seed, point_index, 1u << c, false);
        s.p95_drop_s[c] = base.p95_s - d.p95_s;
        s.variance_drop_s2[c] = base.std_s * base.std_s - d.std_s * d.std_s;
    }
    return s;
}

}  // namespace prism
