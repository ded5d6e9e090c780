#pragma once

// SHA-256 (FIPS 180-4), used to fingerprint experiment files so that a result file can refuse
// to be resumed by a different experiment.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace prism::io {

/// Incremental SHA-256. `update` any number of times, then `digest` once.
class Sha256 {
  public:
    Sha256();

    /// Feeds `data` (any bytes) into the hash.
    void update(std::string_view data);

    /// Finishes the hash and returns the 32-byte digest. The object must not be updated after.
    std::array<std::uint8_t, 32> digest();

  private:
    void process_block(const std::uint8_t* block);

    std::array<std::uint32_t, 8> state_;
    std::array<std::uint8_t, 64> buffer_{};
    std::size_t buffered_ = 0;
    std::uint64_t total_bytes_ = 0;
};

/// SHA-256 of `data` as 64 lower-case hexadecimal characters.
std::string sha256_hex(std::string_view data);

}  // namespace prism::io
