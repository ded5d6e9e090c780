#include "src/stochastic/detail/step_model.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <utility>

#include "src/common/error.hpp"
#include "src/stochastic/detail/hash.hpp"

namespace prism::stochastic::detail {

namespace {

std::uint64_t spec_hash(const DistributionSpec& s) {
    std::uint64_t h = static_cast<std::uint64_t>(s.kind) + 1;
    h = hash_mix(h, hash_bits(s.mean));
    h = hash_mix(h, hash_bits(s.cv));
    h = hash_mix(h, s.samples.size());
    for (double x : s.samples) h = hash_mix(h, hash_bits(x));
    for (const auto& c : s.components) {
        h = hash_mix(h, hash_bits(c.weight));
        h = hash_mix(h, spec_hash(c.dist));
    }
    return h;
}

/// An id per distinct spec, unique in this thread: the per-thread caches keyed by it (max
/// moments, law tables, healthy quantiles, regime cells) are exact where a 64-bit hash alone
/// could collide. Ids are never reused; past 4,096 distinct specs the table starts over (a spec
/// seen again then gets a new id: a cache miss, never a wrong hit).
std::uint64_t spec_id(const DistributionSpec& s) {
    struct Entry {
        DistributionSpec spec;
        std::uint64_t id;
    };
    thread_local std::unordered_multimap<std::uint64_t, Entry> table;  // by hash
    thread_local std::uint64_t next = 1;
    const std::uint64_t h = spec_hash(s);
    const auto [first, last] = table.equal_range(h);
    for (auto it = first; it != last; ++it) {
        if (it->second.spec == s) return it->second.id;
    }
    if (table.size() >= 4096) table.clear();
    table.emplace(h, Entry{s, next});
    return next++;
}

/// Moments of the max of n iid draws of `spec`, memoized per thread: sweeps evaluate many
/// points with the same variability and a handful of group sizes.
Moments cached_max_moments(std::uint64_t spec, const Distribution& dist, double n) {
    struct Key {
        std::uint64_t h;
        double n;
        bool operator==(const Key& o) const { return h == o.h && n == o.n; }
    };
    struct KeyHash {
        size_t operator()(const Key& k) const { return hash_mix(k.h, hash_bits(k.n)); }
    };
    thread_local std::unordered_map<Key, Moments, KeyHash> cache;
    const Key key{spec, n};
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    if (cache.size() > 4096) cache.clear();
    const Moments m = dist.max_moments(n);
    cache.emplace(key, m);
    return m;
}

struct Accumulator {
    ChunkCost cost;
    SingleTerm single;
};

}  // namespace

double level_amplitude(const RegimeLevels& levels, const std::array<double, 5>& seconds) {
    const double mult[5] = {levels.nvlink, levels.nvlink, levels.nic, levels.rack, levels.pod};
    double total = 0, weighted = 0;
    for (std::size_t l = 0; l < seconds.size(); ++l) {
        total += seconds[l];
        weighted += seconds[l] * mult[l];
    }
    return total > 0 ? weighted / total : 1.0;
}

DistributionSpec job_regime(const DistributionSpec& regime, const RegimeLevels& levels,
                            const std::array<double, 5>& seconds) {
    if (!levels.active() || regime.kind == DistKind::constant) return regime;
    if (regime.kind != DistKind::normal && regime.kind != DistKind::lognormal &&
        regime.kind != DistKind::gamma) {
        throw ConfigError(
            "variability.regime_levels needs a normal, lognormal or gamma comm_regime (its cv is "
            "scaled per link level)");
    }
    DistributionSpec out = regime;
    out.cv = regime.cv * level_amplitude(levels, seconds);
    if (!(out.cv > 0)) {
        out.kind = DistKind::constant;
        out.cv = 0;
    }
    return out;
}

namespace {

/// Phi and phi at the nodes -kClarkCertain + i / kNormalTableDensity (exact, from libm)
struct NormalNodes {
    std::vector<double> cdf, pdf;
    NormalNodes() {
        const int n = static_cast<int>(2 * kClarkCertain * kNormalTableDensity);
        cdf.resize(n + 1);
        pdf.resize(n + 1);
        for (int i = 0; i <= n; ++i) {
            const double x = -kClarkCertain + static_cast<double>(i) / kNormalTableDensity;
            cdf[i] = normal_cdf(x);
            pdf[i] = normal_pdf(x);
        }
    }
};

/// built before main (no guard on the hot path); nothing runs clark_max at static initialization
const NormalNodes kNormalNodes;

}  // namespace

NormalPair normal_pair(double x) {
    const auto& t = kNormalNodes;
    const double u = (x + kClarkCertain) * kNormalTableDensity;
    if (!(u >= 0) || u >= static_cast<double>(t.cdf.size() - 1)) {
        return {normal_cdf(x), normal_pdf(x)};
    }
    const auto i = static_cast<size_t>(u);
    const double f = u - static_cast<double>(i);
    const double h = 1.0 / kNormalTableDensity;
    const double x0 = -kClarkCertain + static_cast<double>(i) * h, x1 = x0 + h;
    // cubic Hermite basis on [x0, x1] with the exact derivatives Phi' = phi, phi' = -x phi
    const double f2 = f * f, f3 = f2 * f;
    const double h00 = 2 * f3 - 3 * f2 + 1, h10 = f3 - 2 * f2 + f;
    const double h01 = -2 * f3 + 3 * f2, h11 = f3 - f2;
    const double p0 = t.pdf[i], p1 = t.pdf[i + 1];
    return {h00 * t.cdf[i] + h10 * h * p0 + h01 * t.cdf[i + 1] + h11 * h * p1,
            h00 * p0 - h10 * h * x0 * p0 + h01 * p1 - h11 * h * x1 * p1};
}

Moments clark_max(Moments a, Moments b) {
    const double s2 = a.var + b.var;
    if (s2 <= 0) return a.mean >= b.mean ? a : b;
    const double s = std::sqrt(s2);
    const double d = a.mean - b.mean;
    const double alpha = d / s;
    // |alpha| >= 9: the other side wins with probability Phi(-9) = 1.1e-19 and shifts the
    // moments by less than that many of their units (s phi(9) = 1e-18 s < 1e-19 of the mean):
    // the winner's moments, exactly in double precision
    if (alpha >= kClarkCertain) return a;
    if (alpha <= -kClarkCertain) return b;
    const auto [pa, phi] = normal_pair(alpha);
    const double pb = 1.0 - pa;
    // mean b + d Phi + s phi; the variance written without the means' squares (E[M^2] - m^2
    // cancels them): va Phi + vb (1 - Phi) + d^2 Phi (1 - Phi) + d s phi (1 - 2 Phi) - s^2 phi^2
    const double m = b.mean + d * pa + s * phi;
    const double v =
        a.var * pa + b.var * pb + d * d * pa * pb + d * s * phi * (pb - pa) - s2 * phi * phi;
    return {m, std::max(0.0, v)};
}

Moments ChunkCost::mixed_moments(const MixedSegment& s, double g, double r) {
    return clark_max({g * s.comp_mean, g * g * s.comp_var}, {r * s.comm_mean, r * r * s.comm_var});
}

Moments ChunkCost::moments(double g, double r) const {
    Moments out{g * comp_mean + r * comm_mean, g * g * comp_var + r * r * comm_var};
    for (const auto& s : mixed) {
        const Moments x = mixed_moments(s, g, r);
        out.mean += s.repeat * x.mean;
        out.var += s.repeat * x.var;
    }
    return out;
}

namespace {

/// Accumulates segments of ops into a chunk cost (step_model.hpp): per segment, Clark's max of
/// its concurrent ops (each a max over its sync group's transient factors, F^n), added to the
/// compute or communication part by the op with the largest mean. With `collect` set, the
/// compute classes' shares of a layer (the effective factor's weights) are tallied too.
class SegmentCosts {
  public:
    SegmentCosts(const StepModel& m, const std::array<std::uint64_t, kKernelClassCount>& ids)
        : m_(m), ids_(ids), lock_mult_(m.lockstep ? m.dp : 1) {}

    void add(Accumulator& acc, const SegmentList& segs, int repeat) {
        if (repeat <= 0) return;
        for (const auto& seg : segs) add_segment(acc, seg, repeat);
    }

    bool collect = false;
    /// each compute class's share of a layer's compute; ops synchronized over fewer GPUs than
    /// the group (none in the built profiles) keep g = max G
    std::array<double, kKernelClassCount> class_weight{};
    double unsynced_weight = 0;

  private:
    void add_segment(Accumulator& acc, const Segment& seg, int repeat) {
        // each kind's ops combined by Clark's max (in the ops' order), then the kinds: one kind
        // adds to its linear part, both make a mixed segment max(g A, R B)
        Moments side[2] = {{0, 0}, {0, 0}};  // compute, communication
        bool have[2] = {false, false};
        int random_ops = 0;
        SingleTerm term;
        for (const auto& op : seg.ops) {
            const int c = static_cast<int>(op.cls);
            const bool comm = is_communication(op.cls);
            const double n = comm ? 1.0 : std::max(1, op.sync_size) * lock_mult_;
            const Moments y = cached_max_moments(ids_[c], m_.transient[c], n);
            Moments d{op.time_s * y.mean, op.time_s * op.time_s * y.var};
            if (op.routed && m_.routing_active) {
                d = routed_moments(op.time_s, y);
                acc.cost.routed_mean += repeat * d.mean;
            }
            if (op.documents) acc.cost.documents_s += repeat * op.time_s * y.mean;
            if (collect && !comm) {
                (std::max(1, op.sync_size) == m_.group_gpus ? class_weight[c] : unsynced_weight) +=
                    repeat * d.mean;
            }
            if (d.var > 0) {
                ++random_ops;
                term = {true, comm, op.time_s, n, c};
            }
            const int k = comm ? 1 : 0;
            side[k] = have[k] ? clark_max(side[k], d) : d;
            have[k] = true;
        }
        if (!have[0] && !have[1]) return;
        auto& cost = acc.cost;
        if (have[0] && have[1] && side[0].mean > 0 && side[1].mean > 0) {
            add_mixed(cost, {side[0].mean, side[0].var, side[1].mean, side[1].var, repeat});
        } else if (have[1] && !(have[0] && side[0].mean > side[1].mean)) {
            cost.comm_mean += repeat * side[1].mean;
            cost.comm_var += repeat * side[1].var;
        } else {
            cost.comp_mean += repeat * side[0].mean;
            cost.comp_var += repeat * side[0].var;
        }
        const int terms = random_ops > 0 ? repeat : 0;
        cost.random_terms += terms;
        if (random_ops == 1 && seg.ops.size() == 1) acc.single = term;
    }

    /// A routed op's duration b / base * Z * Y (Z the routing's load factor, independent of
    /// the transient Y): E = b z1 E[Y] (z = the moments over base), Var = b^2 z1^2 Var(Y) +
    /// b^2 Var(z) E[Y^2], the routing's part taken as b T Var(z) E[Y^2] instead: the layer's
    /// routed ops share one Z per microbatch (step_model.hpp routing_layer_s).
    Moments routed_moments(double b, const Moments& y) const {
        const double base = m_.routing_base > 0 ? m_.routing_base : 1.0;
        const double z1 = m_.routing.mean / base;
        const double z2 = m_.routing.second / (base * base);
        const double vz = std::max(0.0, z2 - z1 * z1);
        const double t = m_.routing_layer_s > b ? m_.routing_layer_s : b;
        const double mean = b * z1 * y.mean;
        return {mean, b * b * z1 * z1 * y.var + b * t * vz * (y.var + y.mean * y.mean)};
    }

    /// Adds `s` to the cost's mixed segments, merged with an equal one (the layers of a chunk).
    static void add_mixed(ChunkCost& cost, const MixedSegment& s) {
        for (auto& e : cost.mixed) {
            if (e.comp_mean == s.comp_mean && e.comp_var == s.comp_var &&
                e.comm_mean == s.comm_mean && e.comm_var == s.comm_var) {
                e.repeat += s.repeat;
                return;
            }
        }
        cost.mixed.push_back(s);
    }

    const StepModel& m_;
    const std::array<std::uint64_t, kKernelClassCount>& ids_;
    double lock_mult_;
};

/// The variability of the model: the transient, regime and spatial laws (classes in
/// `deterministic_classes` made deterministic), their ids, and the slow units.
void set_variability(StepModel& m, const StepProfile& profile, const DesignPoint& point,
                     const HardwareSpec& hw, const VariabilitySpec& variability,
                     std::uint32_t deterministic_classes,
                     std::array<std::uint64_t, kKernelClassCount>& ids) {
    std::array<DistributionSpec, kKernelClassCount> specs = variability.transient;
    for (int c = 0; c < kKernelClassCount; ++c) {
        if (deterministic_classes & (1u << c)) specs[c] = DistributionSpec{};
        m.transient[c] = Distribution(specs[c]);
        ids[c] = spec_id(specs[c]);
    }
    // the job's regime: the link levels' amplitudes weighted by the step's collective time on
    // each (both evaluators draw or integrate m.regime; unchanged when the levels are all 1)
    const DistributionSpec regime =
        variability.regime_levels.active()
            ? job_regime(variability.comm_regime, variability.regime_levels,
                         collective_seconds_by_level(profile))
            : variability.comm_regime;
    m.regime = Distribution(regime);
    m.spatial = Distribution(variability.persistent.spatial);
    m.spatial_id = spec_id(variability.persistent.spatial);
    m.regime_id = spec_id(regime);
    m.placement_key = {point.tp, point.cp, static_cast<std::int64_t>(point.placement.kind)};
    for (const ParallelDim d : point.placement.order) {
        m.placement_key.push_back(static_cast<std::int64_t>(d));
    }
    m.slow_probability = std::clamp(variability.persistent.slow_probability, 0.0, 1.0);
    m.slow_factor = variability.persistent.slow_factor;
    if (m.slow_probability > 0 && !(m.slow_factor > 0)) {
        throw ConfigError(
            "variability.persistent.slow_factor must be > 0 when slow_probability > 0");
    }
    m.slow_unit_gpus = variability.persistent.slow_per_node ? std::max(1, hw.gpus_per_node) : 1;
    m.persistent_deterministic =
        m.spatial.is_constant() && (m.slow_probability == 0 || m.slow_factor == 1.0);
}

/// The chunk costs fwd / bwd of every (stage, chunk), and the effective factor from the layers'
/// class shares. Chunks without the embedding or the head are all the same: accumulated once.
void set_chunk_costs(StepModel& m, const StepProfile& profile, SegmentCosts& costs,
                     const std::array<std::uint64_t, kKernelClassCount>& ids,
                     std::vector<SingleTerm>& fwd_single, std::vector<SingleTerm>& bwd_single) {
    const int p = m.stages;
    const int v = m.chunks;
    m.fwd.resize(static_cast<size_t>(p) * v);
    m.bwd.resize(m.fwd.size());
    fwd_single.assign(m.fwd.size(), {});
    bwd_single.assign(m.fwd.size(), {});
    Accumulator layers_f, layers_b;
    costs.collect = true;
    costs.add(layers_f, profile.layer_forward, profile.layers_per_chunk);
    costs.add(layers_b, profile.layer_backward, profile.layers_per_chunk);
    costs.collect = false;
    // lockstep: phi of the stage's tp x cp x dp GPUs, on the max over all of them
    const int eff_n = m.group_gpus * (m.lockstep ? m.dp : 1);
    if (!m.persistent_deterministic && eff_n > 1 && costs.unsynced_weight <= 0) {
        std::vector<EffectiveFactor::Component> comps;
        for (int c = 0; c < kKernelClassCount; ++c) {
            if (costs.class_weight[c] > 0) {
                comps.push_back({m.transient[c], ids[c], costs.class_weight[c]});
            }
        }
        m.effective = EffectiveFactor::cached(m.spatial, m.spatial_id, m.slow_factor, eff_n,
                                              std::move(comps));
    }
    for (int s = 0; s < p; ++s) {
        for (int c = 0; c < v; ++c) {
            const bool first = s == 0 && c == 0;
            const bool last = s == p - 1 && c == v - 1;
            const int dense = profile.chunk_dense_layers(s, c);     // an MoE model's dense layers
            const int layers = profile.chunk_layers(s, c) - dense;  // differs on an uneven split
            if (!first && !last && dense == 0 && layers == profile.layers_per_chunk) {
                m.fwd[s * v + c] = layers_f.cost;
                m.bwd[s * v + c] = layers_b.cost;
                fwd_single[s * v + c] = layers_f.single;
                bwd_single[s * v + c] = layers_b.single;
                continue;
            }
            Accumulator f, b;
            if (first) costs.add(f, profile.embedding_forward, 1);
            costs.add(f, profile.layer_forward, layers);
            if (dense > 0) costs.add(f, profile.dense_layer_forward, dense);
            if (last) costs.add(f, profile.head_forward, 1);
            if (last) costs.add(b, profile.head_backward, 1);
            costs.add(b, profile.layer_backward, layers);
            if (dense > 0) costs.add(b, profile.dense_layer_backward, dense);
            if (first) costs.add(b, profile.embedding_backward, 1);
            m.fwd[s * v + c] = f.cost;
            m.bwd[s * v + c] = b.cost;
            fwd_single[s * v + c] = f.single;
            bwd_single[s * v + c] = b.single;
        }
    }
}

/// The costs outside the chunks (p2p, dataloader, DP sync, optimizer), and the replica's single
/// random term when it has only one.
void set_step_costs(StepModel& m, const StepProfile& profile, SegmentCosts& costs,
                    const std::vector<SingleTerm>& fwd_single,
                    const std::vector<SingleTerm>& bwd_single) {
    Accumulator a;
    costs.add(a, SegmentList{Segment{{profile.p2p}}}, 1);
    m.p2p = a.cost;
    Accumulator dl;
    costs.add(dl, profile.dataloader, 1);
    m.dataloader = dl.cost;
    Accumulator sy;
    costs.add(sy, profile.dp_sync, 1);
    m.sync = sy.cost;
    Accumulator op;
    costs.add(op, profile.optimizer, 1);
    m.optimizer = op.cost;
    m.sync_overlap_s = profile.dp_overlap_s;
    // Dataloader and optimizer have no persistent factor: fold compute into the g=1 slot by
    // convention (the evaluators call them with g = 1).

    int terms = m.dataloader.random_terms;
    SingleTerm single = dl.single;
    const int mb = m.microbatches;
    for (size_t i = 0; i < m.fwd.size(); ++i) {
        terms += mb * (m.fwd[i].random_terms + m.bwd[i].random_terms);
        if (m.fwd[i].random_terms) single = fwd_single[i];
        if (m.bwd[i].random_terms) single = bwd_single[i];
    }
    const int p = m.stages;
    const int v = m.chunks;
    const int transfers = 2 * mb * (p * v - 1);
    if (m.p2p.random_terms) {
        terms += transfers;
        single = a.single;
    }
    m.replica_random_terms = terms;
    // the exact law is kept only when the replica is one chain of ops (p = v = m = 1)
    if (terms == 1 && p == 1 && v == 1 && mb == 1) m.single = single;
}

/// The documents' term (step_model.hpp): active where some chunk has document-masked
/// attention, the law is set and its class is not made deterministic; then the replica has
/// more than one random term (no single exact law).
void set_documents(StepModel& m, const StepProfile& profile, std::uint32_t deterministic_classes) {
    if (!profile.documents.active() || (deterministic_classes & kDocumentsClassBit)) return;
    m.documents_stage_s.assign(std::size_t(m.stages), 0.0);
    double total = 0;
    for (int s = 0; s < m.stages; ++s) {
        for (int c = 0; c < m.chunks; ++c) {
            const std::size_t i = std::size_t(s * m.chunks + c);
            m.documents_stage_s[std::size_t(s)] += m.fwd[i].documents_s + m.bwd[i].documents_s;
        }
        total += m.documents_stage_s[std::size_t(s)];
    }
    const SquareMoments sq = packed_square_moments(profile.documents);
    if (!(total > 0) || !(sq.mean > 0)) return;
    m.documents_active = true;
    m.documents_sequences = std::max(1, profile.documents_sequences);
    m.documents_mean_s2 = sq.mean;
    m.documents_w_var = sq.var() / (m.documents_sequences * sq.mean * sq.mean);
    // Monte Carlo's W from the exact draws over their own mean: the draws give the law's
    // shape, the profile's attention (at the recursion's E[S]) its mean, as in the analytic
    // evaluator (a table's mean off E[S] by its standard error would shift every microbatch)
    m.documents_table = packed_square_table(profile.documents);
    double sum = 0;
    for (const double x : *m.documents_table) sum += x;
    m.documents_table_mean_s2 = sum / double(m.documents_table->size());
    m.single = SingleTerm{};
}

/// The chord g * lin_comp + R * lin_comm of every cost's mean over [1, g_hi] at R = r_bar (the
/// analytic evaluator's linearization; a copy of the linear part when nothing is mixed), and the
/// mixed variance split by the probability each side wins at (1, r_bar).
void set_linearization(ChunkCost& k, double g_lo, double g_hi, double r_bar) {
    k.lin_comp = k.comp_mean;
    k.lin_comm = k.comm_mean;
    k.lin_comp_var = k.comp_var;
    k.lin_comm_var = k.comm_var;
    if (k.mixed.empty()) return;
    const double lo = k.mean(g_lo, r_bar), hi = k.mean(g_hi, r_bar);
    const double slope = std::max(0.0, (hi - lo) / (g_hi - g_lo));
    k.lin_comp = slope;
    k.lin_comm = r_bar > 0 ? std::max(0.0, (lo - slope * g_lo) / r_bar) : 0.0;
    for (const auto& s : k.mixed) {
        const double sd = std::sqrt(s.comp_var + r_bar * r_bar * s.comm_var);
        const double pa = sd > 0 ? normal_cdf((s.comp_mean - r_bar * s.comm_mean) / sd)
                                 : (s.comp_mean >= r_bar * s.comm_mean ? 1.0 : 0.0);
        const double v = s.repeat * ChunkCost::mixed_moments(s, 1.0, r_bar).var;
        k.lin_comp_var += pa * v;
        k.lin_comm_var += (1 - pa) * v / std::max(r_bar * r_bar, 1e-300);
    }
}

/// The range of group factors the evaluators see: from 1 (the fast units' factor where slow
/// units are faster) to the slowest group's 1 - 1e-15 quantile (the analytic evaluator's
/// relevant range), at least 0.05 wide.
std::pair<double, double> group_factor_range(const StepModel& m) {
    const bool slow = m.slow_probability > 0;
    const double sfmax = std::max(1.0, slow ? m.slow_factor : 1.0);
    const double lo = std::min(1.0, slow ? m.slow_factor : 1.0);
    const double n_all = m.group_gpus * (m.lockstep ? m.dp : 1);
    return {lo, std::max(lo + 0.05, m.spatial.max_quantile(1 - 1e-15, n_all) * sfmax)};
}

/// Per-stage sums of the chunk costs' linearizations at g = R = 1 (to rank stages and for the
/// analytic's linear part).
void set_stage_sums(StepModel& m) {
    const int p = m.stages;
    const int v = m.chunks;
    const auto [g_lo, g_hi] = group_factor_range(m);
    const double r_bar = m.regime.mean();
    for (auto* k : {&m.p2p, &m.dataloader, &m.sync, &m.optimizer}) {
        set_linearization(*k, g_lo, g_hi, r_bar);
    }
    for (size_t j = 0; j < m.fwd.size(); ++j) {
        set_linearization(m.fwd[j], g_lo, g_hi, r_bar);
        set_linearization(m.bwd[j], g_lo, g_hi, r_bar);
    }
    m.stage_work_s.assign(p, 0);
    m.stage_comp_s.assign(p, 0);
    m.stage_comm_s.assign(p, 0);
    m.stage_var_comp.assign(p, 0);
    m.stage_var_comm.assign(p, 0);
    for (int s = 0; s < p; ++s) {
        for (int c = 0; c < v; ++c) {
            for (const ChunkCost* k : {&m.fwd[s * v + c], &m.bwd[s * v + c]}) {
                m.stage_comp_s[s] += k->lin_comp;
                m.stage_comm_s[s] += k->lin_comm;
                m.stage_var_comp[s] += k->lin_comp_var;
                m.stage_var_comm[s] += k->lin_comm_var;
            }
        }
        m.stage_work_s[s] = m.stage_comp_s[s] + m.stage_comm_s[s];
    }
}

/// routing_shared_s: the routed ops' mean seconds on one critical path of the mean durations at
/// g = 1 and the regime's mean (PeriodicPipeline::critical_path_content).
void set_routing_shared(StepModel& m) {
    const auto& pipe = *m.periodic;
    const auto classes = static_cast<std::size_t>(pipe.classes());
    std::vector<double> dur(classes, 0.0), routed(classes, 0.0), content(m.stages, 0.0);
    const double r_bar = m.regime.mean();
    for (int st = 0; st < m.stages; ++st) {
        for (int ch = 0; ch < m.chunks; ++ch) {
            const int j = st * m.chunks + ch;
            for (const bool backward : {false, true}) {
                const ChunkCost& k = backward ? m.bwd[j] : m.fwd[j];
                const auto cls = static_cast<std::size_t>(pipe.class_of(st, ch, backward));
                dur[cls] = k.mean(1.0, r_bar);
                routed[cls] = k.routed_mean;
            }
        }
    }
    pipe.critical_path_content(dur.data(), routed.data(), m.p2p.mean(1.0, r_bar),
                               m.dataloader.mean(1.0, r_bar), content.data());
    m.routing_shared_s = 0;
    for (const double c : content) m.routing_shared_s += c;
}

}  // namespace

StepModel build_step_model(const StepProfile& profile, const DesignPoint& point,
                           const HardwareSpec& hw, const ClusterSpec& cluster,
                           const VariabilitySpec& variability,
                           std::uint32_t deterministic_classes) {
    StepModel m;
    m.stages = profile.stages;
    m.chunks = profile.chunks;
    m.microbatches = profile.microbatches;
    m.dp = std::max(1, profile.dp);
    m.lockstep = profile.dp_lockstep && m.dp > 1;
    m.replicas = m.lockstep ? 1 : m.dp;
    m.group_gpus = std::max(1, profile.tp) * std::max(1, profile.cp);
    m.deterministic_s = deterministic_step_time(profile);
    m.periodic = timing::cached_periodic_pipeline({m.stages, m.chunks, m.microbatches});
    std::array<std::uint64_t, kKernelClassCount> ids{};
    set_variability(m, profile, point, hw, variability, deterministic_classes, ids);
    // the routing's law: inactive (forced balance), at its mean (the routing sensitivity
    // class), or the law's moments, the drift's shared part taken out of each op's
    m.routing_base = profile.routing_mean_factor;
    m.routing_active = profile.routing.active();
    if (m.routing_active) {
        m.routing = stochastic::load_factor_moments(profile.routing);
        if (deterministic_classes & kRoutingClassBit) {
            m.routing.second = m.routing.mean * m.routing.mean;
        } else {
            m.routing_shared = stochastic::shared_drift_law(profile.routing);
            if (m.routing_shared.active()) {
                m.routing_law = profile.routing;
                m.routing.mean = m.routing_shared.mean_factor;
                m.routing.second = m.routing.mean * m.routing.mean + m.routing_shared.cond_var;
            }
        }
    } else {
        m.routing = {m.routing_base, m.routing_base * m.routing_base};
    }
    for (const auto* list : {&profile.layer_forward, &profile.layer_backward}) {
        for (const auto& seg : *list) {
            for (const auto& op : seg.ops) {
                if (op.routed) m.routing_layer_s += op.time_s;
            }
        }
    }
    SegmentCosts costs(m, ids);
    std::vector<SingleTerm> fwd_single, bwd_single;
    set_chunk_costs(m, profile, costs, ids, fwd_single, bwd_single);
    set_step_costs(m, profile, costs, fwd_single, bwd_single);
    set_documents(m, profile, deterministic_classes);
    set_stage_sums(m);
    if (m.routing_shared.active()) set_routing_shared(m);
    return m;
}

}  // namespace prism::stochastic::detail
