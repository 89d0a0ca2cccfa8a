// A batch of examples as the trainer consumes them, and ChestX-ray14's pathology list.
#pragma once

#include <torch/torch.h>

#include <array>
#include <limits>
#include <string>
#include <vector>

namespace chexscale::data {

inline constexpr int kNumPathologies = 14;

// The canonical ChestX-ray14 label order (the CheXNet paper's and the model head's).
inline const std::array<std::string, kNumPathologies> kPathologies = {
    "Atelectasis", "Cardiomegaly", "Effusion",           "Infiltration",  "Mass",
    "Nodule",      "Pneumonia",    "Pneumothorax",       "Consolidation", "Edema",
    "Emphysema",   "Fibrosis",     "Pleural_Thickening", "Hernia"};

// The value of a label that is not known in Batch::labels.
inline constexpr float kUnknownLabel = std::numeric_limits<float>::quiet_NaN();

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
