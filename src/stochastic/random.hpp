#pragma once

// Counter-based random streams (Random123 Philox4x32-10, Salmon et al. SC'11). The stream of
// (experiment seed, design point index, stream id) is a pure function of those three numbers,
// so results never depend on the number of MPI ranks or on the order points are evaluated in.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include <Random123/philox.h>

namespace prism::stochastic {

namespace detail {

/// Ziggurat tables for the standard normal, 128 layers (Marsaglia and Tsang, J. Stat. Softw.
/// 5(8), 2000, in Doornik's ZIGNOR form, 2005: the layer index and the abscissa come from
/// independent random bits).
struct ZigguratTables {
    static constexpr int kLayers = 128;
    static constexpr double kR = 3.442619855899;
    static constexpr double kV = 9.91256303526217e-3;
    std::array<double, kLayers + 1> x{};
    std::array<double, kLayers> ratio{};

    ZigguratTables() {
        double f = std::exp(-0.5 * kR * kR);
        x[0] = kV / f;
        x[1] = kR;
        x[kLayers] = 0;
        for (int i = 2; i < kLayers; ++i) {
            x[i] = std::sqrt(-2.0 * std::log(kV / x[i - 1] + f));
            f = std::exp(-0.5 * x[i] * x[i]);
        }
        for (int i = 0; i < kLayers; ++i) ratio[i] = x[i + 1] / x[i];
    }
};

inline const ZigguratTables& ziggurat() {
    static const ZigguratTables tables;
    return tables;
}

/// Ziggurat tables for the standard exponential, 256 layers (Marsaglia and Tsang, J. Stat.
/// Softw. 5(8), 2000: r and v of their 256-layer exponential ziggurat). Layer i >= 1 spans
/// [0, x[i]) at heights [f[i], f[i + 1]), f = e^-x; layer 0 is the base strip up to r plus the
/// tail beyond it (x[0] = v / f(r), its pseudo-width). Every layer has area v.
struct ExpZigguratTables {
    static constexpr int kLayers = 256;
    static constexpr double kR = 7.69711747013104972;
    static constexpr double kV = 3.949659822581572e-3;
    std::array<double, kLayers + 1> x{}, f{};
    std::array<double, kLayers> ratio{};

    ExpZigguratTables() {
        x[0] = kV / std::exp(-kR);
        x[1] = kR;
        x[kLayers] = 0;
        for (int i = 2; i < kLayers; ++i) x[i] = -std::log(kV / x[i - 1] + std::exp(-x[i - 1]));
        for (int i = 0; i <= kLayers; ++i) f[i] = std::exp(-x[i]);
        for (int i = 0; i < kLayers; ++i) ratio[i] = x[i + 1] / x[i];
    }
};

inline const ExpZigguratTables& exp_ziggurat() {
    static const ExpZigguratTables tables;
    return tables;
}

/// Philox blocks computed at once by Stream (kPhiloxBatch * 4 words buffered).
constexpr int kPhiloxBatch = 16;

/// r123::Philox4x32 of the counters (ctr[0] + l, ctr[1], ctr[2], ctr[3]) (ctr[0] wrapping
/// mod 2^32), l = 0 .. kPhiloxBatch - 1, under `key`: block l to out[4 l .. 4 l + 4), the same
/// bits as the library (mc_philox.cpp: the lanes of one vector).
void philox4x32_batch(const std::uint32_t ctr[4], const std::uint32_t key[2], std::uint32_t* out);

/// The implementations philox4x32_batch picks from (the best the CPU runs), for the tests:
/// runs variant `v` and returns whether it ran (false: the CPU lacks it, scalar ran instead).
enum class PhiloxVariant { best, scalar, avx2, avx512 };
bool philox4x32_batch_variant(PhiloxVariant v, const std::uint32_t ctr[4],
                              const std::uint32_t key[2], std::uint32_t* out);

/// The rectangle step of Stream::normal32 for the words w[0 .. n), n <= 4 kPhiloxBatch:
/// out[j * stride] = the rectangle draw of w[j] (its layer's abscissa times the signed
/// fraction); the indices j whose draw falls outside its rectangle go to rej[0 .. count) in
/// increasing order (their out is to be replaced); returns the count. Branch-free, IEEE
/// products only: every instruction set gives the same bits.
std::size_t ziggurat_rectangles(const std::uint32_t* w, std::size_t n, double* out,
                                std::size_t stride, std::uint32_t* rej);
/// The variants ziggurat_rectangles picks from (scalar, avx512; avx2 runs scalar), for the tests:
/// returns whether `v` ran (false: the CPU lacks it, scalar ran instead); `count` as returned.
bool ziggurat_rectangles_variant(PhiloxVariant v, const std::uint32_t* w, std::size_t n,
                                 double* out, std::size_t stride, std::uint32_t* rej,
                                 std::size_t& count);

}  // namespace detail

/// Stream ids used by the evaluators; distinct ids give independent streams.
enum class StreamKind : std::uint32_t {
    cluster = 1,    ///< persistent factors of cluster realization k (id = k)
    sample = 2,     ///< transient factors and regime of Monte Carlo sample k (id = k)
    test = 3,       ///< reserved for tests
    hiccup = 4,     ///< the hiccup delay of Monte Carlo sample k (id = k)
    routing = 5,    ///< exact multinomial routing draws (routing.hpp; id 0, point = the law's hash)
    documents = 6,  ///< exact document packings (documents.hpp; id 0, point = the law's hash)
};

/// An endless sequence of uniform doubles in (0, 1) for one (seed, point, kind, id).
/// The words are those of Philox4x32 blocks at consecutive counters, in order; they are
/// computed kPhiloxBatch blocks at a time (detail::philox4x32_batch) into a buffer, which
/// changes nothing in the sequence: uniform() still takes its two words from one block.
class Stream {
  public:
    Stream(std::uint64_t seed, std::uint64_t point_index, StreamKind kind, std::uint32_t id) {
        key_ = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
        ctr_ = {{0u, (static_cast<std::uint32_t>(kind) << 24) ^ id,
                 static_cast<std::uint32_t>(point_index),
                 static_cast<std::uint32_t>(point_index >> 32)}};
    }

    /// Uniform in the open interval (0, 1), 53 random bits.
    double uniform() {
        // two words of one block: after an odd number of bits() calls one word of the block
        // is left, which is skipped (reading v[3] and v[4] ran past the block; found by
        // -fsanitize=undefined)
        if ((used_ & 3) == 3) ++used_;
        if (used_ >= kWords) refill();
        const std::uint64_t hi = words_[used_++] >> 5;  // 27 bits
        const std::uint64_t lo = words_[used_++] >> 6;  // 26 bits
        return (static_cast<double>((hi << 26) | lo) + 0.5) * 0x1.0p-53;
    }

    /// Standard exponential (-ln U in law) by the ziggurat method (exact, not an approximation;
    /// ZIGNOR form: the layer and the abscissa independent). The common case takes the two words
    /// of one uniform(): its 53 bits are the abscissa's fraction, and the layer index is 8 of
    /// the 11 bits uniform() leaves unused (independent of the 53). Outside the layer's
    /// rectangle (about 1.5% of draws): the tail beyond r (r + a fresh exponential: memoryless)
    /// or the wedge test against e^-x with a fresh uniform. For bulk Monte Carlo: no libm call
    /// in the common case, unlike -std::log(uniform()).
    double exponential() {
        const auto& z = detail::exp_ziggurat();
        for (;;) {
            if ((used_ & 3) == 3) ++used_;
            if (used_ >= kWords) refill();
            const std::uint32_t w0 = words_[used_++], w1 = words_[used_++];
            const std::uint64_t hi = w0 >> 5, lo = w1 >> 6;
            const double u = (static_cast<double>((hi << 26) | lo) + 0.5) * 0x1.0p-53;
            const unsigned i = (w0 & 31u) | ((w1 & 7u) << 5);
            const double x = u * z.x[i];
            if (u < z.ratio[i]) return x;  // inside the rectangle
            if (i == 0) return detail::ExpZigguratTables::kR + exponential();         // the tail
            if (z.f[i] + uniform() * (z.f[i + 1] - z.f[i]) < std::exp(-x)) return x;  // wedge
        }
    }

    /// n draws of exponential() into out[0 .. n): the same values from the same words (the
    /// rectangle test runs over the buffered words in a tight loop; a pair of words that fails
    /// it is handed to exponential(), which reads it again and goes on exactly as a sequence of
    /// calls).
    void exponentials(double* out, std::size_t n) {
        const auto& z = detail::exp_ziggurat();
        std::size_t k = 0;
        while (k < n) {
            if ((used_ & 3) == 3) ++used_;
            if (used_ >= kWords) refill();
            const std::uint32_t* w = words_.data();
            int at = used_;
            bool slow = false;
            for (; k < n; ++k) {
                if ((at & 3) == 3) ++at;  // two words of one block, as uniform()
                if (at >= kWords) break;
                const std::uint32_t w0 = w[at], w1 = w[at + 1];
                const std::uint64_t hi = w0 >> 5, lo = w1 >> 6;
                const double u = (static_cast<double>((hi << 26) | lo) + 0.5) * 0x1.0p-53;
                const unsigned i = (w0 & 31u) | ((w1 & 7u) << 5);
                if (!(u < z.ratio[i])) {
                    slow = true;
                    break;
                }
                out[k] = u * z.x[i];
                at += 2;
            }
            used_ = at;
            if (slow) out[k++] = exponential();  // outside the rectangle: the slow cases
        }
    }

    /// 32 random bits.
    std::uint32_t bits() {
        if (used_ >= kWords) refill();
        return words_[used_++];
    }

    /// Uniform integer in [0, n), n >= 1, exactly (Lemire's multiply-shift with rejection,
    /// ACM TOMACS 29(1), 2019: no modulo bias).
    std::uint32_t below(std::uint32_t n) {
        std::uint64_t x = static_cast<std::uint64_t>(bits()) * n;
        auto low = static_cast<std::uint32_t>(x);
        if (low < n) {
            const std::uint32_t floor = (0u - n) % n;  // 2^32 mod n
            while (low < floor) {
                x = static_cast<std::uint64_t>(bits()) * n;
                low = static_cast<std::uint32_t>(x);
            }
        }
        return static_cast<std::uint32_t>(x >> 32);
    }

    /// The ziggurat's slow cases for abscissa `u` in layer `i` outside the rectangle: the base
    /// layer's tail beyond R (Marsaglia 1964), always accepted, or a wedge under the density.
    /// Returns whether `x` holds a draw (false: rejected, draw again).
    bool ziggurat_outside(double u, unsigned i, double& x) {
        const auto& z = detail::ziggurat();
        if (i == 0) {
            double t, y;
            do {
                t = std::log(uniform()) / detail::ZigguratTables::kR;
                y = std::log(uniform());
            } while (-2.0 * y < t * t);
            x = u < 0 ? t - detail::ZigguratTables::kR : detail::ZigguratTables::kR - t;
            return true;
        }
        x = u * z.x[i];
        const double f0 = std::exp(-0.5 * (z.x[i] * z.x[i] - x * x));
        const double f1 = std::exp(-0.5 * (z.x[i + 1] * z.x[i + 1] - x * x));
        return f1 + uniform() * (f0 - f1) < 1.0;  // under the density in a wedge
    }

    /// Standard normal by the ziggurat method (exact, not an approximation).
    double normal() {
        const auto& z = detail::ziggurat();
        for (;;) {
            const double u = 2.0 * uniform() - 1.0;
            const unsigned i = bits() & 0x7Fu;
            if (std::fabs(u) < z.ratio[i]) return u * z.x[i];  // inside a rectangle
            if (double x = 0; ziggurat_outside(u, i, x)) return x;
        }
    }

    /// Standard normal by the same ziggurat from ONE 32-bit word in the common case (Marsaglia
    /// and Tsang's original form, with disjoint bits: 7 for the layer, the upper 25 as a signed
    /// abscissa, so the layer and the abscissa stay independent; Doornik 2005's concern). The
    /// rectangle draws are resolved to 2^-24 of the layer width; the rare wedge and tail
    /// draws use full 53-bit uniforms. For bulk Monte Carlo: 3x fewer Philox blocks than
    /// normal().
    double normal32() {
        const auto& z = detail::ziggurat();
        for (;;) {
            const std::uint32_t w = bits();
            const unsigned i = w & 0x7Fu;
            // upper 25 bits as a signed fraction in (-1, 1), centred in its 2^-24 cell
            const double u =
                (static_cast<double>(static_cast<std::int32_t>(w & ~0x7Fu)) + 64.0) * 0x1.0p-31;
            if (std::fabs(u) < z.ratio[i]) return u * z.x[i];
            if (double x = 0; ziggurat_outside(u, i, x)) return x;
        }
    }

    /// n draws of normal32() into out[0 .. n), the same values from the same words (the
    /// rectangle test runs over the buffered words in a tight loop; a word that fails it is
    /// handed to normal32(), which reads it again and goes on exactly as a sequence of calls).
    void normals32(double* out, std::size_t n) {
        const auto& z = detail::ziggurat();
        std::size_t k = 0;
        while (k < n) {
            if (used_ >= kWords) refill();
            const std::size_t avail = std::min<std::size_t>(n - k, kWords - used_);
            const std::uint32_t* w = words_.data() + used_;
            std::size_t j = 0;
            for (; j < avail; ++j) {
                const unsigned i = w[j] & 0x7Fu;
                const double u =
                    (static_cast<double>(static_cast<std::int32_t>(w[j] & ~0x7Fu)) + 64.0) *
                    0x1.0p-31;
                if (!(std::fabs(u) < z.ratio[i])) break;
                out[k + j] = u * z.x[i];
            }
            used_ += static_cast<int>(j);
            k += j;
            if (j < avail) out[k++] = normal32();  // outside the rectangle: the slow cases
        }
    }

    /// n independent standard normals into out[0], out[stride], .. out[(n - 1) * stride], by
    /// normal32()'s ziggurat, one word each in the common case: the words of each buffer refill
    /// go through the rectangle test at once (detail::ziggurat_rectangles), and a word outside
    /// its rectangle then completes its draw as normal32() would (wedge or tail with fresh
    /// uniforms, or a new attempt). Each value is an exact normal drawn from words no other
    /// value uses, so the values are iid N(0, 1); they are not the sequence normals32() gives
    /// (the slow cases draw after the refill's words, not in between). For bulk Monte Carlo.
    void normals_batch(double* out, std::size_t n, std::size_t stride = 1) {
        std::size_t k = 0;
        while (k < n) {
            if (used_ >= kWords) refill();
            const std::size_t take = std::min<std::size_t>(n - k, kWords - used_);
            std::uint32_t rej[kWords];
            const std::size_t bad = detail::ziggurat_rectangles(words_.data() + used_, take,
                                                                out + k * stride, stride, rej);
            used_ += static_cast<int>(take);
            // the words that failed the test, in order: normal32()'s slow cases
            const std::uint32_t* w = words_.data() + (used_ - take);
            std::uint32_t failed[kWords];
            for (std::size_t b = 0; b < bad; ++b) failed[b] = w[rej[b]];
            for (std::size_t b = 0; b < bad; ++b) {
                const unsigned i = failed[b] & 0x7Fu;
                const double u =
                    (static_cast<double>(static_cast<std::int32_t>(failed[b] & ~0x7Fu)) + 64.0) *
                    0x1.0p-31;
                double x = 0;
                if (!ziggurat_outside(u, i, x)) x = normal32();
                out[(k + rej[b]) * stride] = x;
            }
            k += take;
        }
    }

  private:
    static constexpr int kWords = 4 * detail::kPhiloxBatch;

    void refill() {
        detail::philox4x32_batch(ctr_.v, key_.v, words_.data());
        ctr_.v[0] += static_cast<std::uint32_t>(detail::kPhiloxBatch);
        used_ = 0;
    }

    r123::Philox4x32::key_type key_{};
    r123::Philox4x32::ctr_type ctr_{};  ///< of the next block not in words_
    std::array<std::uint32_t, kWords> words_{};
    int used_ = kWords;  ///< words_ used
};

}  // namespace prism::stochastic
