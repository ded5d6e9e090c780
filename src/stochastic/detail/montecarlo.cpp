// Monte Carlo reference evaluator: draws the persistent factors of K cluster realizations, then
// for each sample the regime R and every chunk op of every replica, and runs the pipeline DAG.
// Replicas that cannot be the slowest (up to a failure probability of 1e-12 per replica, see
// slowest_replica) are not drawn; check_monte_carlo_pruning audits that in the tests.
//
// Two samplers of the same law:
//  * dense (slowest_replica): every group factor drawn (draw_group_factors), one mean-duration
//    DAG run per replica for its bound. Used for lockstep (FSDP), a single random term, one
//    replica, and deterministic persistent factors;
//  * sparse (slowest_sparse, every placement with persistent variability): the group factors
//    are revealed lazily (LazyGroupFactors: slow units by
//    geometric skipping, healthy factors top-down by order statistics, each draw from its
//    exact conditional law), and replicas none of whose factors is revealed share one bound
//    M(tau 1) + b. Only the replicas holding slow or top factors are resolved (exact DAG, 8 at
//    a time), and only those that can be the slowest are drawn.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <utility>

#include "src/stochastic/detail/evaluators.hpp"
#include "src/stochastic/detail/hash.hpp"
#include "src/stochastic/random.hpp"
#include "src/stochastic/routing.hpp"
#include "src/stochastic/step_distribution.hpp"

namespace prism::stochastic::detail {

namespace {

/// Group factors of cluster realization `id` (per stage with lockstep).
void cluster_factors(const StepModel& m, const PersistentLayout& layout, std::uint64_t seed,
                     std::uint64_t point_index, std::uint32_t id, std::vector<double>& g,
                     std::vector<double>& out) {
    if (m.persistent_deterministic) {
        out.assign(m.lockstep ? m.stages : static_cast<size_t>(m.stages) * m.dp, 1.0);
        return;
    }
    Stream stream(seed, point_index, StreamKind::cluster, id);
    thread_local std::vector<int> slow;
    draw_group_factors(m, layout, stream, g, &slow);
    if (!m.lockstep) {
        out = g;
        return;
    }
    out.assign(m.stages, 0.0);
    for (int s = 0; s < m.stages; ++s) {
        int k = 0;
        for (int r = 0; r < m.dp; ++r) {
            out[s] = std::max(out[s], g[s * m.dp + r]);
            k += slow[s * m.dp + r];
        }
        // the stage's effective factor with its k slow GPUs told apart (phi_k: all of them at
        // the slow factor make the op slow by it times E[max X], not by phi_0's single member)
        out[s] = m.effective ? (*m.effective)(k, out[s]) : out[s];
    }
}

/// K steady rounds of a compiled schedule (timing/detail/round_program.hpp) as one list of
/// ops for Monte Carlo's draws, in dependency-level order: every op its own row (no row
/// reused), so that the ops of one level, independent of each other, follow each other and
/// the CPU overlaps them (one round of a 1F1B body is a chain through the stages; K rounds
/// together are a wavefront K rounds wide). Rows: 0, 1, 2 the sentinels (0, the start, -inf),
/// 3 + k the state slot k before the K rounds, then the ops; `next[k]`: the row that holds
/// state slot k after them.
struct UnrolledRounds {
    std::vector<timing::detail::ExecOp> ops;
    std::vector<std::uint8_t> has_input;  ///< per op: it has an input (a transfer is drawn)
    std::vector<std::int32_t> next;
    std::size_t rows = 0;
    std::int64_t rounds = 0;  ///< K
    std::size_t normals = 0;  ///< one per op and one per transfer
};

UnrolledRounds unroll_rounds(const timing::detail::RoundProgram& pr, std::int64_t k_rounds) {
    using timing::detail::kSentinelRows;
    UnrolledRounds u;
    u.rounds = k_rounds;
    const auto d = static_cast<std::int32_t>(pr.live.size());
    const auto b = static_cast<std::int32_t>(pr.body.size());
    const auto n = static_cast<std::int32_t>(k_rounds) * b;
    const std::int32_t base = kSentinelRows + d;
    const int v = pr.shape.chunks;
    // op r b + i (round r, body op i) in program order, its row base + r b + i
    std::vector<timing::detail::ExecOp> ops(n);
    std::vector<std::int32_t> level(n, 0);
    for (std::int32_t r = 0; r < k_rounds; ++r) {
        for (std::int32_t i = 0; i < b; ++i) {
            const auto& op = pr.body[i];
            auto row = [&](std::int32_t slot, std::int32_t none) {
                if (slot < 0) return none;
                if (slot >= d) return base + r * b + (slot - d);
                return r == 0 ? kSentinelRows + slot : base + (r - 1) * b + pr.live[slot];
            };
            auto& e = ops[r * b + i];
            e.cls = op.cls;
            e.prev = row(op.prev, op.cls < 2 * v ? 1 : 0);
            e.in = row(op.in, 2);
            e.out = base + r * b + i;
            for (const auto x : {e.prev, e.in}) {
                if (x >= base) level[r * b + i] = std::max(level[r * b + i], level[x - base] + 1);
            }
        }
    }
    std::vector<std::int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int32_t a, std::int32_t c) { return level[a] < level[c]; });
    for (const auto i : order) {
        u.ops.push_back(ops[i]);
        u.has_input.push_back(ops[i].in != 2 ? 1 : 0);
        u.normals += 1 + u.has_input.back();
    }
    for (const auto l : pr.live)
        u.next.push_back(base + (static_cast<std::int32_t>(k_rounds) - 1) * b + l);
    u.rows = static_cast<std::size_t>(base + n);
    return u;
}

constexpr double kLogInvEps = 27.631021115928547;  // ln 1e12

/// Replicas evaluated at once by batch_makespan.
constexpr int kLanes = 8;

/// One op of the schedule for draw(): the slots of its predecessors (constant slots for
/// absent ones) and of its duration.
struct LaneOp {
    std::int32_t prev, own, input, cost;
};

/// One step of the cluster with factors `gk`, using the sample stream `rng`.
class StepSampler {
  public:
    explicit StepSampler(const StepModel& m)
        : m_(m),
          dur_(m.flat().size()),
          xfer_(m.flat().size()),
          finish_(m.flat().size()),
          mean_f_(m.stages * m.chunks),
          sd_f_(mean_f_.size()),
          mean_b_(mean_f_.size()),
          sd_b_(mean_f_.size()),
          op_j_(m.flat().size()),
          op_bwd_(m.flat().size()) {
        // longest paths of the comp and comm variances at g = R = 1 (the bound's V)
        const auto& ops = m.flat().ops();
        for (size_t i = 0; i < ops.size(); ++i) {
            op_j_[i] = ops[i].stage * m.chunks + ops[i].chunk;
            op_bwd_[i] = ops[i].backward ? 1 : 0;
        }
        // (per op class, PeriodicPipeline::class_of: 2 (stage v + chunk) + backward; every
        // microbatch's op of a class has the same mean and variance, so these longest paths
        // cost the same for any number of microbatches)
        const timing::PeriodicPipeline& pipe = *m.periodic;
        const auto classes = static_cast<size_t>(pipe.classes());
        std::vector<double> row(classes);
        for (const bool comm : {false, true}) {
            for (size_t j = 0; j < m.fwd.size(); ++j) {
                row[2 * j] = comm ? m.fwd[j].comm_bound_var() : m.fwd[j].comp_bound_var();
                row[2 * j + 1] = comm ? m.bwd[j].comm_bound_var() : m.bwd[j].comp_bound_var();
            }
            const double start =
                comm ? m.dataloader.comm_bound_var() : m.dataloader.comp_bound_var();
            (comm ? vcomm_ : vcomp_) = pipe.makespan(
                row.data(), comm ? m.p2p.comm_bound_var() : m.p2p.comp_bound_var(), start);
        }
        // Sparse pruning bound (slowest_sparse): cmax_[s] = the longest path in the stage-s
        // compute means alone, ctot_ = the longest path in all compute means (lane 0 all
        // stages, lane s + 1 stage s).
        {
            const auto lanes = static_cast<size_t>(m.stages) + 1;
            std::vector<double> dur(classes * lanes), tr(classes * lanes, 0.0), start(lanes, 0.0),
                end(lanes);
            for (size_t c = 0; c < classes; ++c) {
                const int st = pipe.stage_of_class(static_cast<int>(c));
                const double mean = (c % 2 == 1 ? m.bwd : m.fwd)[c / 2].comp_bound_mean();
                for (size_t k = 0; k < lanes; ++k) {
                    dur[c * lanes + k] = k == 0 || static_cast<int>(k) - 1 == st ? mean : 0.0;
                }
            }
            timing::PeriodicPipeline::Lanes in;
            in.lanes = lanes;
            in.op_s = dur.data();
            in.transfer_s = tr.data();
            in.start_s = start.data();
            pipe.makespans(in, end.data());
            ctot_ = end[0];
            cmax_.assign(end.begin() + 1, end.end());
        }
        // F of the noise bound for every (g, R): an op with mean g a + R c and variance
        // g^2 alpha + R^2 gamma has mean / sd = A cos(t) + B sin(t) for some t in [0, pi / 2]
        // (A = a / sqrt(alpha), B = c / sqrt(gamma)), which is >= min(A, B): its clamp mass is
        // at most Phi(-min(A, B)), whatever g >= 0 and R > 0.
        auto mass = [](const ChunkCost& k) {
            const double cv = k.comp_bound_var(), mv = k.comm_bound_var();
            const double a = cv > 0 ? k.comp_bound_mean() / std::sqrt(cv) : HUGE_VAL;
            const double b = mv > 0 ? k.comm_bound_mean() / std::sqrt(mv) : HUGE_VAL;
            const double rho = std::min(a, b);
            if (rho == HUGE_VAL) return 0.0;
            return rho >= 8.5 ? 1e-17 : normal_cdf(-rho);  // Phi(-8.5) < 1e-17
        };
        double f = static_cast<double>(ops.size()) * mass(m.p2p) + mass(m.dataloader);
        for (size_t j = 0; j < m.fwd.size(); ++j) {
            f += m.microbatches * (mass(m.fwd[j]) + mass(m.bwd[j]));
        }
        log_term_ = m.flat().log_paths() + std::log1p(f) + kLogInvEps;
        rep_state_.assign(m.replicas, 0);
        rep_of_.resize(static_cast<size_t>(m.stages) * m.dp);
        for (size_t gi = 0; gi < rep_of_.size(); ++gi) rep_of_[gi] = static_cast<int>(gi) % m.dp;
        rep_rev_.resize(static_cast<size_t>(m.replicas) * m.stages);
        rep_nrev_.assign(m.replicas, 0);
        const auto& pe = m.periodic->exec();
        prefix_in_ = inputs_of(pe.prefix);
        body_in_ = inputs_of(pe.body);
        suffix_in_ = inputs_of(pe.suffix);
        // the normals one replica's draw_rounds takes: one per op, one per transfer
        auto normals = [](const std::vector<std::uint8_t>& in) {
            return in.size() + static_cast<size_t>(std::count(in.begin(), in.end(), 1));
        };
        rounds_normals_ = normals(prefix_in_) + normals(suffix_in_) +
                          static_cast<size_t>(pe.rounds) * normals(body_in_);
        if (pe.rounds > 0) {
            // K rounds of at most ~1,024 ops (a wavefront wide enough, rows in cache)
            const auto& pr = m.periodic->program();
            const auto per = static_cast<std::int64_t>(std::max<size_t>(1, pr.body.size()));
            const std::int64_t k = std::clamp<std::int64_t>(1024 / per, 1, 16);
            unrolled_ = unroll_rounds(pr, std::min(k, pe.rounds));
            single_ = unroll_rounds(pr, 1);
        }
        draw_mean_.resize(2 * m.fwd.size());
        draw_sd_.resize(2 * m.fwd.size());
        lane_g_.resize(static_cast<size_t>(m.stages) * kLanes);
        cost_comp_.resize(2 * m.fwd.size());
        cost_comm_.resize(2 * m.fwd.size());
        lane_cost_.resize(2 * m.fwd.size() * kLanes);
    }

    double operator()(const std::vector<double>& gk, Stream& rng) {
        const auto& m = m_;
        const bool single = m.single.present;
        const double r = m.regime.is_constant() ? m.regime.mean() : m.regime.sample(rng.uniform());
        double slowest = 0;
        if (single || m.replicas == 1 || m.documents_active) {
            for (int rep = 0; rep < m.replicas; ++rep) {
                slowest = std::max(slowest, sample_replica(gk, rep, r, rng));
            }
            if (check_ != nullptr) {
                // every replica drawn, none skipped
                check_->replicas += m.replicas;
                check_->drawn += m.replicas;
            }
        } else {
            slowest = slowest_replica(gk, r, rng);
        }
        return finish_step(slowest, r, rng);
    }

    /// Whether operator()(LazyGroupFactors&, ...) applies: several replicas, no lockstep, no
    /// single term, a placement LazyGroupFactors supports.
    static bool sparse(const StepModel& m, const PersistentLayout& layout) {
        return !m.single.present && !m.lockstep && m.replicas > 1 && !m.documents_active &&
               LazyGroupFactors::supports(m, layout);
    }

    /// One step on the lazily revealed cluster `lg` (the same law as operator() on its g).
    double operator()(LazyGroupFactors& lg, Stream& rng) {
        const auto& m = m_;
        const double r = m.regime.is_constant() ? m.regime.mean() : m.regime.sample(rng.uniform());
        return finish_step(slowest_sparse(lg, r, rng), r, rng);
    }

  private:
    /// One replica's pipeline time with stage factors gs[0 .. p): every op and transfer a normal
    /// with its conditional mean and sd given (g, R), clamped at 0 (the law of replica()), and
    /// the longest path over lane_ops_ (level order), fused: one pass.
    double draw(const double* gs, double r, Stream& rng) {
        const auto& m = m_;
        if (path_ == McPath::rounds) return draw_rounds(gs, r, rng);
        build_lane_ops();
        const size_t n = lane_ops_.size();
        class_laws(gs, r);
        // op k's duration from z[2 k], its transfer from z[2 k + 1] (unused without an input:
        // the input slot is -inf), the dataloader from z[2 n]
        normals_.resize(2 * n + 1);
        rng.normals_batch(normals_.data(), normals_.size());
        const double* z = normals_.data();
        const double pm = m.p2p.mean(1.0, r), psd = std::sqrt(m.p2p.var(1.0, r));
        double* fin = draw_fin_.data();
        fin[n] = 0.0;
        fin[n + 1] = std::max(
            0.0, m.dataloader.mean(1.0, r) + std::sqrt(m.dataloader.var(1.0, r)) * z[2 * n]);
        fin[n + 2] = -HUGE_VAL;
        const double* mean = draw_mean_.data();
        const double* sd = draw_sd_.data();
        for (size_t k = 0; k < n; ++k) {
            const LaneOp& op = lane_ops_[k];
            const double d = max_of(0.0, mean[op.cost] + sd[op.cost] * z[2 * k]);
            const double x = max_of(0.0, pm + psd * z[2 * k + 1]);
            fin[k] = max_of(max_of(fin[op.prev], fin[op.own]), fin[op.input] + x) + d;
        }
        return dag_end(fin);
    }

    /// The op-by-op schedule for draw()'s op path (McPath::ops), built on first use.
    void build_lane_ops() {
        if (lane_ops_built_) return;
        lane_ops_built_ = true;
        const auto& m = m_;
        const auto& ops = m.flat().ops();
        // the schedule for batch_makespan: absent predecessors point at constant slots
        const auto n = static_cast<std::int32_t>(ops.size());
        const std::int32_t zero = n, start = n + 1, none = n + 2;
        lane_ops_.resize(ops.size());
        for (size_t i = 0; i < ops.size(); ++i) {
            const auto& op = ops[i];
            auto& l = lane_ops_[i];
            l.prev = op.stage_prev >= 0 ? op.stage_prev : (op.stage == 0 ? start : zero);
            l.own = op.own_forward >= 0 ? op.own_forward : zero;
            l.input = op.input >= 0 ? op.input : none;
            l.cost = 2 * op_j_[i] + op_bwd_[i];
        }
        // level order: every op after its predecessors, the ops of one level (independent of
        // each other) together, so that consecutive ops do not wait on each other's result
        // (in the pipeline's order runs of one stage's ops form a chain, and the longest path
        // runs at the latency of its max / add chain); the same maxima and sums per op
        {
            std::vector<std::int32_t> level(ops.size(), 0), order(ops.size());
            auto lv = [&](std::int32_t slot) { return slot < n ? level[slot] + 1 : 0; };
            for (size_t i = 0; i < ops.size(); ++i) {
                const auto& l = lane_ops_[i];
                level[i] = std::max({lv(l.prev), lv(l.own), lv(l.input)});
            }
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(),
                             [&](std::int32_t a, std::int32_t b) { return level[a] < level[b]; });
            std::vector<std::int32_t> pos(ops.size() + 3);
            for (size_t k = 0; k < ops.size(); ++k) pos[order[k]] = static_cast<std::int32_t>(k);
            for (std::int32_t c = n; c < n + 3; ++c) pos[c] = c;
            std::vector<LaneOp> sorted(ops.size());
            for (size_t k = 0; k < ops.size(); ++k) {
                const LaneOp& l = lane_ops_[order[k]];
                sorted[k] = {pos[l.prev], pos[l.own], pos[l.input], l.cost};
            }
            lane_ops_ = std::move(sorted);
            // the last op of each stage (it finishes last there: durations are >= 0), whose
            // finish times the makespan is the max of
            std::vector<std::int32_t> last(m.stages, -1);
            for (size_t i = 0; i < ops.size(); ++i)
                last[ops[i].stage] = static_cast<std::int32_t>(i);
            for (const auto i : last) {
                if (i >= 0) last_slots_.push_back(pos[i]);
            }
        }
        draw_fin_.resize(ops.size() + 3);
    }

    /// The law of every op class given the stage factors gs[0 .. p) and the regime r: the
    /// mean and sd of an op of class 2 j + bwd (chunk j = stage v + chunk) into draw_mean_ and
    /// draw_sd_. The one place where both paths (draw, draw_rounds) sample the per-class
    /// factors: a per-op or per-class communication factor enters here.
    void class_laws(const double* gs, double r) {
        const auto& m = m_;
        const int v = m.chunks;
        for (int s = 0; s < m.stages; ++s) {
            const double gg = gs[s];
            for (int c = 0; c < v; ++c) {
                const int j = s * v + c;
                const Moments f = m.fwd[j].moments(gg, r), b = m.bwd[j].moments(gg, r);
                draw_mean_[2 * j] = f.mean;
                draw_sd_[2 * j] = std::sqrt(f.var);
                draw_mean_[2 * j + 1] = b.mean;
                draw_sd_[2 * j + 1] = std::sqrt(b.var);
            }
        }
    }

    /// draw() on the rounds of PeriodicPipeline's program (timing/detail/round_program.hpp):
    /// the same ops with the same law (each op a normal of its class's mean and sd given
    /// (g, R), clamped at 0, each transfer into an op a p2p normal clamped at 0, the dataloader
    /// the start of stage 0), run as the prefix, `rounds` copies of the body and the suffix
    /// with small buffers that stay in cache, whatever the microbatches. The makespan of every
    /// realization equals the op-by-op DAG's: the same maxima and sums over the same edges,
    /// less the own-forward edge, which never binds when durations are >= 0 (the forward ran
    /// earlier on the same stage). Only the order in which the stream's normals are taken
    /// differs, so the samples differ from draw()'s by the draws, not by the law (tested:
    /// McRounds.*).
    double draw_rounds(const double* gs, double r, Stream& rng) {
        const auto& m = m_;
        const auto& ex = m.periodic->exec();
        class_laws(gs, r);
        const double pm = m.p2p.mean(1.0, r), psd = std::sqrt(m.p2p.var(1.0, r));
        const double start = std::max(
            0.0, m.dataloader.mean(1.0, r) + std::sqrt(m.dataloader.var(1.0, r)) * rng.normal32());
        RoundOps laws{draw_mean_.data(), draw_sd_.data(), pm, psd};
        pool_left_ = rounds_normals_;
        pool_at_ = pool_end_ = 0;
        double* pre = grow(rounds_pre_, ex.prefix_rows);
        pre[0] = 0.0;
        pre[1] = start;
        pre[2] = -HUGE_VAL;
        run_drawn(ex.prefix, prefix_in_, pre, laws, rng);
        const double* x = pre;
        if (ex.rounds > 0) {
            // the steady rounds K at a time (unrolled_), the rest one at a time (single_), on
            // a buffer laid out as theirs; then the suffix on one laid out as ex's work rows
            // (both keep the state in rows 3 .. 3 + D)
            double* w = grow(rounds_work_, std::max(unrolled_.rows, ex.work_rows));
            w[0] = 0.0;
            w[1] = start;
            w[2] = -HUGE_VAL;
            for (size_t k = 0; k < ex.state; ++k) {
                const std::int32_t e = ex.entry[k];
                w[timing::detail::kSentinelRows + k] = e >= 0 ? pre[e] : 0.0;
            }
            std::int64_t left = ex.rounds;
            for (const UnrolledRounds* u : {&unrolled_, &single_}) {
                for (; left >= u->rounds; left -= u->rounds) {
                    run_drawn(u->ops, u->has_input, w, laws, rng);
                    for (size_t k = 0; k < ex.state; ++k) {
                        w[timing::detail::kSentinelRows + k] = w[u->next[k]];
                    }
                }
            }
            run_drawn(ex.suffix, suffix_in_, w, laws, rng);
            x = w;
        }
        double end = 0.0;
        for (const auto k : ex.last) end = max_of(end, x[k]);
        return end;
    }

    /// The class laws draw_rounds runs its ops with.
    struct RoundOps {
        const double* mean;
        const double* sd;
        double pm, psd;
    };

    /// Ops into their rows of x, each with its own duration and (where it has an input) its
    /// own transfer: normals drawn a block of ops at a time (in_ops[i]: op i has an input).
    void run_drawn(const std::vector<timing::detail::ExecOp>& ops,
                   const std::vector<std::uint8_t>& in_ops, double* x, const RoundOps& laws,
                   Stream& rng) {
        constexpr size_t kBlock = 256;
        const size_t n = ops.size();
        for (size_t b = 0; b < n; b += kBlock) {
            const size_t e = std::min(n, b + kBlock);
            size_t need = e - b;
            for (size_t i = b; i < e; ++i) need += in_ops[i];
            const double* zz = take_normals(need, rng);
            for (size_t i = b; i < e; ++i) {
                const timing::detail::ExecOp& op = ops[i];
                const double d = max_of(0.0, laws.mean[op.cls] + laws.sd[op.cls] * *zz++);
                double y = -HUGE_VAL;
                if (in_ops[i] != 0) y = x[op.in] + max_of(0.0, laws.pm + laws.psd * *zz++);
                x[op.out] = max_of(x[op.prev], y) + d;
            }
        }
    }

    /// n normals of draw_rounds' stream: from a pool refilled a few thousand at a time (one
    /// call per round of a short 1F1B body would cost more than the draws), never more than
    /// the replica's draw still needs (pool_left_), so no draw is wasted. Leftovers too few for
    /// a block are dropped: which normals are used does not depend on their values.
    const double* take_normals(size_t n, Stream& rng) {
        constexpr size_t kPool = 4096;
        if (pool_end_ - pool_at_ < n) {
            const size_t k = std::max(n, std::min(kPool, pool_left_));
            rng.normals_batch(grow(pool_, k), k);
            pool_at_ = 0;
            pool_end_ = k;
        }
        const double* z = pool_.data() + pool_at_;
        pool_at_ += n;
        pool_left_ = pool_left_ > n ? pool_left_ - n : 0;
        return z;
    }

    template <class T>
    static T* grow(std::vector<T>& v, size_t n) {
        if (v.size() < n) v.resize(n);
        return v.data();
    }

    /// in_ops of an op list: whether each op has an input (its transfer is drawn).
    static std::vector<std::uint8_t> inputs_of(const std::vector<timing::detail::ExecOp>& ops) {
        std::vector<std::uint8_t> out(ops.size());
        for (size_t i = 0; i < ops.size(); ++i) out[i] = ops[i].in != 2 ? 1 : 0;
        return out;
    }

    /// std::max(a, b) by value.
    static double max_of(double a, double b) { return a < b ? b : a; }

    /// The makespan from the finish times of one schedule: the max over the stages' last ops.
    double dag_end(const double* fin) const {
        double end = 0.0;
        for (const auto k : last_slots_) end = max_of(end, fin[k]);
        return end;
    }

    /// The mean-duration makespan with class durations cost[2 j + bwd], transfers x, stage 0
    /// starting at `start` (PeriodicPipeline: cost independent of the microbatches).
    double mean_dag(const double* cost, double x, double start) {
        return m_.periodic->makespan(cost, x, start);
    }

    /// Replica rep of the cluster with factors gk drawn: draw(), or replica() for a single
    /// random term (its exact law).
    double sample_replica(const std::vector<double>& gk, int rep, double r, Stream& rng) {
        const auto& m = m_;
        if (m.single.present || m.documents_active) return replica(gk, rep, r, rng);
        draw_g_.resize(m.stages);
        for (int s = 0; s < m.stages; ++s) draw_g_[s] = m.lockstep ? gk[s] : gk[s * m.dp + rep];
        return draw(draw_g_.data(), r, rng);
    }

    double finish_step(double slowest, double r, Stream& rng) {
        const auto& m = m_;
        const double sync =
            std::max(0.0, m.sync.mean(1.0, r) + std::sqrt(m.sync.var(1.0, r)) * rng.normal32());
        const double opt = std::max(
            0.0, m.optimizer.mean(1.0, r) + std::sqrt(m.optimizer.var(1.0, r)) * rng.normal32());
        return slowest + std::max(0.0, sync - m.sync_overlap_s) + opt;
    }
    /// Means and sds of the chunk ops of replica `rep` given (g, R).
    void stage_costs(const std::vector<double>& gk, int rep, double r) {
        const auto& m = m_;
        const bool single = m.single.present;
        for (int s = 0; s < m.stages; ++s) {
            const double gg = m.lockstep ? gk[s] : gk[s * m.dp + rep];
            for (int c = 0; c < m.chunks; ++c) {
                const int i = s * m.chunks + c;
                const Moments f = m.fwd[i].moments(gg, r), b = m.bwd[i].moments(gg, r);
                mean_f_[i] = f.mean;
                sd_f_[i] = single ? 0.0 : std::sqrt(f.var);
                mean_b_[i] = b.mean;
                sd_b_[i] = single ? 0.0 : std::sqrt(b.var);
            }
        }
    }

    /// One replica's pipeline time: every chunk op and transfer drawn, one at a time (for a
    /// single random term, whose exact law is kept; draw() otherwise).
    double replica(const std::vector<double>& gk, int rep, double r, Stream& rng) {
        const auto& m = m_;
        const int v = m.chunks;
        const auto& ops = m.flat().ops();
        const size_t nops = ops.size();
        const bool single = m.single.present;
        const double p2p_mean = m.p2p.mean(1.0, r);
        const double p2p_sd = single ? 0.0 : std::sqrt(m.p2p.var(1.0, r));
        stage_costs(gk, rep, r);
        if (m.documents_active) documents_factors(rng);
        for (size_t i = 0; i < nops; ++i) {
            const auto& op = ops[i];
            const int j = op.stage * v + op.chunk;
            double mu = op.backward ? mean_b_[j] : mean_f_[j];
            const double sd = op.backward ? sd_b_[j] : sd_f_[j];
            if (m.documents_active) {
                // the microbatch's documents: its attention W times the mean, on the group's g
                const double gg = m.lockstep ? gk[op.stage] : gk[op.stage * m.dp + rep];
                const double a = op.backward ? m.bwd[j].documents_s : m.fwd[j].documents_s;
                mu += (doc_w_[std::size_t(op.microbatch)] - 1.0) * a * gg;
            }
            dur_[i] = sd > 0 ? std::max(0.0, mu + sd * rng.normal32()) : mu;
            if (op.input >= 0) {
                xfer_[i] =
                    p2p_sd > 0 ? std::max(0.0, p2p_mean + p2p_sd * rng.normal32()) : p2p_mean;
            }
        }
        const double dl_sd = single ? 0.0 : std::sqrt(m.dataloader.var(1.0, r));
        const double dl = std::max(0.0, m.dataloader.mean(1.0, r) + dl_sd * rng.normal32());
        double fin = m.flat().makespan(dur_.data(), xfer_.data(), dl, finish_.data());
        if (single) {
            // the replica's only random term, with its exact law
            const auto& t = m.single;
            const auto& x = m.transient[t.cls];
            const double u = rng.uniform();
            const double scale = t.comm ? r : gk[m.lockstep ? 0 : rep];
            const double draw = t.n == 1 ? x.sample(u) : x.max_quantile(u, t.n);
            fin += t.base_s * scale * (draw - x.max_moments(t.n).mean);
        }
        return fin;
    }

    /// W = S / (b E[S]) of every microbatch of one replica into doc_w_: each of its b
    /// sequences' S resampled from the exact packings (StepModel::documents_table, E[S] their
    /// mean).
    void documents_factors(Stream& rng) {
        const auto& m = m_;
        const std::vector<double>& table = *m.documents_table;
        const auto n = static_cast<std::uint32_t>(table.size());
        const double scale = 1.0 / (m.documents_sequences * m.documents_table_mean_s2);
        doc_w_.resize(std::size_t(m.microbatches));
        for (auto& w : doc_w_) {
            double sum = 0;
            for (int k = 0; k < m.documents_sequences; ++k) sum += table[rng.below(n)];
            w = sum * scale;
        }
    }

    /// The slowest of the d replicas, drawing only those that can be it. Replica rep's time is
    /// T = makespan(mu + e), e_i = max(sd_i Z_i, -mu_i); T <= M + max over paths of sum e_i,
    /// M = makespan(mu). Per path the sum is sub-Gaussian with variance proxy V_path <= V =
    /// the longest path in sd^2 (the clamp at 0 multiplies the moment generating function by at
    /// most exp(sum_i Phi(-mu_i / sd_i)), F), so by the union bound over the N paths of the
    /// schedule (Chernoff) P(T > M + b) <= N F exp(-b^2 / 2V) = eps at
    /// b = sqrt(2 V (ln N + ln F + ln(1 / eps))). Replicas are drawn in decreasing M; one whose
    /// bound M + b lies below the slowest drawn so far is skipped: it would have changed the
    /// max with probability < eps = 1e-12 (so < 1.3e-7 per 1,000 samples of 1,024 replicas).
    double slowest_replica(const std::vector<double>& gk, double r, Stream& rng) {
        const auto& m = m_;
        const int p = m.stages;
        const int v = m.chunks;
        const size_t nops = m.flat().size();
        const double p2p_mean = m.p2p.mean(1.0, r);
        const double p2p_var = m.p2p.var(1.0, r);
        const double dl_mean = m.dataloader.mean(1.0, r);
        const double dl_var = m.dataloader.var(1.0, r);
        // Phi(-mu / sd), bounded by Phi(-8.5) < 1e-17 without erfc when mu >= 8.5 sd
        auto clamp_mass = [](double mu, double var) {
            if (!(var > 0)) return 0.0;
            if (mu > 0 && mu * mu >= 72.25 * var) return 1e-17;
            return normal_cdf(-mu / std::sqrt(var));
        };
        const double f_common =
            static_cast<double>(nops) * clamp_mass(p2p_mean, p2p_var) + clamp_mass(dl_mean, dl_var);
        bound_.resize(m.replicas);
        order_.resize(m.replicas);
        const double n = m.microbatches;
        // every replica's mean-duration makespan M in one multi-lane pass: lane rep has class
        // 2 j + bwd take the chunk's mean at the replica's group factor
        const auto classes = 2 * m.fwd.size();
        const auto reps = static_cast<size_t>(m.replicas);
        rep_dur_.resize(classes * reps);
        rep_tr_.assign(classes * reps, p2p_mean);
        rep_start_.assign(reps, dl_mean);
        rep_mk_.resize(reps);
        std::vector<double> fmass(reps, f_common), gmaxs(reps, 1.0);
        for (int rep = 0; rep < m.replicas; ++rep) {
            double& f = fmass[rep];
            for (int s = 0; s < p; ++s) {
                const double gg = gk[s * m.dp + rep];
                gmaxs[rep] = std::max(gmaxs[rep], gg);
                for (int c = 0; c < v; ++c) {
                    const int i = s * v + c;
                    const Moments mf = m.fwd[i].moments(gg, r), mb = m.bwd[i].moments(gg, r);
                    rep_dur_[(2 * i) * reps + rep] = mf.mean;
                    rep_dur_[(2 * i + 1) * reps + rep] = mb.mean;
                    f += n * (clamp_mass(mf.mean, mf.var) + clamp_mass(mb.mean, mb.var));
                }
            }
        }
        timing::PeriodicPipeline::Lanes in;
        in.lanes = reps;
        in.op_s = rep_dur_.data();
        in.transfer_s = rep_tr_.data();
        in.start_s = rep_start_.data();
        m.periodic->makespans(in, rep_mk_.data());
        for (int rep = 0; rep < m.replicas; ++rep) {
            const double mk = rep_mk_[rep];
            // longest path in sd^2 <= max(1, gmax)^2 (comp part) + r^2 (comm part), both
            // longest paths precomputed: sd^2 = g^2 comp_var + r^2 comm_var per op
            const double gmax = gmaxs[rep];
            const double vk = gmax * gmax * vcomp_ + r * r * vcomm_;
            const double b =
                std::sqrt(2.0 * vk * (m.flat().log_paths() + std::log1p(fmass[rep]) + kLogInvEps));
            bound_[rep] = mk + b;
            order_[rep] = {mk, rep};
        }
        std::sort(order_.begin(), order_.end(), std::greater<>());
        double slowest = -1.0;
        std::vector<int> skipped;
        for (const auto& [mk, rep] : order_) {
            if (bound_[rep] < slowest) {
                if (check_ != nullptr) skipped.push_back(rep);
                continue;
            }
            slowest = std::max(slowest, sample_replica(gk, rep, r, rng));
            if (check_ != nullptr) ++check_->drawn;
        }
        if (check_ != nullptr) {
            // every replica's bound took one mean-duration run
            check_->bounded += m.replicas;
            check_->dag_runs += m.replicas;
            // draw the skipped replicas too: none may exceed the max of the drawn ones
            check_->replicas += m.replicas;
            check_->skipped += static_cast<std::int64_t>(skipped.size());
            for (const int rep : skipped) {
                if (sample_replica(gk, rep, r, rng) > slowest) ++check_->violations;
            }
        }
        return slowest;
    }

    /// The makespan at mean durations of up to kLanes replicas at once (all their groups
    /// revealed), as lanes of one PeriodicPipeline pass. gmax[l]: the largest of 1 and lane l's
    /// factors.
    void batch_makespan(const LazyGroupFactors& lg, const int* reps, int count, double r,
                        double* mk, double* gmax) {
        const auto& m = m_;
        const int v = m.chunks;
        // lane l's op cost c = 2 j + bwd: g * comp_mean + r * comm_mean (ChunkCost::mean)
        const auto& g = lg.g();
        const size_t costs = 2 * m.fwd.size();
        for (size_t j = 0; j < m.fwd.size(); ++j) {
            cost_comp_[2 * j] = m.fwd[j].comp_mean;
            cost_comp_[2 * j + 1] = m.bwd[j].comp_mean;
            cost_comm_[2 * j] = r * m.fwd[j].comm_mean;
            cost_comm_[2 * j + 1] = r * m.bwd[j].comm_mean;
        }
        for (int l = 0; l < kLanes; ++l) {
            const int rep = reps[std::min(l, count - 1)];  // spare lanes repeat the last
            double gm = 1.0;
            for (int s = 0; s < m.stages; ++s) {
                const double gg = g[s * m.dp + rep];
                lane_g_[s * kLanes + l] = gg;
                gm = std::max(gm, gg);
            }
            if (l < count) gmax[l] = gm;
        }
        for (size_t c = 0; c < costs; ++c) {
            const double* gs = lane_g_.data() + (c / 2 / v) * kLanes;
            double* out = lane_cost_.data() + c * kLanes;
            const ChunkCost& k = (c % 2 == 1 ? m.bwd : m.fwd)[c / 2];
            if (!k.mixed.empty()) {
                for (int l = 0; l < kLanes; ++l) out[l] = k.mean(gs[l], r);
                continue;
            }
            for (int l = 0; l < kLanes; ++l) out[l] = gs[l] * cost_comp_[c] + cost_comm_[c];
        }
        const double x = m.p2p.mean(1.0, r);
        double end[kLanes];
        if (count == 1) {
            // one schedule: the one-lane pass
            for (size_t c = 0; c < draw_mean_.size(); ++c) draw_mean_[c] = lane_cost_[c * kLanes];
            end[0] = mean_dag(draw_mean_.data(), x, m.dataloader.mean(1.0, r));
        } else {
            lane_tr_.assign(costs * kLanes, x);
            double start[kLanes];
            for (int l = 0; l < kLanes; ++l) start[l] = m.dataloader.mean(1.0, r);
            timing::PeriodicPipeline::Lanes in;
            in.lanes = kLanes;
            in.op_s = lane_cost_.data();
            in.transfer_s = lane_tr_.data();
            in.start_s = start;
            m.periodic->makespans(in, end);
        }
        for (int l = 0; l < count; ++l) mk[l] = end[l];
    }

    /// The noise bound b of slowest_replica for a replica whose factors are <= gmax.
    double noise_bound(double gmax, double r) const {
        return std::sqrt(2.0 * (gmax * gmax * vcomp_ + r * r * vcomm_) * log_term_);
    }

    /// The slowest replica on a lazily revealed cluster, drawing only the replicas and the
    /// group factors that can matter. Replica rep's time T is bounded as in slowest_replica by
    /// M(g) + b (failure probability < 1e-12), where M(g) = makespan at mean durations is, per
    /// path P of the schedule, sum_s g_s C_s(P) + R D(P) + start (C_s(P) >= 0: the compute
    /// means of stage s on P), and M(g) the max over P. So for any tau,
    ///   M(g) <= M(tau 1) + max_P sum_s e_s C_s(P),  e_s = max(0, g_s - tau),
    /// and the last term is at most the greedy fractional knapsack that gives stage s (largest
    /// e_s first) at most cmax_[s] = max_P C_s(P), and all stages together at most ctot_ =
    /// max_P sum_s C_s(P). With tau = lg.tau() every unrevealed factor is <= tau (e_s = 0), so
    /// only a replica's revealed factors above tau enter its knapsack. Untouched replicas (no
    /// factor revealed) share M(tau 1) + b. Candidates (replicas with a revealed factor) are
    /// taken in decreasing bound and resolved (all factors revealed, M exact, kLanes at a time:
    /// batch_makespan), and drawn in decreasing M when M + b is not below the slowest drawn so
    /// far; every replica skipped has a valid bound below it. More top factors are revealed
    /// (extend) while the untouched replicas' bound is not below the slowest.
    double slowest_sparse(LazyGroupFactors& lg, double r, Stream& rng) {
        const auto& m = m_;
        std::fill(rep_state_.begin(), rep_state_.end(), std::uint8_t{0});
        std::fill(rep_nrev_.begin(), rep_nrev_.end(), 0);
        drawn_.clear();
        pending_.clear();
        SparseStep s;
        s.r = r;
        s.untouched = m.replicas;
        if (lg.unrevealed() > 0 && !std::isfinite(lg.tau())) lg.extend(8);
        // the top factors revealed by each further round: every round costs a mean-duration
        // DAG run and the pending replicas' bounds, so after the first 8 (enough for most
        // shapes) rounds start at 1/32 of the groups and double (a function of the shape only)
        s.batch = std::max(8, static_cast<int>(lg.g().size() / 32));
        knap_.resize(m.stages);
        rep_groups_.resize(m.stages);
        sparse_at_tau(s, lg);
        for (;;) {
            sparse_take_revealed(s, lg);
            if (s.stale) {
                // (pending_ holds only pending replicas: the others are erased below)
                for (auto& [u, rep] : pending_) u = sparse_bound(s, lg.g(), rep);
                std::sort(pending_.begin(), pending_.end(), std::greater<>());
                s.stale = false;
            }
            const bool extend = sparse_resolve(s, lg);
            if (!resolved_.empty()) {
                // draw in decreasing M those whose M + b is not below the slowest so far
                std::sort(resolved_.begin(), resolved_.end(),
                          [](const Resolved& a, const Resolved& b) { return a.mk > b.mk; });
                for (const auto& x : resolved_) {
                    if (x.mk + x.b < s.slowest) continue;
                    s.slowest = std::max(s.slowest, sample_replica(lg.g(), x.rep, r, rng));
                    drawn_.push_back(x.rep);
                    if (check_ != nullptr) ++check_->drawn;
                }
                resolved_.clear();
                continue;
            }
            if (!extend && !(s.untouched > 0 && s.u_untouched >= s.slowest)) break;
            // the untouched replicas may hold the slowest: reveal more top factors
            if (check_ != nullptr) ++check_->extends;
            if (2 * static_cast<std::int64_t>(lg.revealed().size()) >=
                static_cast<std::int64_t>(lg.g().size())) {
                lg.reveal_all();
            } else {
                lg.extend(s.batch);
                s.batch *= 2;
            }
            sparse_at_tau(s, lg);
        }
        if (check_ != nullptr) sparse_audit(lg, s.slowest, r, rng);
        return s.slowest;
    }

    /// slowest_sparse's state over one step.
    struct SparseStep {
        double r = 1;
        size_t seen = 0;    ///< lg.revealed() entries taken into rep_rev_
        int untouched = 0;  ///< replicas none of whose groups is revealed
        int batch = 8;      ///< the top factors the next extend reveals
        /// tau, the mean-duration makespan M(tau 1), and the untouched replicas' bound
        double tau = 0, m_tau = 0, u_untouched = -HUGE_VAL;
        /// the pending bounds are to be recomputed (and re-sorted): tau moved, or a pending
        /// replica gained a revealed factor. Resolving a replica reveals only its own groups,
        /// so between extends the pending bounds and their order stay as they are.
        bool stale = true;
        double slowest = -HUGE_VAL;  ///< the slowest replica drawn so far
    };

    /// M(tau 1) and the untouched replicas' bound at the current tau.
    void sparse_at_tau(SparseStep& s, const LazyGroupFactors& lg) {
        const auto& m = m_;
        s.tau = lg.tau();
        s.u_untouched = -HUGE_VAL;
        // any tau is valid without pool groups (before, extend made it finite)
        if (!std::isfinite(s.tau)) s.tau = 1.0;
        for (size_t j = 0; j < m.fwd.size(); ++j) {
            draw_mean_[2 * j] = m.fwd[j].mean(s.tau, s.r);
            draw_mean_[2 * j + 1] = m.bwd[j].mean(s.tau, s.r);
        }
        s.m_tau = mean_dag(draw_mean_.data(), m.p2p.mean(1.0, s.r), m.dataloader.mean(1.0, s.r));
        if (s.untouched > 0) s.u_untouched = s.m_tau + noise_bound(std::max(1.0, s.tau), s.r);
        s.stale = true;
    }

    /// M(tau 1) + greedy knapsack of the excesses over tau of replica rep's revealed factors,
    /// + b for factors <= gmax (tau bounds the unrevealed ones)
    double sparse_bound(const SparseStep& s, const std::vector<double>& g, int rep) {
        const int p = m_.stages;
        const int nrev = rep_nrev_[rep];
        const std::int32_t* rev = rep_rev_.data() + static_cast<size_t>(rep) * p;
        int items = 0;
        double gmax = nrev < p ? std::max(1.0, s.tau) : 1.0;
        for (int k = 0; k < nrev; ++k) {
            const double gu = g[rev[k]];
            gmax = std::max(gmax, gu);
            const double e = gu - s.tau;
            if (e <= 0) continue;
            int j = items++;  // insertion by decreasing excess
            for (; j > 0 && knap_[j - 1].first < e; --j) knap_[j] = knap_[j - 1];
            knap_[j] = {e, cmax_[rev[k] / m_.dp]};
        }
        double extra = 0, cap = ctot_;
        for (int j = 0; j < items && cap > 0; ++j) {
            const double c = std::min(cap, knap_[j].second);
            extra += knap_[j].first * c;
            cap -= c;
        }
        return s.m_tau + extra + noise_bound(gmax, s.r);
    }

    /// The groups revealed since the last call join their replicas' lists (a replica becomes
    /// pending when its first group is revealed).
    void sparse_take_revealed(SparseStep& s, const LazyGroupFactors& lg) {
        const int p = m_.stages;
        const auto& rev = lg.revealed();
        for (; s.seen < rev.size(); ++s.seen) {
            const int gi = rev[s.seen];
            const int rep = rep_of_[gi];
            if (rep_state_[rep] == 2) continue;
            if (rep_state_[rep] == 0) {
                rep_state_[rep] = 1;
                pending_.emplace_back(0.0, rep);
                if (--s.untouched == 0) s.u_untouched = -HUGE_VAL;
            }
            rep_rev_[static_cast<size_t>(rep) * p + rep_nrev_[rep]++] = gi;
            s.stale = true;
        }
    }

    /// Takes the pending replicas in decreasing bound: prunes those below the slowest drawn,
    /// resolves the others (all their factors revealed, exact M, kLanes at a time) into
    /// resolved_, until an untouched replica may be slower (returns true: reveal more first)
    /// or the resolved ones are to be drawn first.
    bool sparse_resolve(SparseStep& s, LazyGroupFactors& lg) {
        const int p = m_.stages;
        bool extend = false;
        double best = -HUGE_VAL;  // the largest exact M resolved and not yet decided
        int lanes = 0;
        auto flush = [&] {
            if (lanes == 0) return;
            double mk[kLanes], gmax[kLanes];
            batch_makespan(lg, lane_reps_, lanes, s.r, mk, gmax);
            if (check_ != nullptr) {
                ++check_->dag_runs;
                check_->bounded += lanes;
            }
            for (int l = 0; l < lanes; ++l) {
                resolved_.push_back({mk[l], noise_bound(gmax[l], s.r), lane_reps_[l]});
                best = std::max(best, mk[l]);
            }
            lanes = 0;
        };
        for (const auto& [u, rep] : pending_) {
            if (rep_state_[rep] != 1) continue;
            if (u < s.slowest) {
                rep_state_[rep] = 2;  // pruned: its bound only held the slowest so far
                continue;
            }
            if (u < s.u_untouched && s.u_untouched >= s.slowest) {
                extend = true;  // an untouched replica may be slower: reveal more first
                break;
            }
            if (u < best) break;  // draw the resolved ones first (largest M first)
            // resolve (in batches): reveal its factors, exact M
            rep_state_[rep] = 2;
            for (int st = 0; st < p; ++st) rep_groups_[st] = st * m_.dp + rep;
            lg.reveal_groups(rep_groups_.data(), p);
            lane_reps_[lanes++] = rep;
            if (lanes == kLanes || best == -HUGE_VAL) flush();  // the first one at once
        }
        flush();
        pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                      [&](const auto& x) { return rep_state_[x.second] != 1; }),
                       pending_.end());
        return extend;
    }

    /// The pruning audit: draw the replicas not drawn; none may exceed the max of the drawn.
    void sparse_audit(LazyGroupFactors& lg, double slowest, double r, Stream& rng) {
        const auto& m = m_;
        lg.reveal_all();
        std::vector<std::uint8_t> was_drawn(m.replicas, 0);
        for (const int rep : drawn_) was_drawn[rep] = 1;
        check_->replicas += m.replicas;
        for (int rep = 0; rep < m.replicas; ++rep) {
            if (was_drawn[rep]) continue;
            ++check_->skipped;
            if (sample_replica(lg.g(), rep, r, rng) > slowest) ++check_->violations;
        }
    }

  public:
    PruningCheck* check_ = nullptr;
    McPath path_ = McPath::rounds;  ///< how draw() runs the schedule

  private:
    const StepModel& m_;
    std::vector<double> dur_, xfer_, finish_, mean_f_, sd_f_, mean_b_, sd_b_;
    std::vector<double> doc_w_;  ///< documents_factors' W per microbatch
    std::vector<double> rep_dur_, rep_tr_, rep_start_, rep_mk_;  ///< slowest_replica's lanes
    std::vector<double> bound_;
    std::vector<int> op_j_;
    std::vector<std::uint8_t> op_bwd_;
    std::vector<double> normals_;  ///< a replica's normal draws
    double vcomp_ = 0, vcomm_ = 0;
    std::vector<std::pair<double, int>> order_;
    // sparse path
    std::vector<double> cmax_;
    double ctot_ = 0, log_term_ = 0;
    std::vector<std::uint8_t> rep_state_;  ///< 0 untouched, 1 pending, 2 resolved or pruned
    std::vector<int> rep_of_;              ///< group gi's replica, gi % dp
    std::vector<std::pair<double, int>> pending_;
    std::vector<std::pair<double, double>> knap_;
    std::vector<int> drawn_;
    static constexpr int kLanes = detail::kLanes;
    std::vector<LaneOp> lane_ops_;
    bool lane_ops_built_ = false;
    std::vector<double> rounds_pre_, rounds_work_;               ///< draw_rounds' buffers
    std::vector<std::uint8_t> prefix_in_, body_in_, suffix_in_;  ///< ops with an input
    UnrolledRounds unrolled_, single_;  ///< K steady rounds and one, for draw_rounds
    std::vector<double> pool_;          ///< take_normals' pool: [pool_at_, pool_end_) unused
    size_t pool_at_ = 0, pool_end_ = 0, pool_left_ = 0, rounds_normals_ = 0;
    std::vector<double> lane_cost_, lane_tr_;
    std::vector<double> draw_fin_, draw_mean_, draw_sd_, draw_g_;  ///< draw()'s scratch
    std::vector<std::int32_t> last_slots_;  ///< of each stage's last op in lane_ops_
    int lane_reps_[kLanes] = {};
    std::vector<double> lane_g_, cost_comp_, cost_comm_;  ///< batch_makespan's scratch
    std::vector<std::int32_t> rep_rev_;     ///< rep's revealed groups: rep_rev_[rep * p + k]
    std::vector<int> rep_nrev_;             ///< k < rep_nrev_[rep]
    std::vector<std::int32_t> rep_groups_;  ///< a replica's groups, to reveal
    struct Resolved {
        double mk, b;
        int rep;
    };
    std::vector<Resolved> resolved_;
};

/// The step's shared routing drift (step_model.hpp): (S - 1) x routing_shared_s, S = E[Z | w] /
/// E[Z] at this sample's drift vector w (its own routing stream); 0 without drift.
double routing_shift(const StepModel& m, std::uint64_t seed, std::uint64_t point_index,
                     std::uint32_t id) {
    if (!m.routing_shared.active() || !(m.routing_shared_s > 0)) return 0.0;
    Stream rs(seed, hash_mix(point_index, 0x5d1f7ULL), StreamKind::routing, id);
    return (drawn_shared_factor(m.routing_law, rs) - 1.0) * m.routing_shared_s;
}

}  // namespace

std::vector<double> monte_carlo(const StepModel& m, const PersistentLayout& layout, int samples,
                                std::uint64_t seed, std::uint64_t point_index, McSampler sampler,
                                McPath path) {
    // every sample is a step on its own cluster realization: the marginal distribution
    StepSampler sample(m);
    sample.path_ = path;
    std::vector<double> g, gk;
    std::vector<double> out(samples);
    const bool sparse = sampler == McSampler::automatic && StepSampler::sparse(m, layout);
    std::optional<LazyGroupFactors> lazy;
    if (sparse) lazy.emplace(m, layout);
    for (int k = 0; k < samples; ++k) {
        const auto id = static_cast<std::uint32_t>(k);
        Stream rng(seed, point_index, StreamKind::sample, id);
        if (sparse) {
            lazy->reset(Stream(seed, point_index, StreamKind::cluster, id));
            out[k] = sample(*lazy, rng);
        } else {
            cluster_factors(m, layout, seed, point_index, id, g, gk);
            out[k] = sample(gk, rng);
        }
        out[k] += routing_shift(m, seed, point_index, id);
    }
    return out;
}

PruningCheck check_monte_carlo_pruning(const StepModel& m, const PersistentLayout& layout,
                                       int samples, std::uint64_t seed, std::uint64_t point_index) {
    PruningCheck check;
    StepSampler sample(m);
    sample.check_ = &check;
    std::vector<double> g, gk;
    const bool sparse = StepSampler::sparse(m, layout);
    std::optional<LazyGroupFactors> lazy;
    if (sparse) lazy.emplace(m, layout);
    for (int k = 0; k < samples; ++k) {
        const auto id = static_cast<std::uint32_t>(k);
        Stream rng(seed, point_index, StreamKind::sample, id);
        if (sparse) {
            lazy->reset(Stream(seed, point_index, StreamKind::cluster, id));
            sample(*lazy, rng);
        } else {
            cluster_factors(m, layout, seed, point_index, id, g, gk);
            sample(gk, rng);
        }
    }
    return check;
}

void monte_carlo_clusters(const StepModel& m, const PersistentLayout& layout, int clusters,
                          int per_cluster, std::uint64_t seed, std::uint64_t point_index,
                          std::vector<double>& mean_s, std::vector<double>& var_s2) {
    StepSampler sample(m);
    std::vector<double> g, gk;
    const bool sparse = StepSampler::sparse(m, layout);
    std::optional<LazyGroupFactors> lazy;
    if (sparse) lazy.emplace(m, layout);
    mean_s.assign(clusters, 0.0);
    var_s2.assign(clusters, 0.0);
    for (int c = 0; c < clusters; ++c) {
        // cluster ids and sample ids above those of monte_carlo's marginal samples
        const auto id = static_cast<std::uint32_t>(0x800000u + c);
        // one realization for all its steps (revealed lazily on the sparse path)
        if (sparse) {
            lazy->reset(Stream(seed, point_index, StreamKind::cluster, id));
        } else {
            cluster_factors(m, layout, seed, point_index, id, g, gk);
        }
        double s1 = 0, s2 = 0;
        for (int j = 0; j < per_cluster; ++j) {
            Stream rng(seed, point_index, StreamKind::sample, id + 0x10000u * (j + 1));
            const double x = (sparse ? sample(*lazy, rng) : sample(gk, rng)) +
                             routing_shift(m, seed, point_index, id + 0x10000u * (j + 1));
            s1 += x;
            s2 += x * x;
        }
        mean_s[c] = s1 / per_cluster;
        var_s2[c] =
            per_cluster > 1 ? std::max(0.0, (s2 - s1 * s1 / per_cluster) / (per_cluster - 1)) : 0.0;
    }
}

}  // namespace prism::stochastic::detail
