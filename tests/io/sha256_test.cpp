#include "io/sha256.hpp"

#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace {

using prism::io::Sha256;
using prism::io::sha256_hex;

// Expected digests: FIPS 180-2, Appendix B (B.1, B.2, B.3) and the SHA-256 of the empty string
// (NIST example values).
TEST(Sha256, MatchesFipsOneBlockMessage) {
    EXPECT_EQ(sha256_hex("abc"),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, MatchesDigestOfEmptyString) {
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, MatchesFipsMultiBlockMessage) {
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, MatchesFipsMillionA) {
    const std::string million_a(1000000, 'a');

    EXPECT_EQ(sha256_hex(million_a),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalUpdatesEqualOneShot) {
    // Pieces of awkward sizes cross the 64-byte block boundary in every position.
    const std::string million_a(1000000, 'a');
    Sha256 hash;
    std::size_t pos = 0;
    for (std::size_t piece = 1; pos < million_a.size(); piece = piece % 131 + 1) {
        const std::size_t take = std::min(piece, million_a.size() - pos);
        hash.update(std::string_view(million_a).substr(pos, take));
        pos += take;
    }

    const auto digest = hash.digest();

    std::string hex;
    for (const auto byte : digest) hex += fmt::format("{:02x}", byte);
    EXPECT_EQ(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, HandlesLengthsAroundPaddingBoundary) {
    // 55 bytes fit padding in one block, 56 need a second one (FIPS 180-4 section 5.1.1).
    // Digests from coreutils sha256sum.
    EXPECT_EQ(sha256_hex(std::string(55, 'a')),
              "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    EXPECT_EQ(sha256_hex(std::string(56, 'a')),
              "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
}

}  // namespace
