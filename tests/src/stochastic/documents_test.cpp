// Variable-length document packing (docs/document_lengths.md): the law of a packed sequence's
// sum of squared document lengths S against hand calculations and brute-force packing (own
// draws, own packing loop), and the documents' term in both evaluators against each other and
// against a brute-force slowest DP rank.

#include "src/stochastic/documents.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "src/model/deterministic.hpp"
#include "src/stochastic/step_distribution.hpp"
#include "tests/src/model/model_test_helpers.hpp"
#include "tests/src/stochastic/ks.hpp"

namespace {

using prism::DesignPoint;
using prism::Experiment;
using prism::stochastic::DocumentPacking;

/// `count` S of consecutive sequences of one stream of documents of lengths max(1, ceil(X)), X
/// lognormal (median, sigma), drawn with the standard library and packed here (independent of
/// documents.cpp); the first 64 sequences dropped.
std::vector<double> brute_force_squares(double median, double sigma, int seq, int count,
                                        std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> z(0.0, 1.0);
    std::vector<double> out;
    long long room = seq;
    double s = 0;
    int burn = 64;
    while (static_cast<int>(out.size()) < count) {
        long long l =
            std::max(1LL, static_cast<long long>(std::ceil(median * std::exp(sigma * z(rng)))));
        while (l > 0) {
            const long long take = std::min(l, room);
            s += double(take) * double(take);
            room -= take;
            l -= take;
            if (room == 0) {
                if (burn > 0) {
                    --burn;
                } else {
                    out.push_back(s);
                }
                s = 0;
                room = seq;
            }
        }
    }
    return out;
}

/// Mean of f(x) over x with its standard error by batch means (100 batches: consecutive
/// sequences of one stream share the document cut between them).
struct BatchMean {
    double mean = 0, se = 0;
};
template <class F>
BatchMean batch_mean(const std::vector<double>& x, F f) {
    constexpr int kBatches = 100;
    const std::size_t per = x.size() / kBatches;
    std::vector<double> means(kBatches, 0.0);
    for (int b = 0; b < kBatches; ++b) {
        for (std::size_t i = 0; i < per; ++i) means[b] += f(x[b * per + i]) / double(per);
    }
    double m = 0, v = 0;
    for (double y : means) m += y / kBatches;
    for (double y : means) v += (y - m) * (y - m) / (kBatches - 1);
    return {m, std::sqrt(v / kBatches)};
}

TEST(DocumentPacking, PackedSquaresMatchAHandCalculation) {
    // documents 3, 5, 2, 6 in sequences of 4: [3 | 1], [4], [2 | 2], [4] (the 5 cut after one
    // token, the 6 after two): S = 9 + 1, 16, 4 + 4, 16
    const std::vector<std::int64_t> docs{3, 5, 2, 6};

    const std::vector<double> s = prism::stochastic::packed_squares(docs, 4);

    EXPECT_EQ(s, (std::vector<double>{10, 16, 8, 16}));
}

TEST(DocumentPacking, EqualLengthDocumentsGiveTheClosedForm) {
    // every document seq tokens long: the window starts at a uniform offset r in 1..seq of the
    // document it opens in, S = r^2 + (seq - r)^2, E[S] = (2 seq^2 + 3 seq + 1) / 3 - seq - 1 +
    // ... summed here term by term
    const int seq = 1000;
    const DocumentPacking d{double(seq), 0.0, seq};
    double m1 = 0, m2 = 0;
    for (int r = 1; r <= seq; ++r) {
        const double s = double(r) * r + double(seq - r) * (seq - r);
        m1 += s / seq;
        m2 += s * s / seq;
    }

    const auto m = prism::stochastic::packed_square_moments(d);

    EXPECT_NEAR(m.mean / m1, 1.0, 1e-12);
    EXPECT_NEAR(m.second / m2, 1.0, 1e-12);
    EXPECT_NEAR(prism::stochastic::mean_document_length(d), seq, 1e-12);
}

TEST(DocumentPacking, MomentsMatchBruteForcePacking) {
    // short, medium and long-tailed laws, on exact tokens (seq 2,048) and on cells of 2 tokens
    // (seq 8,192); E[S] and E[S^2] within 4.5 standard errors of 200,000 brute-force sequences
    // (batch means) and 0.3% (the cells' discretization at 8,192)
    struct Case {
        double median, sigma;
        int seq;
    };
    for (const Case c : {Case{300, 1.2, 2048}, Case{2000, 1.5, 2048}, Case{150, 0.5, 2048},
                         Case{1000, 1.8, 8192}}) {
        const DocumentPacking d{c.median, c.sigma, c.seq};
        const std::vector<double> x = brute_force_squares(c.median, c.sigma, c.seq, 200000, 7);
        const BatchMean s1 = batch_mean(x, [](double s) { return s; });
        const BatchMean s2 = batch_mean(x, [](double s) { return s * s; });

        const auto m = prism::stochastic::packed_square_moments(d);

        const double tol = c.seq > 4096 ? 0.003 : 0.0;
        EXPECT_NEAR(m.mean, s1.mean, 4.5 * s1.se + tol * s1.mean) << c.median << " " << c.sigma;
        EXPECT_NEAR(m.second, s2.mean, 4.5 * s2.se + tol * s2.mean) << c.median << " " << c.sigma;
        // the test is sharp: the brute force's errors are below 1% of the moments
        EXPECT_LT(s2.se, 0.01 * s2.mean);
    }
}

TEST(DocumentPacking, ExactDrawsFollowTheAnalyticMoments) {
    // the library's exact draws (Monte Carlo's table) against the recursion's moments:
    // within 4.5 batch standard errors of 100,000 draws
    const DocumentPacking d{600, 1.4, 4096};
    const std::vector<double> x = prism::stochastic::draw_packed_squares(d, 100000, 11);
    const BatchMean s1 = batch_mean(x, [](double s) { return s; });
    const BatchMean s2 = batch_mean(x, [](double s) { return s * s; });

    const auto m = prism::stochastic::packed_square_moments(d);

    EXPECT_NEAR(m.mean, s1.mean, 4.5 * s1.se);
    EXPECT_NEAR(m.second, s2.mean, 4.5 * s2.se);
}

/// The helpers' small model at seq 4,096 with fused attention, 256 sequences per step, dp
/// replicas of microbatch 1 (256 / dp microbatches each), no pipeline.
Experiment packed_experiment() {
    Experiment e = prism::test::small_experiment();
    e.model.seq = 4096;
    e.training.flash_attention = true;
    e.training.global_batch_seqs = 256;
    return e;
}

DesignPoint data_parallel(int dp) {
    DesignPoint p;
    p.dp = dp;
    p.microbatch = 1;
    return p;
}

prism::DocumentLengths long_tailed() {
    prism::DocumentLengths d;
    d.concat = true;
    d.median_tokens = 800;
    d.sigma = 1.6;
    return d;
}

prism::StepDistribution step_law(const Experiment& e, const DesignPoint& p, prism::Method method,
                                 int samples = 1000) {
    const prism::DeterministicResult r = prism::evaluate_deterministic(e, p);
    prism::EvaluationSpec eval;
    eval.method = method;
    eval.samples = samples;
    eval.sensitivity = false;
    return prism::step_distribution(r.profile, p, e.hardware[0], e.cluster, e.variability, eval,
                                    e.seed, 0);
}

/// Seconds of the document-masked attention of one microbatch (forward and backward, every
/// layer) in a profile without pipeline.
double documents_seconds(const prism::StepProfile& profile) {
    double a = 0;
    for (const auto* list : {&profile.layer_forward, &profile.layer_backward}) {
        for (const auto& seg : *list) {
            for (const auto& op : seg.ops) {
                if (op.documents) a += op.time_s;
            }
        }
    }
    return a * profile.layers_per_chunk;
}

TEST(DocumentPacking, UnsetTermLeavesTheModelUnchangedBitForBit) {
    // packing "causal" (a law given but not used) is the default: the same profile, the same
    // step time, and without [variability] noise both evaluators give it as a point mass
    Experiment plain = packed_experiment();
    Experiment causal = plain;
    causal.variability.documents = long_tailed();
    causal.variability.documents.concat = false;
    const DesignPoint p = data_parallel(8);

    const prism::DeterministicResult a = prism::evaluate_deterministic(plain, p);
    const prism::DeterministicResult b = prism::evaluate_deterministic(causal, p);

    EXPECT_TRUE(a.profile == b.profile);
    EXPECT_EQ(a.step_time_s, b.step_time_s);
    for (const auto method : {prism::Method::analytic, prism::Method::montecarlo}) {
        const auto d = step_law(causal, p, method, 100);
        EXPECT_EQ(d.p50_s, a.step_time_s);
        EXPECT_EQ(d.std_s, 0.0);
    }
}

TEST(DocumentPacking, MaskedAttentionCostsTheMeanSumOfSquares) {
    // the fused attention's FLOPs at E[S] / seq^2 of full causal attention: where compute-bound
    // (flagged) its time scales by exactly that; the other ops are untouched
    Experiment plain = packed_experiment();
    Experiment packed = plain;
    packed.variability.documents = long_tailed();
    const DesignPoint p = data_parallel(8);
    const DocumentPacking d{800, 1.6, 4096};
    const double factor = prism::stochastic::packed_square_moments(d).mean / (4096.0 * 4096.0);

    const prism::StepProfile a = prism::evaluate_deterministic(plain, p).profile;
    const prism::StepProfile b = prism::evaluate_deterministic(packed, p).profile;

    ASSERT_EQ(a.layer_forward.size(), b.layer_forward.size());
    int flagged = 0;
    for (std::size_t i = 0; i < a.layer_forward.size(); ++i) {
        const auto& x = a.layer_forward[i].ops[0];
        const auto& y = b.layer_forward[i].ops[0];
        if (y.documents) {
            ++flagged;
            EXPECT_NEAR(y.time_s / x.time_s, factor, 1e-12);
        } else {
            EXPECT_EQ(y.time_s, x.time_s);
        }
    }
    EXPECT_EQ(flagged, 1);
    EXPECT_LT(factor, 0.9);  // a quarter of the square saved (most tokens sit in long documents)
    EXPECT_EQ(b.documents_sequences, 1);
}

TEST(DocumentPacking, AnalyticAndMonteCarloAgreeOnTheSlowestRank) {
    // the documents the only noise, 1 replica of 256 microbatches, 8 of 32 and 16 of 16: Monte
    // Carlo (each sequence's S resampled from exact packings, 10,000 steps) against the
    // analytic CDF (the replica's sum of S convolved from the same packings' law): KS within
    // the evaluators' budget of 0.02 (DESIGN.md section 3; a 10,000-sample empirical CDF is
    // 0.0136 off its own with probability 5%). Measured at 20,000 samples: 0.005-0.008. (At dp
    // 32, 8 microbatches, the step is nearly an atom: some rank draws sequences that are each
    // one document's piece, S = seq^2, the bound; KS does not apply to an atom the analytic
    // grid smooths, the mean does: SlowestRankMatchesBruteForceAtDp8And64)
    for (const int dp : {1, 8, 16}) {
        Experiment e = packed_experiment();
        e.variability.documents = long_tailed();
        const DesignPoint p = data_parallel(dp);
        const prism::DeterministicResult r = prism::evaluate_deterministic(e, p);

        std::vector<double> x = prism::stochastic::monte_carlo_samples(
            r.profile, p, e.hardware[0], e.cluster, e.variability, 10000, 5, 0);
        std::sort(x.begin(), x.end());
        const std::vector<double> cdf = prism::stochastic::analytic_cdf(
            r.profile, p, e.hardware[0], e.cluster, e.variability, x);

        EXPECT_LT(prism::testing::ks_against_cdf(cdf), 0.02) << "dp " << dp;
        EXPECT_GT(x[9500], x[500]);
    }
}

TEST(DocumentPacking, AnalyticFollowsMonteCarloThroughAPipeline) {
    // pp 2 and 4 (1F1B, 32 microbatches, 8 replicas): the analytic evaluator folds the stages'
    // attention along the critical path (the fill and drain microbatches are the dwelling
    // stage's too: correlated), Monte Carlo runs the schedule op by op with one W per
    // microbatch on every stage. KS within the 0.02 budget at 10,000 samples (measured at
    // 20,000: 0.005 and 0.010; treated as independent stages, 0.026 and 0.10)
    for (const int pp : {2, 4}) {
        Experiment e = packed_experiment();
        e.variability.documents = long_tailed();
        DesignPoint p = data_parallel(8);
        p.pp = pp;
        const prism::DeterministicResult r = prism::evaluate_deterministic(e, p);

        std::vector<double> x = prism::stochastic::monte_carlo_samples(
            r.profile, p, e.hardware[0], e.cluster, e.variability, 10000, 5, 0);
        std::sort(x.begin(), x.end());
        const std::vector<double> cdf = prism::stochastic::analytic_cdf(
            r.profile, p, e.hardware[0], e.cluster, e.variability, x);

        EXPECT_LT(prism::testing::ks_against_cdf(cdf), 0.02) << "pp " << pp;
    }
}

TEST(DocumentPacking, SlowestRankMatchesBruteForceAtDp8And64) {
    // without a pipeline a replica is its microbatches in series: step = deterministic + max
    // over the dp replicas of a sum_m (S_m / E[S] - 1), a the microbatch's masked attention.
    // Brute force (own packing, 2,000 steps) against both evaluators' mean step: within 4
    // standard errors plus 2% of the documents' excess (the evaluators' S law is their own
    // 65,536 exact packings', whose mean they anchor at E[S]). A normal law for the replica's
    // sum fails this at dp 64 (4 microbatches: +36%, the sum being bounded by 4 seq^2)
    for (const int dp : {8, 64}) {
        Experiment e = packed_experiment();
        e.variability.documents = long_tailed();
        const DesignPoint p = data_parallel(dp);
        const prism::DeterministicResult r = prism::evaluate_deterministic(e, p);
        const double a = documents_seconds(r.profile);
        const int mb = r.profile.microbatches;
        const std::vector<double> pool = brute_force_squares(800, 1.6, 4096, 400000, 3);
        double mean_s = 0;
        for (double s : pool) mean_s += s / double(pool.size());
        std::mt19937_64 rng(17);
        std::uniform_int_distribution<std::size_t> pick(0, pool.size() - 1);
        constexpr int kSteps = 2000;
        double m1 = 0, m2 = 0;
        for (int k = 0; k < kSteps; ++k) {
            double slowest = -1e300;
            for (int rep = 0; rep < dp; ++rep) {
                double sum = 0;
                for (int m = 0; m < mb; ++m) sum += pool[pick(rng)] / mean_s - 1.0;
                slowest = std::max(slowest, a * sum);
            }
            m1 += slowest / kSteps;
            m2 += slowest * slowest / kSteps;
        }
        const double se = std::sqrt(std::max(0.0, m2 - m1 * m1) / kSteps);

        for (const auto method : {prism::Method::analytic, prism::Method::montecarlo}) {
            const auto d = step_law(e, p, method, 2000);
            EXPECT_NEAR(d.mean_s - r.step_time_s, m1, 4 * se + 0.02 * m1)
                << "dp " << dp << (method == prism::Method::analytic ? " analytic" : " mc");
        }
        EXPECT_GT(m1, 0.0);
    }
}

}  // namespace
