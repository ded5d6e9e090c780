#pragma once

// Counter-based random streams (Random123 Philox4x32-10, Salmon et al. SC'11). The stream of
// (experiment seed, design point index, stream id) is a pure function of those three numbers,
// so results never depend on the number of MPI ranks or on the order points are evaluated in.

#include <cmath>
#include <cstdint>

#include <Random123/philox.h>

namespace prism::stochastic {

/// Stream ids used by the evaluators; distinct ids give independent streams.
enum class StreamKind : std::uint32_t {
    cluster = 1,  ///< persistent factors of cluster realization k (id = k)
    sample = 2,   ///< transient factors and regime of Monte Carlo sample k (id = k)
    test = 3,     ///< reserved for tests
};

/// An endless sequence of uniform doubles in (0, 1) for one (seed, point, kind, id).
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
        if (used_ >= 4) refill();
        const std::uint64_t hi = block_.v[used_++] >> 5;  // 27 bits
        const std::uint64_t lo = block_.v[used_++] >> 6;  // 26 bits
        return (static_cast<double>((hi << 26) | lo) + 0.5) * 0x1.0p-53;
    }

    /// Standard normal by Box-Muller (pairs cached).
    double normal() {
        if (has_spare_) {
            has_spare_ = false;
            return spare_;
        }
        const double u1 = uniform();
        const double u2 = uniform();
        const double r = std::sqrt(-2.0 * std::log(u1));
        const double a = 6.283185307179586 * u2;
        spare_ = r * std::sin(a);
        has_spare_ = true;
        return r * std::cos(a);
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
    bool has_spare_ = false;
    double spare_ = 0;
};

}  // namespace prism::stochastic
