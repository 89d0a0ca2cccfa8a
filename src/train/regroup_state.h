// The training state across an in-place regroup (--elastic in-place): which rank sends it (the
// one that holds the newest: survivors hold theirs, newcomers none), and the proof afterwards
// that every rank holds the same bytes (a digest of every tensor and of the state's JSON,
// gathered and compared).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "distributed/context.h"
#include "models/safetensors.h"

namespace chexscale::train {

// Who holds the newest training state at the start of a round.
struct StateHolders {
  int root = -1;             // of the ranks holding the most steps the lowest; -1: none holds one
  std::vector<int> lacking;  // the ranks that hold fewer steps or none (newcomers), ascending
};

// The holders, from each rank's `held_step` (the optimizer steps of the state it holds; nullopt:
// none, a newcomer). Collective (one allgather) with several ranks.
StateHolders newest_state(distributed::DistContext& ctx, std::optional<int64_t> held_step);

// XXH64 (xxHash's 64-bit hash: the reference's results) of `bytes` bytes at `data`: four
// independent lanes over 32-byte stripes, so a model's worth of bytes hashes at close to memory
// speed (several GB/s on one core); any flipped bit changes it.
uint64_t xxh64(const void* data, size_t bytes, uint64_t seed);

// A 64-bit digest of `tensors` (names, types, shapes and bytes) and `state`: each piece hashed
// with xxh64, seeded by the digest so far, so the pieces' order counts too.
uint64_t state_digest(const std::vector<models::NamedTensor>& tensors, const nlohmann::json& state);

// Whether every rank's digest is `digest`. Collective.
bool same_state_everywhere(distributed::DistContext& ctx, uint64_t digest);

// Throws Error naming the ranks whose digest differs from rank `root`'s (`when`: "after the
// regroup"). Collective.
void expect_same_state(distributed::DistContext& ctx, uint64_t digest, int root,
                       const std::string& when);

}  // namespace chexscale::train
