#pragma once

// The hash combining of the per-thread caches' keys (step model, law tables, effective factors).

#include <cstdint>
#include <cstring>

namespace prism::stochastic::detail {

inline std::uint64_t hash_mix(std::uint64_t h, std::uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

/// The bits of a double (exact keys: equal doubles give equal bits, -0 and 0 apart).
inline std::uint64_t hash_bits(double x) {
    std::uint64_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
}

}  // namespace prism::stochastic::detail
