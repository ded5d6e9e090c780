// Philox4x32-10 for several consecutive counters at once (Stream's block buffer).
//
// The same arithmetic as r123::Philox4x32 (Random123 philox.h: 10 rounds of two 32 x 32 -> 64
// bit products, key bumped by the Weyl constants between rounds), one counter per vector lane.
// Integer products, xors and additions are exact, so every instruction set gives the library's
// bits (mc_sampler_test checks every variant against r123::Philox4x32).

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "src/stochastic/random.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's avx512 intrinsics trip -Wuninitialized on their own undefined-vector idiom
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define PRISM_PHILOX_X86 1
#endif

namespace prism::stochastic::detail {

namespace {

constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // PHILOX_M4x32_0, _1
constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // PHILOX_W32_0, _1
constexpr std::size_t kRectWords = 4 * kPhiloxBatch;           // ziggurat_rectangles' words

void batch_scalar(const std::uint32_t ctr[4], const std::uint32_t key[2], std::uint32_t* out) {
    const r123::Philox4x32::key_type k = {{key[0], key[1]}};
    r123::Philox4x32::ctr_type c = {{ctr[0], ctr[1], ctr[2], ctr[3]}};
    for (int l = 0; l < kPhiloxBatch; ++l) {
        const auto b = r123::Philox4x32{}(c, k);
        for (int j = 0; j < 4; ++j) out[4 * l + j] = b.v[j];
        ++c.v[0];
    }
}

#ifdef PRISM_PHILOX_X86
static_assert(kPhiloxBatch == 16, "the vector variants hold 16 counters");

// Both variants keep each 32-bit word in the low half of a 64-bit lane: the multiply
// (vpmuludq) reads only the low halves, so the high halves may hold garbage (xors of product
// halves) that never reaches a low half. Independent chains (2 x 8 or 4 x 4 counters) hide the
// latency of the round's multiply -> shift -> xor chain.

/// Lanes to blocks: c0..c3 (8 words each, counters 0..7) to out[4 l + j], a 4 x 8 transpose.
__attribute__((target("avx512f"))) void store_blocks(__m512i q0, __m512i q1, __m512i q2, __m512i q3,
                                                     std::uint32_t* out) {
    const __m256i c0 = _mm512_cvtepi64_epi32(q0), c1 = _mm512_cvtepi64_epi32(q1);
    const __m256i c2 = _mm512_cvtepi64_epi32(q2), c3 = _mm512_cvtepi64_epi32(q3);
    const __m256i a = _mm256_unpacklo_epi32(c0, c1);  // c0[0] c1[0] c0[1] c1[1] | lanes 4, 5
    const __m256i b = _mm256_unpackhi_epi32(c0, c1);  // lanes 2, 3 | 6, 7
    const __m256i c = _mm256_unpacklo_epi32(c2, c3);
    const __m256i d = _mm256_unpackhi_epi32(c2, c3);
    const __m256i l0 = _mm256_unpacklo_epi64(a, c);  // block 0 | block 4
    const __m256i l1 = _mm256_unpackhi_epi64(a, c);  // block 1 | block 5
    const __m256i l2 = _mm256_unpacklo_epi64(b, d);  // block 2 | block 6
    const __m256i l3 = _mm256_unpackhi_epi64(b, d);  // block 3 | block 7
    auto* o = reinterpret_cast<__m256i*>(out);
    _mm256_storeu_si256(o + 0, _mm256_permute2x128_si256(l0, l1, 0x20));
    _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(l2, l3, 0x20));
    _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(l0, l1, 0x31));
    _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(l2, l3, 0x31));
}

__attribute__((target("avx512f"))) void batch_avx512(const std::uint32_t ctr[4],
                                                     const std::uint32_t key[2],
                                                     std::uint32_t* out) {
    constexpr int kChains = 2;
    __m512i c0[kChains], c1[kChains], c2[kChains], c3[kChains];
    for (int h = 0; h < kChains; ++h) {
        const std::uint32_t b = ctr[0] + static_cast<std::uint32_t>(8 * h);  // wraps mod 2^32
        c0[h] = _mm512_setr_epi64(b, b + 1u, b + 2u, b + 3u, b + 4u, b + 5u, b + 6u, b + 7u);
        c1[h] = _mm512_set1_epi64(ctr[1]);
        c2[h] = _mm512_set1_epi64(ctr[2]);
        c3[h] = _mm512_set1_epi64(ctr[3]);
    }
    const __m512i m0 = _mm512_set1_epi64(kM0), m1 = _mm512_set1_epi64(kM1);
    std::uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += kW0;
            k1 += kW1;
        }
        const __m512i kk0 = _mm512_set1_epi64(k0), kk1 = _mm512_set1_epi64(k1);
        for (int h = 0; h < kChains; ++h) {
            const __m512i p0 = _mm512_mul_epu32(c0[h], m0);
            const __m512i p1 = _mm512_mul_epu32(c2[h], m1);
            c0[h] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), c1[h], kk0, 0x96);
            c1[h] = p1;
            c2[h] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), c3[h], kk1, 0x96);
            c3[h] = p0;
        }
    }
    for (int h = 0; h < kChains; ++h) store_blocks(c0[h], c1[h], c2[h], c3[h], out + 32 * h);
}

__attribute__((target("avx2"))) void batch_avx2(const std::uint32_t ctr[4],
                                                const std::uint32_t key[2], std::uint32_t* out) {
    constexpr int kChains = 4;
    __m256i c0[kChains], c1[kChains], c2[kChains], c3[kChains];
    for (int h = 0; h < kChains; ++h) {
        const std::uint32_t b = ctr[0] + static_cast<std::uint32_t>(4 * h);  // wraps mod 2^32
        c0[h] = _mm256_setr_epi64x(b, b + 1u, b + 2u, b + 3u);
        c1[h] = _mm256_set1_epi64x(ctr[1]);
        c2[h] = _mm256_set1_epi64x(ctr[2]);
        c3[h] = _mm256_set1_epi64x(ctr[3]);
    }
    const __m256i m0 = _mm256_set1_epi64x(kM0), m1 = _mm256_set1_epi64x(kM1);
    std::uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += kW0;
            k1 += kW1;
        }
        const __m256i kk0 = _mm256_set1_epi64x(k0), kk1 = _mm256_set1_epi64x(k1);
        for (int h = 0; h < kChains; ++h) {
            const __m256i p0 = _mm256_mul_epu32(c0[h], m0);
            const __m256i p1 = _mm256_mul_epu32(c2[h], m1);
            c0[h] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1[h]), kk0);
            c1[h] = p1;
            c2[h] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3[h]), kk1);
            c3[h] = p0;
        }
    }
    for (int h = 0; h < kChains; ++h) {
        alignas(32) std::uint64_t v[4][4];
        _mm256_store_si256(reinterpret_cast<__m256i*>(v[0]), c0[h]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(v[1]), c1[h]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(v[2]), c2[h]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(v[3]), c3[h]);
        for (int l = 0; l < 4; ++l) {
            for (int j = 0; j < 4; ++j) {
                out[16 * h + 4 * l + j] = static_cast<std::uint32_t>(v[j][l]);
            }
        }
    }
}
#endif

/// ziggurat_rectangles one word at a time (branch-free: the compiler pipelines it).
std::size_t rectangles_scalar(const std::uint32_t* w, std::size_t n, double* out,
                              std::size_t stride, std::uint32_t* rej) {
    const auto& z = ziggurat();
    std::size_t bad = 0;
    for (std::size_t j = 0; j < n; ++j) {
        const unsigned i = w[j] & 0x7Fu;
        const double u =
            (static_cast<double>(static_cast<std::int32_t>(w[j] & ~0x7Fu)) + 64.0) * 0x1.0p-31;
        out[j * stride] = u * z.x[i];
        rej[bad] = static_cast<std::uint32_t>(j);
        bad += std::fabs(u) < z.ratio[i] ? 0 : 1;
    }
    return bad;
}

#ifdef PRISM_PHILOX_X86
/// ziggurat_rectangles 8 words per vector (the last ones masked): the same conversions (int32
/// to double, exact), the same product and comparison, so the same bits as rectangles_scalar.
__attribute__((target("avx512f"))) std::size_t rectangles_avx512(const std::uint32_t* w,
                                                                 std::size_t n, double* out,
                                                                 std::size_t stride,
                                                                 std::uint32_t* rej) {
    const auto& z = ziggurat();
    const __m512d scale = _mm512_set1_pd(0x1.0p-31), half_cell = _mm512_set1_pd(64.0);
    const __m256i layer = _mm256_set1_epi32(0x7F), frac = _mm256_set1_epi32(~0x7F);
    const __m512d sign = _mm512_set1_pd(-0.0);
    std::uint64_t bad = 0;
    alignas(64) double tmp[kRectWords];
    double* dst = stride == 1 ? out : tmp;
    for (std::size_t b = 0; 8 * b < n; ++b) {
        const std::size_t left = n - 8 * b;
        const __mmask8 live = left >= 8 ? __mmask8{0xFF} : static_cast<__mmask8>((1u << left) - 1);
        const __m256i v = _mm512_castsi512_si256(_mm512_maskz_loadu_epi32(live, w + 8 * b));
        const __m256i idx = _mm256_and_si256(v, layer);
        const __m512d u = _mm512_mul_pd(
            _mm512_add_pd(_mm512_cvtepi32_pd(_mm256_and_si256(v, frac)), half_cell), scale);
        const __m512d x = _mm512_i32gather_pd(idx, z.x.data(), 8);
        const __m512d ratio = _mm512_i32gather_pd(idx, z.ratio.data(), 8);
        const __m512d au = _mm512_castsi512_pd(
            _mm512_andnot_si512(_mm512_castpd_si512(sign), _mm512_castpd_si512(u)));
        const __mmask8 inside = _mm512_cmp_pd_mask(au, ratio, _CMP_LT_OQ);
        bad |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(~inside & live)) << (8 * b);
        _mm512_mask_storeu_pd(dst + 8 * b, live, _mm512_mul_pd(u, x));
    }
    if (stride != 1) {
        for (std::size_t j = 0; j < n; ++j) out[j * stride] = tmp[j];
    }
    std::size_t count = 0;
    while (bad != 0) {
        rej[count++] = static_cast<std::uint32_t>(__builtin_ctzll(bad));
        bad &= bad - 1;
    }
    return count;
}
#endif

using RectFn = std::size_t (*)(const std::uint32_t*, std::size_t, double*, std::size_t,
                               std::uint32_t*);

RectFn pick_rectangles(PhiloxVariant v) {
#ifdef PRISM_PHILOX_X86
    if ((v == PhiloxVariant::best || v == PhiloxVariant::avx512) &&
        __builtin_cpu_supports("avx512f")) {
        return rectangles_avx512;
    }
#else
    (void)v;
#endif
    return rectangles_scalar;
}

using BatchFn = void (*)(const std::uint32_t*, const std::uint32_t*, std::uint32_t*);

BatchFn pick(PhiloxVariant v) {
#ifdef PRISM_PHILOX_X86
    if (v == PhiloxVariant::best) {
        if (__builtin_cpu_supports("avx512f")) return batch_avx512;
        if (__builtin_cpu_supports("avx2")) return batch_avx2;
        return batch_scalar;
    }
    if (v == PhiloxVariant::avx512 && __builtin_cpu_supports("avx512f")) return batch_avx512;
    if (v == PhiloxVariant::avx2 && __builtin_cpu_supports("avx2")) return batch_avx2;
#else
    (void)v;
#endif
    return batch_scalar;
}

}  // namespace

std::size_t ziggurat_rectangles(const std::uint32_t* w, std::size_t n, double* out,
                                std::size_t stride, std::uint32_t* rej) {
    static const RectFn fn = pick_rectangles(PhiloxVariant::best);
    return fn(w, n, out, stride, rej);
}

bool ziggurat_rectangles_variant(PhiloxVariant v, const std::uint32_t* w, std::size_t n,
                                 double* out, std::size_t stride, std::uint32_t* rej,
                                 std::size_t& count) {
    const RectFn fn = pick_rectangles(v);
    count = fn(w, n, out, stride, rej);
    return v != PhiloxVariant::avx512 || fn != rectangles_scalar;
}

void philox4x32_batch(const std::uint32_t ctr[4], const std::uint32_t key[2], std::uint32_t* out) {
    static const BatchFn fn = pick(PhiloxVariant::best);
    fn(ctr, key, out);
}

bool philox4x32_batch_variant(PhiloxVariant v, const std::uint32_t ctr[4],
                              const std::uint32_t key[2], std::uint32_t* out) {
    const BatchFn fn = pick(v);
    fn(ctr, key, out);
    return v == PhiloxVariant::scalar || v == PhiloxVariant::best || fn != batch_scalar;
}

}  // namespace prism::stochastic::detail
