// Stream's batched Philox and bulk normals, and the lazy factors' pool, against independent
// truths: Random123's own Philox4x32, a block-at-a-time re-implementation of the stream, the
// standard normal CDF, and exact uniformity / history independence of the pool picks.

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
