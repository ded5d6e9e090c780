// Stream's batched Philox and bulk normals, the tabulated healthy-factor quantile, and the lazy
// factors' pool, against independent truths: Random123's own Philox4x32, a block-at-a-time
// re-implementation of the stream, the standard normal CDF, the exact quantile, and exact
// uniformity / history independence of the pool picks.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <Random123/philox.h>

#include "src/stochastic/detail/persistent.hpp"
#include "src/stochastic/distribution.hpp"
#include "src/stochastic/random.hpp"
#include "tests/src/stochastic/test_profiles.hpp"

namespace prism {
namespace {

using stochastic::Stream;
using stochastic::StreamKind;
namespace detail = stochastic::detail;

TEST(McStream, PhiloxBatchMatchesRandom123) {
    // every variant the CPU runs, counters with ctr[0] wrapping past 2^32, against the library
    const detail::PhiloxVariant variants[] = {
        detail::PhiloxVariant::best, detail::PhiloxVariant::scalar, detail::PhiloxVariant::avx2,
        detail::PhiloxVariant::avx512};
    Stream pick(1, 1, StreamKind::test, 99);
    int ran = 0;
    for (const auto v : variants) {
        for (int t = 0; t < 200; ++t) {
            std::uint32_t ctr[4] = {pick.bits(), pick.bits(), pick.bits(), pick.bits()};
            if (t == 0) ctr[0] = 0xFFFFFFFFu - 3;  // wraps inside the batch
            const std::uint32_t key[2] = {pick.bits(), pick.bits()};
            std::uint32_t out[4 * stochastic::detail::kPhiloxBatch];
            if (!detail::philox4x32_batch_variant(v, ctr, key, out)) break;  // not on this CPU
            if (t == 0) ++ran;
            const r123::Philox4x32::key_type k = {{key[0], key[1]}};
            for (int l = 0; l < detail::kPhiloxBatch; ++l) {
                const r123::Philox4x32::ctr_type c = {
                    {ctr[0] + static_cast<std::uint32_t>(l), ctr[1], ctr[2], ctr[3]}};
                const auto b = r123::Philox4x32{}(c, k);
                for (int j = 0; j < 4; ++j) {
                    ASSERT_EQ(out[4 * l + j], b.v[j])
                        << "variant " << static_cast<int>(v) << " block " << l << " word " << j;
                }
            }
        }
    }
    EXPECT_GE(ran, 2);  // best and scalar at least
}

/// The stream as it was before the batch buffer: one Philox block at a time.
class BlockStream {
  public:
    BlockStream(std::uint64_t seed, std::uint64_t point_index, StreamKind kind, std::uint32_t id) {
        key_ = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
        ctr_ = {{0u, (static_cast<std::uint32_t>(kind) << 24) ^ id,
                 static_cast<std::uint32_t>(point_index),
                 static_cast<std::uint32_t>(point_index >> 32)}};
    }
    double uniform() {
        if (used_ > 2) refill();
        const std::uint64_t hi = block_.v[used_++] >> 5;
        const std::uint64_t lo = block_.v[used_++] >> 6;
        return (static_cast<double>((hi << 26) | lo) + 0.5) * 0x1.0p-53;
    }
    std::uint32_t bits() {
        if (used_ >= 4) refill();
        return block_.v[used_++];
    }

  private:
    void refill() {
        block_ = r123::Philox4x32{}(ctr_, key_);
        ++ctr_.v[0];
        used_ = 0;
    }
    r123::Philox4x32::key_type key_{};
    r123::Philox4x32::ctr_type ctr_{};
    r123::Philox4x32::ctr_type block_{};
    int used_ = 4;
};

TEST(McStream, BufferedStreamGivesTheBlockByBlockSequence) {
    // random interleavings of bits() and uniform() (odd word counts make uniform() skip a word)
    // over many buffer refills: the same values as one block at a time
    Stream order(3, 3, StreamKind::test, 3);
    for (std::uint32_t id = 0; id < 20; ++id) {
        Stream s(77, 123456789012ULL, StreamKind::sample, id);
        BlockStream ref(77, 123456789012ULL, StreamKind::sample, id);
        for (int i = 0; i < 3000; ++i) {
            if (order.below(3) == 0) {
                ASSERT_EQ(s.bits(), ref.bits()) << id << " " << i;
            } else {
                ASSERT_EQ(s.uniform(), ref.uniform()) << id << " " << i;
            }
        }
    }
}

TEST(McStream, Normals32EqualsSuccessiveNormal32AndIsStandardNormal) {
    // bulk fills of every length 0..300 (across buffer refills and wedge / tail rejections),
    // after an odd number of words: bit for bit the values of successive normal32() calls, and
    // the stream left at the same place; 400,000 of them against Phi (KS, 0.1% critical value)
    Stream a(5, 6, StreamKind::test, 7), b(5, 6, StreamKind::test, 7);
    a.bits();
    b.bits();
    std::vector<double> bulk, all;
    for (size_t n = 0; n <= 300; ++n) {
        bulk.assign(n, 0.0);
        a.normals32(bulk.data(), n);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(bulk[i], b.normal32()) << n << " " << i;
        ASSERT_EQ(a.bits(), b.bits());
    }
    bulk.assign(400000, 0.0);
    a.normals32(bulk.data(), bulk.size());
    std::sort(bulk.begin(), bulk.end());
    double d = 0;
    const auto n = static_cast<double>(bulk.size());
    for (size_t i = 0; i < bulk.size(); ++i) {
        const double f = stochastic::normal_cdf(bulk[i]);
        d = std::max({d, std::fabs(f - static_cast<double>(i) / n),
                      std::fabs(f - static_cast<double>(i + 1) / n)});
    }
    EXPECT_LT(d, 1.95 / std::sqrt(n));
    // the tails are reached (the slow paths ran)
    EXPECT_LT(bulk.front(), -3.8);
    EXPECT_GT(bulk.back(), 3.8);
}

TEST(McStream, ZigguratRectanglesVariantsGiveTheSameBits) {
    // the vector variant against the scalar one on random words (every length 0..64, strides
    // 1 and 8): the same values bit for bit and the same rejected indices
    Stream s(11, 12, StreamKind::test, 13);
    std::uint32_t w[64];
    for (int rep = 0; rep < 3000; ++rep) {
        for (auto& x : w) x = s.bits();
        const std::size_t n = static_cast<std::size_t>(rep) % 65;
        for (const std::size_t stride : {std::size_t{1}, std::size_t{8}}) {
            std::vector<double> a(64 * stride, 0.0), b(64 * stride, 0.0);
            std::uint32_t ra[64], rb[64];
            std::size_t na = 0, nb = 0;
            detail::ziggurat_rectangles_variant(detail::PhiloxVariant::scalar, w, n, a.data(),
                                                stride, ra, na);
            if (!detail::ziggurat_rectangles_variant(detail::PhiloxVariant::avx512, w, n, b.data(),
                                                     stride, rb, nb)) {
                GTEST_SKIP() << "no avx512f";
            }
            ASSERT_EQ(na, nb);
            for (std::size_t i = 0; i < na; ++i) ASSERT_EQ(ra[i], rb[i]);
            for (std::size_t i = 0; i < 64 * stride; ++i) {
                // rejected entries are replaced by the caller: compare the accepted ones, and
                // nothing written past n
                if (i % stride == 0 && i / stride < n &&
                    std::find(ra, ra + na, i / stride) != ra + na) {
                    continue;
                }
                ASSERT_EQ(a[i], b[i]) << rep << " " << i;
                if (i % stride != 0 || i / stride >= n) {
                    ASSERT_EQ(a[i], 0.0);
                }
            }
        }
    }
}

TEST(McStream, NormalsBatchIsIidStandardNormal) {
    // normals_batch: 400,000 values (fills of varying lengths, after an odd number of words)
    // against Phi (KS, 0.1% critical value), the tails reached, lag-1 correlation within 4
    // standard errors; a stride changes only where the values go
    Stream a(5, 6, StreamKind::test, 8), b(5, 6, StreamKind::test, 8);
    a.bits();
    b.bits();
    std::vector<double> all, one, strided;
    for (std::size_t n = 0; all.size() < 400000; n = (n * 7 + 13) % 997) {
        one.assign(n, 0.0);
        strided.assign(3 * n, 0.0);
        a.normals_batch(one.data(), n);
        b.normals_batch(strided.data(), n, 3);
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(one[i], strided[3 * i]) << n << " " << i;
        ASSERT_EQ(a.bits(), b.bits());
        all.insert(all.end(), one.begin(), one.end());
    }
    const auto n = static_cast<double>(all.size());
    double c = 0, v = 0;
    for (std::size_t i = 0; i + 1 < all.size(); ++i) {
        c += all[i] * all[i + 1];
        v += all[i] * all[i];
    }
    EXPECT_LT(std::fabs(c / v), 4.0 / std::sqrt(n));
    std::sort(all.begin(), all.end());
    double d = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
        const double f = stochastic::normal_cdf(all[i]);
        d = std::max({d, std::fabs(f - static_cast<double>(i) / n),
                      std::fabs(f - static_cast<double>(i + 1) / n)});
    }
    EXPECT_LT(d, 1.95 / std::sqrt(n));
    EXPECT_LT(all.front(), -3.8);
    EXPECT_GT(all.back(), 3.8);
}

TEST(McStream, ExponentialZigguratTablesHaveEqualLayers) {
    // every layer's area is v: the strips i >= 1 (x[i] (f[i + 1] - f[i])) and the base strip
    // plus the tail (r f(r) + f(r) = x[0] f(r)); the top one, left over by the recursion from
    // r and v, to 2e-12 relative (a layer chosen with probability 2e-12 / 256 < 1e-14 off)
    const auto& z = detail::exp_ziggurat();
    using T = detail::ExpZigguratTables;
    EXPECT_NEAR(z.x[0] * z.f[1], T::kV, 1e-15);
    EXPECT_NEAR(T::kR * std::exp(-T::kR) + std::exp(-T::kR), T::kV, 1e-15);
    for (int i = 1; i < T::kLayers; ++i) {
        const double tol = i + 1 < T::kLayers ? 1e-13 : 2e-12;
        EXPECT_NEAR(z.x[i] * (z.f[i + 1] - z.f[i]), T::kV, tol * T::kV) << i;
        EXPECT_GT(z.x[i], z.x[i + 1]) << i;
    }
}

TEST(McStream, ExponentialIsIidStandardExponential) {
    // 400,000 draws (after an odd number of words) against 1 - e^-x (KS, 0.1% critical value),
    // mean and variance 1, the tail beyond r reached, lag-1 correlation within 4 standard errors
    Stream a(5, 6, StreamKind::test, 9);
    a.bits();
    std::vector<double> all(400000);
    for (auto& x : all) x = a.exponential();
    const auto n = static_cast<double>(all.size());
    double s1 = 0, s2 = 0, c = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
        s1 += all[i];
        s2 += all[i] * all[i];
        if (i + 1 < all.size()) c += (all[i] - 1) * (all[i + 1] - 1);
    }
    EXPECT_NEAR(s1 / n, 1.0, 4.0 / std::sqrt(n));
    EXPECT_NEAR(s2 / n - (s1 / n) * (s1 / n), 1.0, 4.0 * std::sqrt(8.0 / n));
    EXPECT_LT(std::fabs(c / n), 4.0 / std::sqrt(n));
    std::sort(all.begin(), all.end());
    double d = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
        const double f = -std::expm1(-all[i]);
        d = std::max({d, std::fabs(f - static_cast<double>(i) / n),
                      std::fabs(f - static_cast<double>(i + 1) / n)});
    }
    EXPECT_LT(d, 1.95 / std::sqrt(n));
    EXPECT_GT(all.front(), 0.0);
    EXPECT_GT(all.back(), detail::ExpZigguratTables::kR + 1.0);
}

TEST(McStream, ExponentialsEqualsSuccessiveExponential) {
    // bulk fills of every length 0..300 (across buffer refills, skipped block ends and tail /
    // wedge draws), after 0 to 3 words: bit for bit the values of successive exponential()
    // calls, and the stream left at the same place
    for (int skip = 0; skip < 4; ++skip) {
        Stream a(5, 6, StreamKind::test, 11), b(5, 6, StreamKind::test, 11);
        for (int i = 0; i < skip; ++i) {
            a.bits();
            b.bits();
        }
        std::vector<double> bulk;
        for (size_t n = 0; n <= 300; ++n) {
            bulk.assign(n, 0.0);
            a.exponentials(bulk.data(), n);
            for (size_t i = 0; i < n; ++i) {
                ASSERT_EQ(bulk[i], b.exponential()) << skip << " " << n << " " << i;
            }
            ASSERT_EQ(a.bits(), b.bits());
        }
    }
}

TEST(McHealthyQuantile, TableMatchesTheExactQuantileToRelative1em13) {
    // H^-1(e^-y) by table against the exact function at random y = 2^u, u uniform on
    // (-44, 8) (beyond the table's range at both ends), for several spatial laws and group
    // sizes; and non-decreasing in ln p along a fine grid (to rounding)
    struct Law {
        DistKind kind;
        double cv;
        int n;
        int points;
    };
    const Law laws[] = {
        {DistKind::normal, 0.03, 8, 200000},    {DistKind::normal, 0.03, 4, 100000},
        {DistKind::normal, 0.3, 1, 100000},     {DistKind::normal, 1.0, 8, 100000},
        {DistKind::lognormal, 0.05, 8, 100000}, {DistKind::lognormal, 0.5, 64, 100000},
        {DistKind::gamma, 0.05, 8, 5000}};
    Stream s(1, 2, StreamKind::test, 3);
    for (const auto& law : laws) {
        DistributionSpec spec;
        spec.kind = law.kind;
        spec.cv = law.cv;
        const stochastic::Distribution d(spec);
        const detail::HealthyQuantile h(d, law.n);
        EXPECT_LE(h.max_rel_error(), detail::HealthyQuantile::kTolerance);
        EXPECT_GT(h.cells_kept(), law.kind == DistKind::gamma ? 300 : 330);
        double worst = 0;
        for (int i = 0; i < law.points; ++i) {
            const double log_p = -std::exp2(-44.0 + 52.0 * s.uniform());
            const double want = h.exact(log_p);
            worst = std::max(worst, std::fabs(h(log_p) - want) / std::fabs(want));
        }
        EXPECT_LT(worst, 1e-13) << static_cast<int>(law.kind) << " " << law.cv << " " << law.n;
        if (law.kind == DistKind::gamma) continue;
        double prev = -HUGE_VAL;
        for (double y = 0x1.0p-41; y < 0x1.0p7; y *= 1.0001) {
            const double g = h(-y);  // decreasing in y
            if (prev != -HUGE_VAL) {
                ASSERT_LE(g, prev * (1 + 1e-13)) << y;
            }
            prev = g;
        }
    }
}

TEST(McLazyGroupFactors, PoolPicksAreUniformAndFreeOfHistory) {
    // Healthy cluster (no slow units): the first extend puts the top factor on a uniformly
    // random group (chi-square over 64 groups, 0.1% critical value), and a realization depends
    // only on its stream: the same stream after any history gives the same factors.
    const auto hw = testing::test_hardware();
    testing::ProfileShape shape;
    shape.tp = 8;
    shape.stages = 4;
    shape.dp = 16;
    shape.microbatches = 4;
    const auto profile = testing::make_profile(shape);
    DesignPoint point;
    point.tp = 8;
    point.pp = 4;
    point.dp = 16;
    const auto var = testing::prism_like(0.0);
    const auto model = detail::build_step_model(profile, point, hw, {}, var);
    const auto layout = detail::make_layout(model, point, hw, {});
    ASSERT_TRUE(detail::LazyGroupFactors::supports(model, layout));
    detail::LazyGroupFactors lg(model, layout), fresh(model, layout);
    constexpr int kGroups = 64;
    constexpr int kReps = 64000;
    std::vector<double> count(kGroups, 0.0), count_last(kGroups, 0.0);
    for (int k = 0; k < kReps; ++k) {
        lg.reset(Stream(8, 8, StreamKind::cluster, static_cast<std::uint32_t>(k)));
        lg.extend(1);
        count[lg.revealed()[0]] += 1;
        // most of the pool revealed: the last picks come from a small, shuffled pool
        lg.extend(kGroups - 2);
        for (int gi = 0; gi < kGroups; ++gi) {
            if (lg.in_pool(gi)) count_last[gi] += 1;
        }
    }
    for (const auto* c : {&count, &count_last}) {
        double chi2 = 0;
        const double e = kReps / double(kGroups);
        for (const double v : *c) chi2 += (v - e) * (v - e) / e;
        EXPECT_LT(chi2, 103.4);  // chi-square(63) at 0.1%
    }
    for (std::uint32_t k = 0; k < 50; ++k) {
        const Stream s(9, 9, StreamKind::cluster, k);
        lg.reset(Stream(9, 9, StreamKind::cluster, k + 1000));  // some history
        lg.extend(static_cast<int>(k % 7) * 5);
        const std::int32_t col[4] = {1, 17, 33, 49};
        lg.cap_top(col, 4, 1);
        lg.reset(s);
        fresh.reset(s);
        lg.extend(40);
        fresh.extend(40);
        lg.reveal_all();
        fresh.reveal_all();
        ASSERT_EQ(lg.revealed(), fresh.revealed()) << k;
        ASSERT_EQ(lg.g(), fresh.g()) << k;
    }
}

}  // namespace
}  // namespace prism
