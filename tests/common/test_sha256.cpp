// SHA-256 against the test vectors published with FIPS 180-2 (appendix B) and NIST's examples:
// the empty message, one block, a message whose padding takes a second block, a million bytes.
#include <gtest/gtest.h>

#include <string>

#include "common/sha256.h"

namespace chexscale {
namespace {

TEST(Sha256, MatchesThePublishedTestVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, EveryLengthAroundTheBlockEdgesDiffers) {
  // 55, 56 and 64 bytes pad into one, two and two blocks: each must give its own digest.
  EXPECT_NE(sha256_hex(std::string(55, 'x')), sha256_hex(std::string(56, 'x')));
  EXPECT_NE(sha256_hex(std::string(63, 'x')), sha256_hex(std::string(64, 'x')));
  EXPECT_EQ(sha256_hex(std::string(64, 'x')).size(), 64u);
}

}  // namespace
}  // namespace chexscale
