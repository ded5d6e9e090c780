#include "src/stochastic/detail/analytic/stage_curves.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <unordered_map>

#include "src/stochastic/detail/analytic/common.hpp"
#include "src/stochastic/detail/hash.hpp"
#include "src/stochastic/documents.hpp"

namespace prism::stochastic::detail::ssta {

namespace {

/// The schedule's op classes (PeriodicPipeline::class_of) at mean durations (g = g_ref,
/// R = r_bar): thread-local rows. Every microbatch's op of a class takes the same time, so the
/// passes cost the same for 16 microbatches or 1,024.
struct MeanRows {
    const double* dur;   ///< class durations at (g_ref, r_bar)
    const double* comp;  ///< class compute means (the part scaled by g)
    const double* comm;  ///< class communication means (the part scaled by R)
    double xfer;         ///< every transfer at r_bar
    double dl0;          ///< the dataloader's mean at r_bar: stage 0's start
};

MeanRows mean_rows(const StepModel& m, double g_ref, double r_bar) {
    const auto& pipe = *m.periodic;
    const auto classes = static_cast<size_t>(pipe.classes());
    thread_local std::vector<double> dur, comp, comm;
    grow(dur, classes);
    grow(comp, classes);
    grow(comm, classes);
    for (int st = 0; st < m.stages; ++st) {
        for (int ch = 0; ch < m.chunks; ++ch) {
            const int j = st * m.chunks + ch;
            for (const bool backward : {false, true}) {
                const ChunkCost& k = backward ? m.bwd[j] : m.fwd[j];
                const auto cls = static_cast<size_t>(pipe.class_of(st, ch, backward));
                dur[cls] = k.mean(g_ref, r_bar);
                comp[cls] = k.lin_comp;  // the chord over the range of g (step_model.hpp)
                comm[cls] = k.lin_comm;
            }
        }
    }
    return {dur.data(), comp.data(), comm.data(), m.p2p.mean(1.0, r_bar),
            m.dataloader.mean(1.0, r_bar)};
}

/// The contents of ONE critical path at g_ref into c.rest (per stage, in units of its compute)
/// and the stage it dwells on into c.smax. g_ref is at least 1.01: at g = 1 several paths tie
/// in interleaved schedules, and per-stage derivatives taken one stage at a time may come from
/// different paths, whose sum overstates a common slowdown; 1.02 until the effective group
/// factor lowered the typical factor to ~1.01-1.02, where 1.02 put the reference above the
/// mean: 405B sweep's interleaved points KS 0.03-0.07 against 0.007-0.037 at 1.01.
void critical_contents(const StepModel& m, const MeanRows& rows, StageCurves& c) {
    const int p = m.stages;
    std::vector<double> content(p, 0.0);
    m.periodic->critical_path_content(rows.dur, rows.comp, rows.xfer, rows.dl0, content.data());
    double best = -1;
    c.smax = p - 1;
    for (int st = 0; st < p; ++st) {
        const double cs = m.stage_comp_s[st];
        c.rest[st] = cs > 0 ? content[st] / cs : 0.0;
        if (content[st] > best) {
            best = content[st];
            c.smax = st;
        }
    }
}

/// A point of a stage's makespan curve phi_s: d = g - g_ref, its value and right slope.
struct Pt {
    double d, phi, slope;
};

/// One multi-lane pass over the schedule (PeriodicPipeline::makespan_stage_lanes): lanes
/// (stage, delta) in stage order, after the reference lane (delta 0) when with_ref. The lanes'
/// makespans and slopes (the stage's content on the lane's critical path) in thread-local rows.
struct LanePass {
    const double* end;
    const double* slope;
};

LanePass run_lanes(const StepModel& m, const MeanRows& rows,
                   const std::vector<std::pair<int, double>>& lanes, bool with_ref) {
    thread_local std::vector<std::int32_t> first;
    thread_local std::vector<double> delta, end, slope;
    const int p = m.stages;
    first.assign(p + 1, 0);
    delta.assign(with_ref ? 1 : 0, 0.0);
    size_t li = 0;
    for (int st = 0; st < p; ++st) {
        first[st] = static_cast<std::int32_t>(delta.size());
        for (; li < lanes.size() && lanes[li].first == st; ++li) delta.push_back(lanes[li].second);
    }
    first[p] = static_cast<std::int32_t>(delta.size());
    grow(end, delta.size());
    grow(slope, delta.size());
    m.periodic->makespan_stage_lanes(rows.dur, rows.comp, rows.xfer, rows.dl0, first.data(),
                                     delta.data(), end.data(), slope.data());
    return {end.data(), slope.data()};
}

/// The tangent points of every stage's curve phi_s over d in [0, top], by the sandwich method
/// for convex functions: value and right slope at both ends, then at the intersection of
/// adjacent tangent lines until the function meets them there (a segment is confirmed) or the
/// chord lies within `tol` of them; the stages go as lanes of one pass per round. Also the
/// makespan at g_ref, t_ref.
std::vector<std::vector<Pt>> tangent_points(const StepModel& m, const MeanRows& rows,
                                            const StageCurves& c, double top, double eps,
                                            double noise, double& t_ref) {
    struct Interval {
        int st;
        Pt a, b;
    };
    const int p = m.stages;
    std::vector<std::vector<Pt>> pts(p);
    std::vector<Interval> open, next_open;
    // (stage, delta), in stage order: the stages are visited in order, and the open intervals
    // stay in it
    std::vector<std::pair<int, double>> lanes;
    // the first pass: per stage, the value and the slope at the top (the slope is the stage's
    // content on the lane's critical path: a tangent there)
    for (int st = 0; st < p; ++st) {
        if (!(m.stage_comp_s[st] > 0)) continue;
        lanes.push_back({st, top});
    }
    LanePass pass = run_lanes(m, rows, lanes, true);
    t_ref = pass.end[0];
    // the tolerance: far below the noise and the grid step
    const double tol = std::max(1e-2 * noise, 1e-10 * t_ref);
    for (int st = 0, k = 1; st < p; ++st) {
        if (!(m.stage_comp_s[st] > 0)) continue;
        const double f_top = pass.end[k] - t_ref;
        const double s_top = pass.slope[k];
        ++k;
        // at 0 the critical path's line: a tangent (a lower bound of the right slope, equal to
        // it unless other paths tie there, whose segment a probe then finds)
        const Pt a{0.0, 0.0, c.rest[st] * m.stage_comp_s[st]};
        const Pt b{top, f_top, s_top};
        pts[st] = {a, b};
        open.push_back({st, a, b});
    }
    // rounds: the intersection of the tangents of each open interval
    // At most kRounds probing passes: on the accuracy matrix and the quickstart's points one
    // gives the results of eight to the printed digits; the tangents left in an interval still
    // open are a lower bound of the term, off by at most its chord gap.
    constexpr int kRounds = 1;
    for (int round = 0; round < kRounds && !open.empty(); ++round) {
        lanes.clear();
        std::vector<double> at;  // the intersection probed in each interval of `probe`
        next_open.clear();
        std::vector<Interval> probe;
        for (const auto& iv : open) {
            const Pt& a = iv.a;
            const Pt& b = iv.b;
            const double cs = m.stage_comp_s[iv.st];
            if (!(b.slope - a.slope > 1e-9 * cs)) continue;  // one segment
            double x = (b.phi - b.slope * b.d - a.phi + a.slope * a.d) / (a.slope - b.slope);
            x = std::clamp(x, a.d, b.d);
            const double line = a.phi + a.slope * (x - a.d);
            const double chord = a.phi + (b.phi - a.phi) * (x - a.d) / (b.d - a.d);
            if (!(chord - line > tol) || b.d - a.d < 4 * eps) continue;
            x = std::min(x, b.d - 2 * eps);
            probe.push_back(iv);
            at.push_back(x);
            lanes.push_back({iv.st, x});
        }
        if (probe.empty()) break;
        pass = run_lanes(m, rows, lanes, false);  // probe i's lane is i
        for (size_t i = 0; i < probe.size(); ++i) {
            const auto& iv = probe[i];
            const double x = at[i];
            const double fx = pass.end[i] - t_ref;
            const Pt px{x, fx, pass.slope[i]};
            const double line = std::max(iv.a.phi + iv.a.slope * (x - iv.a.d),
                                         iv.b.phi + iv.b.slope * (x - iv.b.d));
            // the two tangents are segments meeting at x
            if (fx <= line + 0.1 * tol) continue;
            pts[iv.st].push_back(px);
            next_open.push_back({iv.st, iv.a, px});
            next_open.push_back({iv.st, px, iv.b});
        }
        open.swap(next_open);
    }
    return pts;
}

/// Each stage's term as the max of lines in d = g - g_ref (c.lines): smax all its tangents,
/// the others their tangents steeper than the critical path's, less it.
void stage_lines(const StepModel& m, const std::vector<std::vector<Pt>>& pts, StageCurves& c) {
    for (int st = 0; st < m.stages; ++st) {
        const double cs = m.stage_comp_s[st];
        if (!(cs > 0)) continue;
        const double base = st == c.smax ? 0.0 : c.rest[st] * cs;
        std::vector<std::pair<double, double>> ls;
        for (const auto& pt : pts[st]) {
            // slopes are path contents (sums of the ops' compute): a difference below 1e-4 c is
            // taken as the same segment (it moves the term by < 1e-4 c over the range)
            const double s = pt.slope - base;
            if (!(s > 1e-4 * cs)) continue;
            ls.push_back({s, pt.phi - pt.slope * pt.d});
        }
        // one line per slope (within 1e-3 c; the highest), by increasing slope
        std::sort(ls.begin(), ls.end());
        std::vector<std::pair<double, double>> hull;
        for (const auto& l : ls) {
            if (!hull.empty() && l.first - hull.back().first <= 1e-3 * cs) {
                hull.back().second = std::max(hull.back().second, l.second);
                continue;
            }
            hull.push_back(l);
        }
        auto& stage_lines = c.lines[st];
        for (const auto& l : hull) stage_lines.push_back({1.0 / l.first, l.second});
    }
}

/// beta: smax's content on the path family of the stage whose term reaches highest at the job's
/// typical largest factor d_typ (the families pass smax alike: once each way in 1F1B). A
/// family's content on smax changes along its stage's curve: in interleaved schedules the path
/// that dwells on a stage slowed by a few percent still passes smax in full, and only far up
/// (tens of percent) briefly, so beta is taken where the step's largest factors are, not at the
/// top of the range: the median of the largest spatial factor over the job's GPUs, or a slow
/// group's where slow units are active (they set the step's tail).
double family_beta(const StepModel& m, const MeanRows& rows, const StageCurves& c, double sfmax,
                   double n_all, double top, double eps) {
    const int p = m.stages;
    const double d_typ =
        std::clamp(std::max(m.group_factor(0, m.spatial.max_quantile(0.5, n_all * p * m.replicas)),
                            sfmax * c.eg) -
                       c.g_ref,
                   eps, top);
    int best = -1;
    double best_v = -1e300;
    for (int st = 0; st < p; ++st) {
        if (st == c.smax || c.lines[st].empty()) continue;
        double at = -1e300;
        for (const auto& [inv, b] : c.lines[st]) at = std::max(at, d_typ / inv + b);
        if (at > best_v) {
            best_v = at;
            best = st;
        }
    }
    double beta = 0;
    if (best >= 0) {
        // one lane: stage `best` slowed by d_typ, its critical path's compute on smax
        const auto& pipe = *m.periodic;
        const auto classes = static_cast<size_t>(pipe.classes());
        thread_local std::vector<double> dk, w, tr;
        grow(dk, classes);
        grow(w, classes);
        tr.assign(classes, rows.xfer);
        for (size_t k = 0; k < classes; ++k) {
            const int st = pipe.stage_of_class(static_cast<int>(k));
            dk[k] = rows.dur[k] + (st == best ? d_typ * rows.comp[k] : 0.0);
            w[k] = st == c.smax ? rows.comp[k] : 0.0;
        }
        timing::PeriodicPipeline::Lanes lane;
        lane.lanes = 1;
        lane.op_s = dk.data();
        lane.transfer_s = tr.data();
        lane.start_s = &rows.dl0;
        lane.weight = w.data();
        double end = 0;
        pipe.makespans(lane, &end, &beta);
    }
    return beta;
}

}  // namespace

void makespans_at(const StepModel& m, const StageCurves& c, const double* r, std::size_t lanes,
                  double* end) {
    // the durations are op_comp + r op_comm (ChunkCost::mean at g = 1)
    std::array<double, 4> tr{}, start{};
    for (size_t k = 0; k < lanes; ++k) {
        tr[k] = m.p2p.mean(1.0, r[k]);
        start[k] = m.dataloader.mean(1.0, r[k]);
    }
    m.periodic->makespan_affine_lanes(c.op_comp, c.op_comm, r, tr.data(), start.data(), lanes, end);
}

namespace {

/// Everything stage_curves reads of the model, as exact values: points of a sweep that differ
/// only in what the schedule does not see (ZeRO 0-2, the DP sync, the optimizer, the run) give
/// the same key and share one computation (the same bits: the same inputs in the same order).
std::vector<double> curves_key(const StepModel& m, double eg, double vg) {
    std::vector<double> k;
    k.reserve(16 + 8 * m.fwd.size());
    auto id = [](std::uint64_t v) {
        double d = 0;
        static_assert(sizeof d == sizeof v);
        std::memcpy(&d, &v, sizeof d);
        return d;
    };
    for (const double x :
         {double(m.stages), double(m.chunks), double(m.microbatches), double(m.replicas),
          double(m.dp), double(m.lockstep), double(m.group_gpus),
          double(m.persistent_deterministic), m.slow_probability, m.slow_factor, m.regime.mean(),
          id(m.spatial_id), id(m.effective ? m.effective->id() : 0), eg, vg, m.documents_w_var,
          m.documents_table_mean_s2, double(m.documents_sequences)}) {
        k.push_back(x);
    }
    k.insert(k.end(), m.documents_stage_s.begin(), m.documents_stage_s.end());
    auto cost = [&k](const ChunkCost* c) {
        k.insert(k.end(), {c->comp_mean, c->comp_var, c->comm_mean, c->comm_var, c->lin_comp,
                           c->lin_comm, c->lin_comp_var, c->lin_comm_var, double(c->mixed.size())});
        for (const auto& s : c->mixed) {
            k.insert(k.end(), {s.comp_mean, s.comp_var, s.comm_mean, s.comm_var, double(s.repeat)});
        }
    };
    for (const ChunkCost* c : {&m.p2p, &m.dataloader}) cost(c);
    for (size_t j = 0; j < m.fwd.size(); ++j) {
        for (const ChunkCost* c : {&m.fwd[j], &m.bwd[j]}) cost(c);
    }
    return k;
}

/// The documents' term of one replica (step_model.hpp): the critical path passes rest[st]
/// microbatches' worth of stage st, each microbatch (W - 1) documents_stage_s longer, W = S /
/// (b E[S]) iid per microbatch with mean 1 (the profile's attention is at E[S]). Taken as a_eff
/// sum over the replica's m microbatches of (W - 1), a_eff^2 m = the variance below (exact at
/// pp = 1, where rest = m: a replica is its microbatches in series), whose law is that
/// of the sum of the replica's m b sequences' S (centered_sum_law, from the exact packings).
void documents_term(const StepModel& m, StageCurves& c) {
    // the stage the path dwells on, smax, passes every microbatch; the other stages' content C
    // (fill and drain) belongs to the first and the last microbatch, which smax passes too:
    // Var(D) / Var(W) = sum_m (a_smax + c_m)^2 = rest_smax a_smax^2 + 2 a_smax C + C^2 / 2
    const double a_max = m.documents_stage_s[std::size_t(c.smax)];
    double cross = 0;
    for (int st = 0; st < m.stages; ++st) {
        if (st != c.smax) cross += c.rest[std::size_t(st)] * m.documents_stage_s[std::size_t(st)];
    }
    const double v =
        c.rest[std::size_t(c.smax)] * a_max * a_max + 2.0 * a_max * cross + 0.5 * cross * cross;
    const int b = m.documents_sequences;
    const double a_eff = std::sqrt(v / m.microbatches);
    const double scale = a_eff / (b * m.documents_table_mean_s2);
    const auto law = centered_sum_law(m.documents_table, m.microbatches * b);
    c.doc_x.resize(law->x.size());
    c.doc_w = law->w;
    for (std::size_t k = 0; k < law->x.size(); ++k) {
        c.doc_x[k] = scale * law->x[k];
        c.doc_var += c.doc_w[k] * c.doc_x[k] * c.doc_x[k];
        c.doc_span = std::max(c.doc_span, std::fabs(c.doc_x[k]));
    }
    c.var_eps += c.doc_var;
}

StageCurves compute_stage_curves(const StepModel& m, const GroupLaw& base_law) {
    StageCurves c;
    const int p = m.stages;
    c.r_bar = m.regime.mean();
    c.rest.assign(p, 1.0);
    c.lines.assign(p, {});
    moments_of_g(m, base_law, c.eg, c.vg);
    c.g_ref = std::max(c.eg, 1.01);
    const MeanRows rows = mean_rows(m, c.g_ref, c.r_bar);
    c.op_comp = rows.comp;
    c.op_comm = rows.comm;
    critical_contents(m, rows, c);
    double var_sum = 0;
    for (int st = 0; st < p; ++st) {
        var_sum += c.rest[st] *
                   (c.eg * c.eg * m.stage_var_comp[st] + c.r_bar * c.r_bar * m.stage_var_comm[st]);
    }
    c.var_eps = var_sum + m.dataloader.var(1.0, c.r_bar) + 2.0 * (p - 1) * m.p2p.var(1.0, c.r_bar);
    if (m.documents_active) documents_term(m, c);
    c.w_random =
        !m.persistent_deterministic &&
        std::any_of(m.stage_comp_s.begin(), m.stage_comp_s.end(), [](double cs) { return cs > 0; });
    if (!c.w_random) return c;
    for (int st = 0; st < p; ++st) {
        if (st == c.smax) continue;
        c.mu_o += c.rest[st] * m.stage_comp_s[st] * (c.eg - c.g_ref);
        c.var_o += c.rest[st] * c.rest[st] * m.stage_comp_s[st] * m.stage_comp_s[st] * c.vg;
    }
    // the relevant range of g: up to the slowest group's 1 - 1e-15 quantile
    const double sfmax = std::max(1.0, m.slow_probability > 0 ? m.slow_factor : 1.0);
    const double n_all = m.group_gpus * (m.lockstep ? m.dp : 1);
    const double ghi = m.spatial.max_quantile(1 - 1e-15, n_all) * sfmax;
    const double top = std::max(ghi - c.g_ref, 0.05);
    const double eps = 1e-6 * top;
    double t_ref = 0;
    const auto pts = tangent_points(m, rows, c, top, eps, c.noise_sd(), t_ref);
    const double d_ref = t_ref - makespan_at(m, c, c.r_bar);  // T(g_ref) - T(g = 1) at r_bar
    stage_lines(m, pts, c);
    c.mu_o += d_ref;
    if (p > 1) c.beta = family_beta(m, rows, c, sfmax, n_all, top, eps);
    return c;
}

}  // namespace

StageCurves stage_curves(const StepModel& m, const GroupLaw& base_law) {
    // a per-thread cache of recent points' curves, keyed by everything they read
    struct Entry {
        std::vector<double> key;
        StageCurves curves;
    };
    thread_local std::unordered_map<std::uint64_t, Entry> cache;
    double eg = 1, vg = 0;
    moments_of_g(m, base_law, eg, vg);
    std::vector<double> key = curves_key(m, eg, vg);
    std::uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (const double x : key) h = hash_mix(h, hash_bits(x));
    auto it = cache.find(h);
    if (it != cache.end() && it->second.key == key) {
        StageCurves c = it->second.curves;
        // the per-class rows are this thread's scratch: the current point's again
        const MeanRows rows = mean_rows(m, c.g_ref, c.r_bar);
        c.op_comp = rows.comp;
        c.op_comm = rows.comm;
        return c;
    }
    StageCurves c = compute_stage_curves(m, base_law);
    if (cache.size() >= 4096) cache.clear();
    cache[h] = Entry{std::move(key), c};
    return c;
}

}  // namespace prism::stochastic::detail::ssta
