// CheXNet's loss: binary cross-entropy on logits, optionally weighted per class as in the paper
// (positives weighted by the negative frequency and negatives by the positive frequency).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace chexscale::train {

// Per-class weights of the positive and negative terms, each [num_classes] float32.
struct ClassWeights {
  torch::Tensor positive;
  torch::Tensor negative;
};

// The paper's weights from training label frequencies: w+ = |N| / (|P| + |N|),
// w- = |P| / (|P| + |N|) per class. `positives[c]` counts examples of class c among `total`.
// A class with no positives (or no negatives) gets weights 1 / 1 rather than a zero term.
ClassWeights class_weights_from_counts(const std::vector<int64_t>& positives, int64_t total);

class BceWithLogitsLoss {
 public:
  BceWithLogitsLoss() = default;  // unweighted
  explicit BceWithLogitsLoss(ClassWeights weights);

  // Mean over batch and classes of the (weighted) binary cross-entropy; logits, labels [B, C].
  torch::Tensor operator()(const torch::Tensor& logits, const torch::Tensor& labels) const;

  bool weighted() const { return weights_.positive.defined(); }
  // Moves the weights to the logits' device (called once by the owner).
  void to(torch::Device device);

 private:
  ClassWeights weights_;
};

}  // namespace chexscale::train
