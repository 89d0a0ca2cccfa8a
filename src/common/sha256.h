// SHA-256 (FIPS 180-4), for the rendezvous gate's challenge and answer: a job token is never sent,
// only SHA-256 of a fresh challenge and the token.
#pragma once

#include <string>
#include <string_view>

namespace chexscale {

// The digest of `data` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace chexscale
