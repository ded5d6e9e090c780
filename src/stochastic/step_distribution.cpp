#include "src/stochastic/step_distribution.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "src/common/error.hpp"
#include "src/stochastic/detail/evaluators.hpp"
#include "src/stochastic/detail/hiccup.hpp"
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
         {&p.layer_forward, &p.layer_backward, &p.dense_layer_forward, &p.dense_layer_backward,
          &p.embedding_forward, &p.embedding_backward, &p.head_forward, &p.head_backward,
          &p.dp_sync, &p.optimizer, &p.dataloader}) {
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
    if (hiccup.active() || stalls.active()) return false;
    for (const PeriodicEvent& e : periodic) {
        if (e.duration_s > 0) return false;
    }
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

/// Units of slow_unit_gpus a group spans: the TP x CP group, or a ZeRO-3 stage's whole
/// TP x CP x DP set.
double group_units(const StepProfile& profile, const HardwareSpec& hardware,
                   const VariabilitySpec& spec) {
    const int unit = spec.persistent.slow_per_node ? std::max(1, hardware.gpus_per_node) : 1;
    const int group = std::max(1, profile.tp) * std::max(1, profile.cp) *
                      (profile.dp_lockstep ? std::max(1, profile.dp) : 1);
    return std::ceil(static_cast<double>(group) / unit);
}

/// Whether every unit is slow (slow_probability 1): the analytic evaluator then evaluates the
/// profile with the slowed kernels and no slow units (drop_all_slow), which is exact. Where the
/// slow state is only typical (most groups hold a slow unit) the point goes to Monte Carlo
/// instead (analytic_hands_over): a law with the healthy units as "fast" ones (probability
/// 1 - q) is outside the analytic evaluator's tested domain (a generated case gave a NaN mean).
bool every_unit_slow(const VariabilitySpec& spec) {
    const auto& per = spec.persistent;
    return per.slow_probability >= 1.0 && per.slow_factor > 0 && per.slow_factor != 1.0;
}

/// P(none of `u` units slow) and P(exactly one), each slow with probability q independently.
struct SlowCount {
    double none = 1, one = 0;
};

SlowCount slow_count(double u, double q) {
    return {std::exp(u * std::log1p(-q)), u > 0 ? u * q * std::exp((u - 1) * std::log1p(-q)) : 0.0};
}

/// Whether the analytic law is outside its stated domain for this point, so that the
/// evaluator takes Monte Carlo instead (docs/model.md, "Where the analytic evaluator hands over"):
/// a ZeRO-3 stage runs every layer in lockstep over all its GPUs and the analytic law maps the
/// stage's largest GPU factor through phi_0 (effective_factor.hpp: the op's mean given one
/// slow GPU), exact without slow GPUs, with one, or without transient compute noise; with
/// several slow GPUs in a stage (a slow node's, or two slow units) at probability above 1e-3
/// (the p99.9) and some noise it understates the stage (26 GPUs slow of 512 read as one; a
/// slow node's 8 GPUs as one: p99 1-3% low).
bool lockstep_outside_analytic(const StepProfile& profile, const HardwareSpec& hardware,
                               const VariabilitySpec& spec) {
    const auto& per = spec.persistent;
    const double q = per.slow_probability;
    if (!profile.dp_lockstep || profile.dp <= 1 || !(q > 0) || per.slow_factor == 1.0) {
        return false;
    }
    bool noisy = false;
    for (int c = 0; c < kKernelClassCount; ++c) {
        if (!is_communication(KernelClass(c)) && !deterministic_spec(spec.transient[c])) {
            noisy = true;
        }
    }
    if (!noisy || q >= 1.0) return false;
    const double u = group_units(profile, hardware, spec);
    // K ~ Binomial(u, q) slow units in the stage; a slow node puts all of its GPUs of the
    // stage at the slow factor at once (K = 1 unit is already several slow GPUs)
    const SlowCount k = slow_count(u, q);
    const bool several_gpus = per.slow_per_node && hardware.gpus_per_node > 1;
    return (several_gpus ? 1.0 - k.none : 1.0 - k.none - k.one) > 1e-3;
}

/// With every unit slow (every_unit_slow): `flipped` is the profile with the slowed kernels
/// and `spec` loses its slow units, the same law.
bool drop_all_slow(const StepProfile& profile, VariabilitySpec& spec, StepProfile& flipped) {
    if (!every_unit_slow(spec)) return false;
    flipped = with_slowed_compute(profile, spec.persistent.slow_factor);
    spec.persistent.slow_probability = 0;
    spec.persistent.slow_factor = 1;
    return true;
}

/// The analytic evaluator reads group factors through continuous laws (tabulated log CDFs and
/// their inverses); a constant spatial factor with slow units makes the group factor a pair of
/// atoms, which those tables lose (1% slow nodes and nothing else read as no slow node at all).
/// There it takes the spatial factor as normal with cv 1e-6: the step moves by a few 1e-6
/// relative (the max of 10^5 such factors is 1 + 4.5e-6), far below the evaluators' budget.
void regularize_atoms(VariabilitySpec& spec) {
    auto& per = spec.persistent;
    if (!deterministic_spec(per.spatial) || !(per.slow_probability > 0) || per.slow_factor == 1.0) {
        return;
    }
    const double mean = stochastic::Distribution(per.spatial).mean();
    per.spatial = DistributionSpec{};
    per.spatial.kind = DistKind::normal;
    per.spatial.mean = mean;
    per.spatial.cv = 1e-6;
}

/// The moments a run model is fed: finite, a positive mean, a non-negative variance; anything
/// else is a located error (the point), never a silent row.
StepDistribution checked(StepDistribution d, const DesignPoint& point) {
    auto bad = [](double x) { return !std::isfinite(x); };
    std::string what;
    if (bad(d.mean_s) || !(d.mean_s > 0)) what = fmt::format("mean {} s", d.mean_s);
    if (bad(d.std_s) || d.std_s < 0) what = fmt::format("std {} s", d.std_s);
    for (double q : {d.p50_s, d.p90_s, d.p95_s, d.p99_s, d.p999_s}) {
        if (bad(q) || !(q > 0)) what = fmt::format("quantile {} s", q);
    }
    for (size_t k = 0; k < d.cluster_mean_s.size(); ++k) {
        const double v = k < d.cluster_var_s2.size() ? d.cluster_var_s2[k] : 0.0;
        if (bad(d.cluster_mean_s[k]) || !(d.cluster_mean_s[k] > 0) || bad(v) || v < 0) {
            what = fmt::format("cluster realization {}: mean {} s, variance {} s^2", k,
                               d.cluster_mean_s[k], v);
        }
    }
    if (!what.empty()) {
        throw ModelError(fmt::format(
            "step-time distribution of point (tp {}, pp {}, dp {}, cp {}) is invalid: {}", point.tp,
            point.pp, point.dp, point.cp, what));
    }
    return d;
}

/// The slow-able units (nodes, or GPUs with slow_scope "gpu") that one replica's GPUs occupy
/// under ordered placement (random placement draws whole nodes: the same count): how many, and
/// how many of them hold GPUs of a single stage. The replica's GPUs are blocks of the
/// dimensions inside dp (placement order), one block per coordinate of those outside it (a
/// unit shared by two blocks is counted in each); more than 65,536 blocks: every unit single-
/// stage, pp x ceil(tp cp / unit) of them. A lockstep (ZeRO-3) step's replica is the whole job.
struct ReplicaUnits {
    double all = 0, single_stage = 0;
};

ReplicaUnits replica_units(const DesignPoint& point, const HardwareSpec& hardware,
                           const VariabilitySpec& spec, bool whole_job) {
    const long long unit = spec.persistent.slow_per_node ? std::max(1, hardware.gpus_per_node) : 1;
    const std::array<int, 4> size{std::max(1, point.tp), std::max(1, point.cp),
                                  std::max(1, point.pp), std::max(1, point.dp)};
    long long block = 1, stride = 1, pp_stride = 0;  // pp_stride 0: pp outside the block
    bool outside = false;
    std::vector<long long> starts{0};
    for (const ParallelDim d : point.placement.order) {
        const int n = size[static_cast<std::size_t>(d)];
        if (d == ParallelDim::dp && !whole_job) {
            outside = true;  // the replica holds dp coordinate 0
        } else if (!outside) {
            if (d == ParallelDim::pp) pp_stride = block;
            block *= n;
        } else {
            if (starts.size() * static_cast<std::size_t>(n) > 65536) {
                const double u = size[2] * std::ceil(static_cast<double>(size[0]) * size[1] *
                                                     (whole_job ? size[3] : 1) / unit);
                return {u, u};
            }
            const std::size_t k = starts.size();
            for (int i = 1; i < n; ++i) {
                for (std::size_t j = 0; j < k; ++j) starts.push_back(starts[j] + i * stride);
            }
        }
        stride *= n;
    }
    ReplicaUnits out;
    for (const long long s : starts) {
        for (long long u = s / unit; u <= (s + block - 1) / unit; ++u) {
            // the block's offsets in unit u, and whether they span two stages
            const long long lo = std::max(s, u * unit) - s,
                            hi = std::min(s + block, (u + 1) * unit) - s;
            const bool one = pp_stride == 0 || lo / pp_stride == (hi - 1) / pp_stride;
            out.all += 1;
            out.single_stage += one ? 1 : 0;
        }
    }
    return out;
}

/// One microbatch's pass through the largest model chunk: the compute a slow GPU stretches
/// (each segment's longest compute op), forward and backward.
double largest_chunk_compute_s(const StepProfile& profile) {
    const auto compute = [](const SegmentList& list) {
        double t = 0;
        for (const auto& seg : list) {
            double longest = 0;
            for (const auto& op : seg.ops) {
                if (!is_communication(op.cls)) longest = std::max(longest, op.time_s);
            }
            t += longest;
        }
        return t;
    };
    const double layer =
        std::max(compute(profile.layer_forward) + compute(profile.layer_backward),
                 compute(profile.dense_layer_forward) + compute(profile.dense_layer_backward));
    int layers = 0;
    for (int s = 0; s < std::max(1, profile.stages); ++s) {
        for (int c = 0; c < std::max(1, profile.chunks); ++c) {
            layers = std::max(layers, profile.chunk_layers(s, c));
        }
    }
    return layers * layer;
}

/// Whether slowed compute on two or more stages of one replica is likely enough, and large
/// enough, to be outside the analytic law. Its slow units enter through their generating
/// function and its replica types, which combine stage terms as a max; where a pipeline has
/// few microbatches for its stages the passes are in series and two slowed stages add (one
/// slow unit holding GPUs of two stages, or two slow units): the max then reads whole modes of
/// the step low (invariant soak: 2 stages, 1 microbatch, 6% slow GPUs at 2.5x, p95 24% low;
/// tp 2 x pp 4 on one slow node at 3x, 42% low). With e the step share of one chunk's pass
/// slowed by the slow factor (what a second slowed stage adds: its fill-or-drain pass) and P
/// the probability that some replica has slowed compute on two or more stages, handed over
/// where P > 1e-3 (the p99.9) and e > 10%, or P > 5% (the p95) and e > 3%. Measured on a scan
/// of tp 4 / 8, pp 1-4, dp 4 / 32, 16 microbatches, 2-10% slow GPUs at 1.5 / 2.46x: the
/// analytic law is off in its CDF by several times 1 - p at p95-p99.9 only where the second
/// holds (tp 8 x pp 4, 5% slow GPUs at 2.46x: P(2 of 4 stages slow) 0.37, e 7.7%); the
/// accuracy tests' pipelines (1.14-1.5x slow nodes, 4-16 microbatches, quantiles within 0.3%),
/// the quickstart's points and the 405B point (PRISM-paper's 1%, 1.14x: e 0.45%) stay
/// analytic. A ZeRO-3 (lockstep) step is one replica of all its GPUs. Variability-aware
/// placement is counted as ordered (its scenarios pack the slow units it must use into groups
/// by preference, so the count is an upper bound there: spare nodes it leaves slow units on
/// only make Monte Carlo's share larger than needed).
bool stages_add_outside_analytic(const StepProfile& profile, const DesignPoint& point,
                                 const HardwareSpec& hardware, const VariabilitySpec& spec) {
    const auto& per = spec.persistent;
    const double q = per.slow_probability;
    if (profile.stages < 2 || !(q > 0) || q >= 1 || per.slow_factor == 1.0) return false;
    const double step = deterministic_step_time(profile);
    if (!(step > 0)) return false;
    const double e = std::fabs(per.slow_factor - 1.0) * largest_chunk_compute_s(profile) / step;
    if (!(e > 0.03)) return false;
    const bool lockstep = profile.dp_lockstep;
    const ReplicaUnits u = replica_units(point, hardware, spec, lockstep);
    // P(no unit slow) + P(one unit slow, holding a single stage)
    const SlowCount k = slow_count(u.all, q);
    const double single = u.all > 0 ? k.one * u.single_stage / u.all : 0.0;
    const double several = std::clamp(1.0 - k.none - single, 0.0, 1.0 - 1e-16);
    const double any = -std::expm1((lockstep ? 1 : std::max(1, point.dp)) * std::log1p(-several));
    return (any > 1e-3 && e > 0.1) || (any > 0.05 && e > 0.03);
}

}  // namespace

bool analytic_hands_over(const StepProfile& profile, const DesignPoint& point,
                         const HardwareSpec& hardware, const VariabilitySpec& variability) {
    if (every_unit_slow(variability)) return false;
    // the analytic law is linearized at a group without slow members: where most groups hold
    // one (but not all of their units slow) it reads them far from where it is exact; on a
    // pipeline from 30% of them (a scan of tp 4 / 8 x pp 2-4 with 2-10% slow GPUs: the
    // analytic CDF off by several times 1 - p from 25-35%; without pipeline stages within
    // 0.5 of 1 - p up to 44%; invariant soak case 100363, an interleaved pp 4 with 39% of its
    // groups slow: p99 11% high)
    const auto& per = variability.persistent;
    const double q = per.slow_probability;
    const double healthy_below = profile.stages > 1 ? 0.7 : 0.5;
    if (q > 0 && q < 1 && per.slow_factor != 1.0 &&
        group_units(profile, hardware, variability) * std::log1p(-q) < std::log(healthy_below)) {
        return true;
    }
    return lockstep_outside_analytic(profile, hardware, variability) ||
           stages_add_outside_analytic(profile, point, hardware, variability);
}

StepProfile with_slowed_compute(const StepProfile& profile, double k) {
    StepProfile p = profile;
    auto scale = [k](SegmentList& segs) {
        for (auto& seg : segs) {
            for (auto& op : seg.ops) {
                if (!is_communication(op.cls)) op.time_s *= k;
            }
        }
    };
    for (auto* s :
         {&p.layer_forward, &p.layer_backward, &p.dense_layer_forward, &p.dense_layer_backward,
          &p.embedding_forward, &p.embedding_backward, &p.head_forward, &p.head_backward}) {
        scale(*s);
    }
    return p;
}

namespace {

/// The step the stalls accrue over: the deterministic one; when every unit is slow the slowed
/// one (every unit slow is the hardware slower, DESIGN.md's invariants).
double stall_step_s(const VariabilitySpec& spec, const StepProfile& profile) {
    return every_unit_slow(spec)
               ? deterministic_step_time(with_slowed_compute(profile, spec.persistent.slow_factor))
               : deterministic_step_time(profile);
}

/// H + E + W of `spec` (hiccups, periodic events and stalls: hiccup.hpp), which add to the step
/// the rest of the model gives; the three are taken out of `spec`. The stalls' law rests on the
/// deterministic step (their count per step scales with it).
detail::HiccupLaw hiccup_law(VariabilitySpec& spec, const StepProfile& profile,
                             const DesignPoint& point, const HardwareSpec& hardware) {
    detail::HiccupLaw law(spec.hiccup, detail::job_nodes(point, hardware), spec.periodic);
    if (spec.stalls.active()) {
        std::vector<double> value, weight;
        detail::stall_law(spec.stalls, detail::stall_shape(profile, point, hardware),
                          stall_step_s(spec, profile), value, weight);
        law.add_independent(value, weight);
    }
    spec.hiccup = HiccupSpec{};
    spec.periodic.clear();
    spec.stalls = StallSpec{};
    return law;
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
    // hiccups, periodic events and stalls add to the step the rest of the model gives (hiccup.hpp)
    const detail::HiccupLaw hiccup = hiccup_law(spec, profile, point, hardware);
    // routed MoE ops are random without any [variability] noise (the routing law)
    // and document-masked attention by the documents' law
    const bool routing =
        (profile.routing.active() && !(deterministic_classes & detail::kRoutingClassBit)) ||
        (profile.documents.active() && !(deterministic_classes & detail::kDocumentsClassBit));
    if (spec.is_deterministic() && !routing) {
        const double t = deterministic_step_time(profile);
        if (!hiccup.active()) return point_mass(t, evaluation);
        return checked(detail::point_with_hiccups(t, t, hiccup, evaluation, seed, point_index),
                       point);
    }
    // Outside the analytic law's domain the point is Monte Carlo's (analytic_hands_over); with
    // every unit slow the analytic evaluator takes the profile with the slowed kernels, so that
    // it equals the hardware k times slower exactly (DESIGN.md's invariants).
    EvaluationSpec eval_used = evaluation;
    if (evaluation.method == Method::analytic &&
        analytic_hands_over(profile, point, hardware, spec)) {
        eval_used.method = Method::montecarlo;
    }
    const EvaluationSpec& evaluation_ = eval_used;
    StepProfile flipped_profile;
    const bool flipped =
        evaluation_.method == Method::analytic && drop_all_slow(profile, spec, flipped_profile);
    if (flipped && spec.is_deterministic() && !routing) {
        const double t = deterministic_step_time(flipped_profile);
        StepDistribution out =
            hiccup.active() ? detail::point_with_hiccups(t, deterministic_step_time(profile),
                                                         hiccup, evaluation_, seed, point_index)
                            : point_mass(t, evaluation_);
        out.deterministic_s = deterministic_step_time(profile);
        return checked(out, point);
    }
    if (evaluation_.method == Method::analytic) regularize_atoms(spec);
    auto model = detail::build_step_model(flipped ? flipped_profile : profile, point, hardware,
                                          cluster, spec, deterministic_classes);
    if (flipped) model.deterministic_s = deterministic_step_time(profile);
    const auto layout_ptr = layout_for(model, point, hardware, cluster);
    const detail::PersistentLayout& layout = *layout_ptr;
    const int clusters =
        model.persistent_deterministic || !cluster_strata ? 1 : kClusterRealizations;
    StepDistribution out;
    out.deterministic_s = model.deterministic_s;
    out.monte_carlo_fallback = evaluation.method != evaluation_.method;
    if (evaluation_.method == Method::montecarlo) {
        if (evaluation_.samples < 1) {
            throw ConfigError(
                fmt::format("evaluation.samples must be >= 1, got {}", evaluation_.samples));
        }
        auto x = detail::monte_carlo(model, layout, evaluation_.samples, seed, point_index);
        detail::add_hiccups(x, hiccup, seed, point_index);
        detail::summarize_samples(std::move(x), evaluation_, model.deterministic_s, out);
        if (clusters == 1) {
            out.cluster_mean_s = {out.mean_s};
            out.cluster_var_s2 = {out.std_s * out.std_s};
        } else {
            // a quarter of the sample budget again, spread over the realizations
            const int per = std::clamp(evaluation_.samples / (4 * clusters), 2, 64);
            detail::monte_carlo_clusters(model, layout, clusters, per, seed, point_index,
                                         out.cluster_mean_s, out.cluster_var_s2);
            // a hiccup is transient: the same law on every realization, independent of it
            for (int k = 0; k < clusters; ++k) {
                out.cluster_mean_s[k] += hiccup.mean();
                out.cluster_var_s2[k] += hiccup.var();
            }
        }
    } else {
        detail::analytic(model, layout, evaluation_, clusters, out, nullptr, nullptr,
                         evaluation_.grid_points, &hiccup);
    }
    return checked(std::move(out), point);
}

std::vector<double> monte_carlo_samples(const StepProfile& profile, const DesignPoint& point,
                                        const HardwareSpec& hardware, const ClusterSpec& cluster,
                                        const VariabilitySpec& variability, int samples,
                                        std::uint64_t seed, std::uint64_t point_index) {
    VariabilitySpec spec = variability;
    const detail::HiccupLaw hiccup = hiccup_law(spec, profile, point, hardware);
    const auto model = detail::build_step_model(profile, point, hardware, cluster, spec, 0);
    const auto layout = detail::make_layout(model, point, hardware, cluster);
    std::vector<double> x = detail::monte_carlo(model, layout, samples, seed, point_index);
    detail::add_hiccups(x, hiccup, seed, point_index);
    return x;
}

std::vector<double> analytic_cdf(const StepProfile& profile, const DesignPoint& point,
                                 const HardwareSpec& hardware, const ClusterSpec& cluster,
                                 const VariabilitySpec& variability, const std::vector<double>& t_s,
                                 int grid_points) {
    VariabilitySpec spec = variability;
    const detail::HiccupLaw hiccup = hiccup_law(spec, profile, point, hardware);
    StepProfile flipped;
    const bool flip = drop_all_slow(profile, spec, flipped);
    if ((flip || hiccup.active()) && spec.is_deterministic() && !profile.routing.active() &&
        !profile.documents.active()) {
        const double t = deterministic_step_time(flip ? flipped : profile);
        std::vector<double> cdf;
        for (double x : t_s) cdf.push_back(hiccup.cdf(x - t));
        return cdf;
    }
    regularize_atoms(spec);
    const auto model =
        detail::build_step_model(flip ? flipped : profile, point, hardware, cluster, spec);
    const auto layout = detail::make_layout(model, point, hardware, cluster);
    const int clusters = model.persistent_deterministic ? 1 : kClusterRealizations;
    StepDistribution out;
    std::vector<double> cdf;
    detail::analytic(model, layout, EvaluationSpec{}, clusters, out, &t_s, &cdf,
                     grid_points > 0 ? grid_points : detail::kAnalyticGridPoints, &hiccup);
    return cdf;
}

StallSummary stall_summary(const StepProfile& profile, const DesignPoint& point,
                           const HardwareSpec& hardware, const VariabilitySpec& variability) {
    StallSummary out;
    if (!variability.stalls.active()) return out;
    const detail::StallShape shape = detail::stall_shape(profile, point, hardware);
    out.syncs = shape.syncs;
    out.members = shape.members;
    out.nodes_per_member = shape.nodes_per_member;
    out.step_s = stall_step_s(variability, profile);
    std::vector<double> value, weight;
    detail::stall_law(variability.stalls, shape, out.step_s, value, weight);
    double m = 0, m2 = 0, none = 0;
    for (std::size_t i = 0; i < value.size(); ++i) {
        m += weight[i] * value[i];
        m2 += weight[i] * value[i] * value[i];
        if (value[i] <= 0) none += weight[i];
    }
    out.mean_s = m;
    out.sd_s = std::sqrt(std::max(0.0, m2 - m * m));
    out.p_none = none;
    return out;
}

HiccupSummary hiccup_summary(const DesignPoint& point, const HardwareSpec& hardware,
                             const VariabilitySpec& variability) {
    HiccupSummary out;
    out.nodes = detail::job_nodes(point, hardware);
    if (variability.hiccup.probability > 0) {
        const detail::HiccupLaw h(variability.hiccup, out.nodes);
        out.p_hit = 1 - h.p0();
        out.hiccup_mean_s = h.mean();
    }
    if (!variability.periodic.empty()) {
        const detail::HiccupLaw e(HiccupSpec{}, out.nodes, variability.periodic);
        out.periodic_mean_s = e.mean();
    }
    return out;
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
    // the drops in p95 and variance with the classes of `bits` made deterministic (only p95 and
    // the variance are needed: no per-realization strata)
    auto drops = [&](std::uint32_t bits, double& p95_drop, double& variance_drop) {
        const auto d = stochastic::step_distribution_masked(
            profile, point, hardware, cluster, variability, eval, seed, point_index, bits, false);
        p95_drop = base.p95_s - d.p95_s;
        variance_drop = base.std_s * base.std_s - d.std_s * d.std_s;
    };
    const std::uint32_t used = classes_in(profile);
    for (int c = 0; c < kKernelClassCount; ++c) {
        if (deterministic_spec(variability.transient[c])) continue;
        if (!(used & (1u << c))) continue;
        drops(1u << c, s.p95_drop_s[c], s.variance_drop_s2[c]);
    }
    if (profile.routing.active()) {
        drops(stochastic::detail::kRoutingClassBit, s.routing_p95_drop_s,
              s.routing_variance_drop_s2);
    }
    if (profile.documents.active()) {
        drops(stochastic::detail::kDocumentsClassBit, s.documents_p95_drop_s,
              s.documents_variance_drop_s2);
    }
    return s;
}

}  // namespace prism
