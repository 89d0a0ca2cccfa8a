// A batch of examples as the trainer consumes them.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "data/labels/labels.h"

namespace chexscale::data {

struct Batch {
  torch::Tensor images;  // [B, 3, H, W] float32, ImageNet-normalised
  // [B, C] float32: 1, 0, or NaN for a label that is not known (masked out of the loss and of
  // AUROC, as TorchXRayVision marks them), C the data set's label count.
  torch::Tensor labels;
  std::vector<std::string> names;  // image file names ("00000001_000.png")
  // Dataset indices. As DistributedSampler, the epoch is padded by repeating indices from its
  // start so every rank gets the same number of batches; evaluation de-duplicates by index.
  std::vector<int64_t> indices;
};

}  // namespace chexscale::data
