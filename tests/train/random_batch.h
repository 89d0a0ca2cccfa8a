// A random training batch for unit tests of the step: N images [N, 3, side, side] from a normal
// distribution and 14 labels with about 30 % positives, reproducible from a seed.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "data/batch.h"
#include "models/classifier.h"

namespace chexscale::test_util {

inline data::Batch random_batch(int64_t n, int64_t side, uint64_t seed) {
  torch::manual_seed(seed);
  data::Batch b;
  b.images = torch::randn({n, 3, side, side});
  b.labels = (torch::rand({n, models::kChestXray14Classes}) < 0.3).to(torch::kFloat32);
  return b;
}

}  // namespace chexscale::test_util
