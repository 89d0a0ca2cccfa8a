// Choosing the state's sender and checking the state after a regroup (see regroup_state.h).
#include "train/regroup_state.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <string>

#include "common/error.h"

namespace chexscale::train {
namespace {

// The digest's start: FNV-1a's offset basis (any constant would do).
constexpr uint64_t kOffset = 14695981039346656037ull;
// XXH64's primes.
constexpr uint64_t kP1 = 11400714785074694791ull;
constexpr uint64_t kP2 = 14029467366897019727ull;
constexpr uint64_t kP3 = 1609587929392839161ull;
constexpr uint64_t kP4 = 9650029242287828579ull;
constexpr uint64_t kP5 = 2870177450012600261ull;

uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

uint64_t read64(const unsigned char* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, 8);
  return v;
}

uint64_t lane_round(uint64_t acc, uint64_t input) {
  return rotl(acc + input * kP2, 31) * kP1;
}

uint64_t merge_lane(uint64_t h, uint64_t lane) {
  return (h ^ lane_round(0, lane)) * kP1 + kP4;
}

// The four lanes over the whole 32-byte stripes of `p` (i: the bytes they cover), merged.
uint64_t stripes(const unsigned char* p, size_t bytes, uint64_t seed, size_t& i) {
  uint64_t v[4] = {seed + kP1 + kP2, seed + kP2, seed, seed - kP1};
  for (i = 0; i + 32 <= bytes; i += 32) {
    for (int k = 0; k < 4; ++k)
      v[k] = lane_round(v[k], read64(p + i + 8 * k));
  }
  uint64_t h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
  for (const uint64_t lane : v)
    h = merge_lane(h, lane);
  return h;
}

}  // namespace

uint64_t xxh64(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  uint64_t h = bytes >= 32 ? stripes(p, bytes, seed, i) : seed + kP5;
  h += bytes;
  for (; i + 8 <= bytes; i += 8)
    h = rotl(h ^ lane_round(0, read64(p + i)), 27) * kP1 + kP4;
  if (i + 4 <= bytes) {
    uint32_t word = 0;
    std::memcpy(&word, p + i, 4);
    h = rotl(h ^ (static_cast<uint64_t>(word) * kP1), 23) * kP2 + kP3;
    i += 4;
  }
  for (; i < bytes; ++i)
    h = rotl(h ^ (p[i] * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  return h ^ (h >> 32);
}

namespace {

uint64_t mix(uint64_t h, const void* data, size_t bytes) {
  return xxh64(data, bytes, h);
}

uint64_t mix(uint64_t h, const std::string& s) {
  const uint64_t size = s.size();
  return mix(mix(h, &size, sizeof size), s.data(), s.size());
}

}  // namespace

StateHolders newest_state(distributed::DistContext& ctx, std::optional<int64_t> held_step) {
  const int64_t mine = held_step.value_or(-1);
  if (ctx.world_size() == 1) {
    if (held_step) return {0, {}};
    return {-1, {0}};
  }
  const torch::Tensor all = ctx.all_gather(torch::tensor({mine}, torch::kLong));
  StateHolders h;
  int64_t newest = -1;
  for (int r = 0; r < ctx.world_size(); ++r) {
    const int64_t step = all[r][0].item<int64_t>();
    if (step > newest) {
      newest = step;
      h.root = r;
    }
  }
  for (int r = 0; r < ctx.world_size(); ++r) {
    if (all[r][0].item<int64_t>() != newest) h.lacking.push_back(r);
  }
  return h;
}

uint64_t state_digest(const std::vector<models::NamedTensor>& tensors,
                      const nlohmann::json& state) {
  uint64_t h = mix(kOffset, state.dump());
  for (const models::NamedTensor& t : tensors) {
    const torch::Tensor c = t.tensor.cpu().contiguous();
    h = mix(h, t.name);
    h = mix(h, std::string(c.dtype().name()));
    for (const int64_t size : c.sizes())
      h = mix(h, &size, sizeof size);
    h = mix(h, c.data_ptr(), c.numel() * c.element_size());
  }
  return h;
}

namespace {

torch::Tensor gather_digests(distributed::DistContext& ctx, uint64_t digest) {
  int64_t as_signed = 0;
  std::memcpy(&as_signed, &digest, sizeof digest);
  return ctx.all_gather(torch::tensor({as_signed}, torch::kLong));
}

}  // namespace

bool same_state_everywhere(distributed::DistContext& ctx, uint64_t digest) {
  if (ctx.world_size() == 1) return true;
  const torch::Tensor all = gather_digests(ctx, digest);
  for (int r = 1; r < ctx.world_size(); ++r) {
    if (all[r][0].item<int64_t>() != all[0][0].item<int64_t>()) return false;
  }
  return true;
}

void expect_same_state(distributed::DistContext& ctx, uint64_t digest, int root,
                       const std::string& when) {
  if (ctx.world_size() == 1) return;
  const torch::Tensor all = gather_digests(ctx, digest);
  const int64_t expected = all[root][0].item<int64_t>();
  std::vector<int> differ;
  for (int r = 0; r < ctx.world_size(); ++r) {
    if (all[r][0].item<int64_t>() != expected) differ.push_back(r);
  }
  if (!differ.empty()) {
    throw Error(fmt::format(
        "{} the training state of rank{} {} differs from rank {}'s (digest {:016x}): the ranks "
        "would train different models",
        when, differ.size() > 1 ? "s" : "", fmt::join(differ, ", "), root, digest));
  }
}

}  // namespace chexscale::train
