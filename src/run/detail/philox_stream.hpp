#pragma once

// A stream of random variates keyed by (seed, point index, stream id): the counter-based
// Philox4x64 of Random123 (Salmon et al., SC'11), so a stream is a pure function of its key.

#include <cmath>
#include <cstdint>

#include <Random123/philox.h>

namespace prism::detail {

class PhiloxStream {
  public:
    PhiloxStream(std::uint64_t seed, std::uint64_t point_index, std::uint64_t stream) {
        key_[0] = seed;
        key_[1] = point_index;
        ctr_[0] = stream;
        ctr_[1] = 0;
        ctr_[2] = 0x72756e5f6d6f64ULL;  // "run_mod": separates these streams from other layers'
        ctr_[3] = 0;
    }

    /// Uniform on the open interval (0, 1), 53 random bits.
    double uniform() {
        if (pos_ == 4) {
            block_ = gen_(ctr_, key_);
            ++ctr_[1];
            pos_ = 0;
        }
        return (static_cast<double>(block_[pos_++] >> 11) + 0.5) * 0x1.0p-53;
    }

    /// Standard normal (Box-Muller; the second variate is kept for the next call).
    double normal() {
        if (has_spare_) {
            has_spare_ = false;
            return spare_;
        }
        const double r = std::sqrt(-2.0 * std::log(uniform()));
        const double phi = 2.0 * M_PI * uniform();
        spare_ = r * std::sin(phi);
        has_spare_ = true;
        return r * std::cos(phi);
    }

    /// Exponential with rate 1.
    double exponential() { return -std::log(uniform()); }

    /// Gamma(shape, 1) for shape >= 1 (Marsaglia and Tsang, ACM TOMS 2000).
    double gamma(double shape) {
        const double d = shape - 1.0 / 3.0;
        const double c = 1.0 / std::sqrt(9.0 * d);
        for (;;) {
            double x;
            double v;
            do {
                x = normal();
                v = 1.0 + c * x;
            } while (v <= 0);
            v = v * v * v;
            const double u = uniform();
            if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
        }
    }

  private:
    r123::Philox4x64 gen_;
    r123::Philox4x64::key_type key_{};
    r123::Philox4x64::ctr_type ctr_{};
    r123::Philox4x64::ctr_type block_{};
    int pos_ = 4;
    bool has_spare_ = false;
    double spare_ = 0;
};

}  // namespace prism::detail
