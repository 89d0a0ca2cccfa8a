// Choosing the state's sender and checking the state after a regroup (see regroup_state.h).
#include "train/regroup_state.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <string>

#include "common/error.h"

namespace chexscale::train {
namespace {

// FNV-1a's constants over 64-bit words: fast enough for a model's worth of bytes (a few GB/s),
// and any flipped bit changes the result.
constexpr uint64_t kOffset = 14695981039346656037ull;
constexpr uint64_t kPrime = 1099511628211ull;

uint64_t mix(uint64_t h, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, p + i, 8);
    h = (h ^ word) * kPrime;
  }
  for (; i < bytes; ++i)
    h = (h ^ p[i]) * kPrime;
  return h;
}

uint64_t mix(uint64_t h, const std::string& s) {
  const uint64_t size = s.size();
  return mix(mix(h, &size, sizeof size), s.data(), s.size());
}

}  // namespace

StateHolders newest_state(distributed::DistContext& ctx, std::optional<int64_t> held_step) {
  const int64_t mine = held_step.value_or(-1);
  if (ctx.world_size() == 1) return {held_step ? 0 : -1, held_step.has_value()};
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
  h.everyone = h.root >= 0;
  for (int r = 0; r < ctx.world_size(); ++r)
    h.everyone = h.everyone && all[r][0].item<int64_t>() == newest;
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
