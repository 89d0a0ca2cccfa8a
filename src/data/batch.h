// A batch of ChestX-ray14 examples as the trainer consumes them, and the pathology list.
#pragma once

#include <torch/torch.h>

#include <array>
#include <string>
#include <vector>

namespace chexscale::data {

inline constexpr int kNumPathologies = 14;

// The canonical ChestX-ray14 label order (the CheXNet paper's and the model head's).
inline const std::array<std::string, kNumPathologies> kPathologies = {
    "Atelectasis", "Cardiomegaly", "Effusion",           "Infiltration",  "Mass",
    "Nodule",      "Pneumonia",    "Pneumothorax",       "Consolidation", "Edema",
    "Emphysema",   "Fibrosis",     "Pleural_Thickening", "Hernia"};

struct Batch {
  torch::Tensor images;            // [B, 3, H, W] float32, ImageNet-normalised
  torch::Tensor labels;            // [B, 14] float32 in {0, 1}
  std::vector<std::string> names;  // image file names ("00000001_000.png")
  // Dataset indices. As DistributedSampler, the epoch is padded by repeating indices from its
  // start so every rank gets the same number of batches; evaluation de-duplicates by index.
  std::vector<int64_t> indices;
};

}  // namespace chexscale::data
