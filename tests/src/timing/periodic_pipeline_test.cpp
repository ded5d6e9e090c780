#include "src/timing/periodic_pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "src/timing/flat_pipeline.hpp"

namespace prism::timing {
namespace {

// The truth is the op-by-op DAG (FlatPipeline, itself tested against evaluate_pipeline and the
// closed forms): the periodic evaluation must give its makespans within kRel relative. Both
// add the same durations along the same longest path; they differ only in rounding (the
// periodic one works relative to a moving reference and multiplies one cycle's offset by the
// cycles skipped), a few ulps of the makespan: 1e-12 leaves a margin of ~1e3 ulps.
constexpr double kRel = 1e-12;

/// Per-class durations of one random schedule: unequal stages, chunks and directions.
struct Durations {
    std::vector<double> op_s;        ///< [class]
    std::vector<double> transfer_s;  ///< [class]: into an op of that class
    double start_s = 0;
};

Durations random_durations(const PeriodicPipeline& pipe, std::mt19937_64& rng, double spread,
                           double transfer) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    Durations d;
    d.op_s.resize(pipe.classes());
    d.transfer_s.resize(pipe.classes());
    for (int c = 0; c < pipe.classes(); ++c) {
        const double base = c % 2 == 1 ? 2.0 : 1.0;  // backward ~ 2 x forward
        d.op_s[c] = base * (1.0 + spread * (u(rng) - 0.5));
        d.transfer_s[c] = transfer * u(rng);
    }
    d.start_s = 0.3 * u(rng);
    return d;
}

/// The op-by-op DAG's makespan with the same durations (per op from per class).
double dag_makespan(const PipelineShape& shape, const Durations& d) {
    const FlatPipeline flat(shape);
    std::vector<double> op(flat.size()), tr(flat.size()), fin(flat.size());
    for (size_t i = 0; i < flat.size(); ++i) {
        const auto& o = flat.ops()[i];
        const int c = 2 * (o.stage * shape.chunks + o.chunk) + (o.backward ? 1 : 0);
        op[i] = d.op_s[c];
        tr[i] = d.transfer_s[c];
    }
    return flat.makespan(op.data(), tr.data(), d.start_s, fin.data());
}

double periodic_makespan(const PeriodicPipeline& pipe, const Durations& d) {
    PeriodicPipeline::Lanes l;
    l.lanes = 1;
    l.op_s = d.op_s.data();
    l.transfer_s = d.transfer_s.data();
    l.start_s = &d.start_s;
    double end = 0;
    pipe.makespans(l, &end);
    return end;
}

std::vector<PipelineShape> shapes_up_to(int max_m) {
    std::vector<PipelineShape> out;
    for (int p : {1, 2, 3, 4, 7, 8, 16}) {
        for (int m = 1; m <= max_m; m = m < 40 ? m + 1 : m * 2) out.push_back({p, 1, m});
        for (int v : {2, 3}) {
            if (p == 1) continue;
            for (int m = p; m <= max_m; m = m < 12 * p ? m + p : m * 2) out.push_back({p, v, m});
        }
    }
    return out;
}

TEST(PeriodicPipeline, EqualsTheOpByOpDagOnRandomStageTimes) {
    std::mt19937_64 rng(23);
    int skipping = 0, cases = 0;
    for (const auto& shape : shapes_up_to(256)) {
        const PeriodicPipeline pipe(shape);
        for (const double spread : {0.0, 0.4, 1.5}) {
            for (const double transfer : {0.0, 0.05, 0.5}) {
                const auto d = random_durations(pipe, rng, spread, transfer);

                const double want = dag_makespan(shape, d);
                const double got = periodic_makespan(pipe, d);

                ASSERT_NEAR(got, want, kRel * want)
                    << "p=" << shape.stages << " v=" << shape.chunks << " m=" << shape.microbatches
                    << " spread=" << spread << " transfer=" << transfer;
                ++cases;
                skipping += PeriodicPipeline::last_skipped_rounds() > 0 ? 1 : 0;
            }
        }
    }
    // the long schedules do skip (else this would only test the op-by-op path)
    EXPECT_GT(skipping, cases / 4);
}

TEST(PeriodicPipeline, EqualsTheOpByOpDagAtTheBenchmarksSize) {
    // bench/pipeline_bench's shape (pp 32, 1,024 microbatches), plain and interleaved, with
    // unequal stages and transfers: the cycles skipped there are exact to rounding too
    std::mt19937_64 rng(1024);
    for (const int v : {1, 3}) {
        const PipelineShape shape{32, v, 1024};
        const PeriodicPipeline pipe(shape);
        for (const double transfer : {0.0, 0.3}) {
            const auto d = random_durations(pipe, rng, 1.0, transfer);

            const double want = dag_makespan(shape, d);
            const double got = periodic_makespan(pipe, d);

            EXPECT_NEAR(got, want, kRel * want) << "v=" << v << " transfer=" << transfer;
            EXPECT_GT(PeriodicPipeline::last_skipped_rounds(), 0);
        }
    }
}

/// The op-by-op inputs of one lane: per-op durations of stage `slowed` moved by delta * scaled.
struct OpInputs {
    std::vector<double> op, tr;
};

OpInputs per_op(const FlatPipeline& flat, const PipelineShape& shape, const double* op_s,
                const double* scaled_s, int slowed, double delta, double transfer) {
    OpInputs x{std::vector<double>(flat.size()), std::vector<double>(flat.size(), transfer)};
    for (size_t i = 0; i < flat.size(); ++i) {
        const auto& o = flat.ops()[i];
        const int c = 2 * (o.stage * shape.chunks + o.chunk) + (o.backward ? 1 : 0);
        x.op[i] = o.stage == slowed ? op_s[c] + delta * scaled_s[c] : op_s[c];
    }
    return x;
}

TEST(PeriodicPipeline, StageLanesEqualTheDagWithTheCriticalPathsSlope) {
    // truth: FlatPipeline::makespan per lane and the slope of FlatPipeline's own lanes (the
    // content of the critical path it walks back); random durations have one critical path,
    // so the two evaluations take the same one and its content agrees to rounding
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (const PipelineShape shape :
         {PipelineShape{1, 1, 9}, PipelineShape{4, 1, 40}, PipelineShape{8, 1, 200},
          PipelineShape{4, 2, 48}, PipelineShape{8, 3, 96}, PipelineShape{16, 1, 512}}) {
        const PeriodicPipeline pipe(shape);
        const FlatPipeline flat(shape);
        std::vector<double> op(pipe.classes()), sc(pipe.classes());
        for (int c = 0; c < pipe.classes(); ++c) {
            sc[c] = (c % 2 == 1 ? 2.0 : 1.0) * (0.8 + 0.4 * u(rng));
            op[c] = sc[c] * (1.0 + 0.1 * u(rng));
        }
        const double transfer = 0.05 * u(rng), start = 0.2;
        std::vector<std::int32_t> first{1};
        std::vector<double> delta{0.0};  // lane 0: no stage
        std::vector<int> lane_stage{-1};
        for (int st = 0; st < shape.stages; ++st) {
            for (int j = 0; j < 1 + st % 3; ++j) {
                delta.push_back(0.6 * u(rng));
                lane_stage.push_back(st);
            }
            first.push_back(static_cast<std::int32_t>(delta.size()));
        }
        std::vector<double> end(delta.size()), slope(delta.size(), -1.0);

        pipe.makespan_stage_lanes(op.data(), sc.data(), transfer, start, first.data(), delta.data(),
                                  end.data(), slope.data());

        if (shape.microbatches >= 200) {
            EXPECT_GT(PeriodicPipeline::last_skipped_rounds(), 0) << "p=" << shape.stages;
        }
        for (size_t k = 0; k < delta.size(); ++k) {
            const auto x =
                per_op(flat, shape, op.data(), sc.data(), lane_stage[k], delta[k], transfer);
            std::vector<double> fin(flat.size()), scaled(flat.size());
            const double want = flat.makespan(x.op.data(), x.tr.data(), start, fin.data());
            EXPECT_NEAR(end[k], want, kRel * want) << "p=" << shape.stages << " lane " << k;
            for (size_t i = 0; i < flat.size(); ++i) {
                const auto& o = flat.ops()[i];
                scaled[i] = sc[2 * (o.stage * shape.chunks + o.chunk) + (o.backward ? 1 : 0)];
            }
            // FlatPipeline's slope of the same lane (delta 0 on the durations x: one lane)
            std::vector<std::int32_t> lf(shape.stages + 1, 0);
            for (int st = 0; st <= shape.stages; ++st) lf[st] = st > lane_stage[k] ? 1 : 0;
            if (lane_stage[k] < 0) lf.assign(shape.stages + 1, 0);
            double e1 = 0, s1 = 0;
            const double zero = 0;
            if (lane_stage[k] >= 0) {
                flat.makespan_stage_lanes(x.op.data(), scaled.data(), x.tr.data(), start, lf.data(),
                                          &zero, &e1, &s1);
            }
            EXPECT_NEAR(slope[k], s1, 1e-9 * std::max(1.0, s1))
                << "p=" << shape.stages << " v=" << shape.chunks << " lane " << k;
        }
    }
}

TEST(PeriodicPipeline, AffineLanesEqualTheDag) {
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (const PipelineShape shape : {PipelineShape{2, 1, 300}, PipelineShape{8, 2, 128}}) {
        const PeriodicPipeline pipe(shape);
        const FlatPipeline flat(shape);
        std::vector<double> a(pipe.classes()), b(pipe.classes());
        for (int c = 0; c < pipe.classes(); ++c) {
            a[c] = u(rng);
            b[c] = 0.3 * u(rng);
        }
        const std::vector<double> r{0.6, 1.0, 1.7, 2.5, 4.0, 0.9}, tr{0.0, 0.1, 0.05, 0.3, 0, 0.2},
            start{0.0, 0.2, 1.0, 0.1, 0.5, 0.0};
        std::vector<double> end(r.size());

        pipe.makespan_affine_lanes(a.data(), b.data(), r.data(), tr.data(), start.data(), r.size(),
                                   end.data());

        for (size_t k = 0; k < r.size(); ++k) {
            std::vector<double> d(pipe.classes());
            for (int c = 0; c < pipe.classes(); ++c) d[c] = a[c] + r[k] * b[c];
            const auto x = per_op(flat, shape, d.data(), d.data(), -1, 0.0, tr[k]);
            std::vector<double> fin(flat.size());
            const double want = flat.makespan(x.op.data(), x.tr.data(), start[k], fin.data());
            EXPECT_NEAR(end[k], want, kRel * want) << "lane " << k;
        }
    }
}

TEST(PeriodicPipeline, CriticalPathContentEqualsTheDagsCriticalPath) {
    // truth: FlatPipeline::critical_path's ops summed per stage (random durations: one path)
    std::mt19937_64 rng(13);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (const PipelineShape shape :
         {PipelineShape{3, 1, 70}, PipelineShape{8, 1, 300}, PipelineShape{4, 3, 64}}) {
        const PeriodicPipeline pipe(shape);
        const FlatPipeline flat(shape);
        std::vector<double> op(pipe.classes()), w(pipe.classes());
        for (int c = 0; c < pipe.classes(); ++c) {
            op[c] = (c % 2 == 1 ? 2.0 : 1.0) * (0.9 + 0.2 * u(rng));
            w[c] = u(rng);
        }
        std::vector<double> content(shape.stages, -1.0);

        const double end =
            pipe.critical_path_content(op.data(), w.data(), 0.02, 0.1, content.data());

        const auto x = per_op(flat, shape, op.data(), op.data(), -1, 0.0, 0.02);
        std::vector<double> fin(flat.size()), want(shape.stages, 0.0);
        const auto path = flat.critical_path(x.op.data(), x.tr.data(), 0.1, fin.data());
        for (const auto i : path) {
            const auto& o = flat.ops()[i];
            want[o.stage] += w[2 * (o.stage * shape.chunks + o.chunk) + (o.backward ? 1 : 0)];
        }
        const double makespan = flat.makespan(x.op.data(), x.tr.data(), 0.1, fin.data());
        EXPECT_NEAR(end, makespan, kRel * makespan);
        for (int st = 0; st < shape.stages; ++st) {
            EXPECT_NEAR(content[st], want[st], 1e-9 * std::max(1.0, want[st])) << "stage " << st;
        }
    }
}

TEST(PeriodicPipeline, SlopesAtTiesAreSubgradients) {
    // Equal stages tie many paths of different content: any of them is a valid answer, as long
    // as its slope is a subgradient of the convex makespan in delta: T(delta + h) >= T(delta) +
    // h slope for h of either sign (truth: the op-by-op DAG at delta +- h).
    for (const PipelineShape shape : {PipelineShape{4, 1, 64}, PipelineShape{4, 2, 32}}) {
        const PeriodicPipeline pipe(shape);
        const FlatPipeline flat(shape);
        std::vector<double> op(pipe.classes()), sc(pipe.classes());
        for (int c = 0; c < pipe.classes(); ++c) op[c] = sc[c] = c % 2 == 1 ? 2.0 : 1.0;
        std::vector<std::int32_t> first(shape.stages + 1);
        std::vector<double> delta;
        for (int st = 0; st < shape.stages; ++st) {
            first[st] = static_cast<std::int32_t>(delta.size());
            for (const double dl : {0.0, 0.25}) delta.push_back(dl);
        }
        first[shape.stages] = static_cast<std::int32_t>(delta.size());
        std::vector<double> end(delta.size()), slope(delta.size());

        pipe.makespan_stage_lanes(op.data(), sc.data(), 0.1, 0.0, first.data(), delta.data(),
                                  end.data(), slope.data());

        for (size_t k = 0; k < delta.size(); ++k) {
            const int st = static_cast<int>(k) / 2;
            auto at = [&](double dl) {
                const auto x = per_op(flat, shape, op.data(), sc.data(), st, dl, 0.1);
                std::vector<double> fin(flat.size());
                return flat.makespan(x.op.data(), x.tr.data(), 0.0, fin.data());
            };
            const double h = 1e-3, t0 = at(delta[k]);
            EXPECT_GE(at(delta[k] + h), t0 + h * slope[k] - 1e-9 * t0) << "lane " << k;
            EXPECT_GE(at(delta[k] - h), t0 - h * slope[k] - 1e-9 * t0) << "lane " << k;
        }
    }
}

TEST(PeriodicPipeline, RoundsExpandToTheScheduleOpForOp) {
    // truth: the schedule itself (FlatPipeline): prefix + rounds x body + suffix hold every op
    // of it once, with the same stage predecessor and input (by (stage, chunk, direction,
    // microbatch)); the own-forward edge is the one left out
    for (const PipelineShape shape : {PipelineShape{1, 1, 20}, PipelineShape{5, 1, 30},
                                      PipelineShape{4, 2, 40}, PipelineShape{3, 4, 27}}) {
        const PeriodicPipeline pipe(shape);
        const auto& pr = pipe.program();
        ASSERT_GT(pr.rounds, 2) << "p=" << shape.stages;
        using Key = std::tuple<int, int, bool, int>;  // stage, chunk, backward, microbatch
        auto key_of = [&](std::int32_t cls, int mb) {
            const int v = shape.chunks;
            return Key{cls / (2 * v), (cls / 2) % v, cls % 2 == 1, mb};
        };
        std::vector<Key> keys;  // in program order
        std::vector<std::pair<Key, Key>> edges;
        const Key none{-1, -1, false, -1};
        for (size_t i = 0; i < pr.prefix.size(); ++i) {
            keys.push_back(key_of(pr.prefix[i].cls, pr.prefix_mb[i]));
        }
        for (size_t i = 0; i < pr.prefix.size(); ++i) {
            for (const auto r : {pr.prefix[i].prev, pr.prefix[i].in}) {
                edges.push_back({keys[i], r < 0 ? none : keys[r]});
            }
        }
        const auto d = static_cast<std::int32_t>(pr.state_size());
        const auto nb = static_cast<std::int32_t>(pr.body.size());
        std::vector<Key> prev_round(pr.live.size());
        for (size_t k = 0; k < pr.live.size(); ++k) {
            prev_round[k] = pr.entry[k] >= 0 ? keys[pr.entry[k]] : none;
        }
        for (std::int64_t j = 0; j < pr.rounds; ++j) {
            std::vector<Key> round(pr.body.size());
            for (size_t b = 0; b < pr.body.size(); ++b) {
                round[b] = key_of(pr.body[b].cls,
                                  pr.body_mb[b] + static_cast<int>(j) * pr.microbatch_step);
                for (const auto r : {pr.body[b].prev, pr.body[b].in}) {
                    edges.push_back({round[b], r < 0   ? none
                                               : r < d ? prev_round[r]
                                                       : round[r - d]});
                }
            }
            keys.insert(keys.end(), round.begin(), round.end());
            for (size_t k = 0; k < pr.live.size(); ++k) prev_round[k] = round[pr.live[k]];
        }
        std::vector<Key> suffix(pr.suffix.size());
        for (size_t i = 0; i < pr.suffix.size(); ++i) {
            suffix[i] = key_of(pr.suffix[i].cls, pr.suffix_mb[i]);
            for (const auto r : {pr.suffix[i].prev, pr.suffix[i].in}) {
                edges.push_back({suffix[i], r < 0   ? none
                                            : r < d ? prev_round[r]
                                                    : suffix[r - d - nb]});
            }
        }
        keys.insert(keys.end(), suffix.begin(), suffix.end());

        const FlatPipeline flat(shape);
        std::set<Key> want_keys;
        std::multiset<std::pair<Key, Key>> want_edges;
        auto fkey = [&](std::int32_t i) {
            if (i < 0) return none;
            const auto& o = flat.ops()[i];
            return Key{o.stage, o.chunk, o.backward, o.microbatch};
        };
        for (size_t i = 0; i < flat.size(); ++i) {
            want_keys.insert(fkey(static_cast<std::int32_t>(i)));
            want_edges.insert({fkey(static_cast<std::int32_t>(i)), fkey(flat.ops()[i].stage_prev)});
            want_edges.insert({fkey(static_cast<std::int32_t>(i)), fkey(flat.ops()[i].input)});
        }
        EXPECT_EQ(keys.size(), flat.size());
        EXPECT_EQ(std::set<Key>(keys.begin(), keys.end()), want_keys);
        const std::multiset<std::pair<Key, Key>> got_edges(edges.begin(), edges.end());
        EXPECT_EQ(got_edges, want_edges);
    }
}

}  // namespace
}  // namespace prism::timing
