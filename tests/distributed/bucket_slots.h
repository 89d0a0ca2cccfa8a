// Gradients stored back to back in one buffer, as the reducer's bucket slots are: the PowerSGD
// tests' stand-in for a bucket.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace chexscale::test_util {

struct BucketSlots {
  torch::Tensor flat;
  std::vector<torch::Tensor> slots;
  std::vector<size_t> ids;
};

// Slots of these shapes, zero, in `dtype`; 4-D ones channels-last when asked.
inline BucketSlots make_slots(const std::vector<std::vector<int64_t>>& shapes,
                              bool channels_last = false, torch::Dtype dtype = torch::kFloat) {
  BucketSlots s;
  int64_t numel = 0;
  for (const auto& shape : shapes)
    numel += c10::multiply_integers(shape);
  s.flat = torch::zeros({numel}, torch::dtype(dtype));
  int64_t at = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    torch::Tensor like = torch::empty(shapes[i]);
    if (channels_last && shapes[i].size() == 4)
      like = like.contiguous(at::MemoryFormat::ChannelsLast);
    torch::Tensor slot = torch::empty({0}, torch::dtype(dtype));
    slot.set_(s.flat.storage(), at, like.sizes(), like.strides());
    at += like.numel();
    s.slots.push_back(slot);
    s.ids.push_back(i);
  }
  return s;
}

// Every slot drawn from a standard normal, seeded.
inline void fill(BucketSlots& s, int seed) {
  torch::manual_seed(seed);
  for (auto& slot : s.slots)
    slot.copy_(torch::randn(slot.sizes(), slot.options()));
}

}  // namespace chexscale::test_util
