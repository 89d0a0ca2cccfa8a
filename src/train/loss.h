// CheXNet's loss: binary cross-entropy on logits, optionally weighted per class as in the paper
// (positives weighted by the negative frequency and negatives by the positive frequency). Labels
// that are not known (NaN, e.g. CheXpert's uncertain ones under --uncertain ignore) are masked
// out: the loss is the mean over the known entries, and the weights count known labels only.
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
// w- = |P| / (|P| + |N|) per class. `positives[c]` counts the positives of class c among the
// `known[c]` examples whose label c is known. A class with no positives (or no negatives) gets
// weights 1 / 1 rather than a zero term.
ClassWeights class_weights_from_counts(const std::vector<int64_t>& positives,
                                       const std::vector<int64_t>& known);

class BceWithLogitsLoss {
 public:
  BceWithLogitsLoss() = default;  // unweighted
  explicit BceWithLogitsLoss(ClassWeights weights);

  // Mean over the known entries of batch x classes of the (weighted) binary cross-entropy;
  // logits, labels [B, C], labels 1, 0 or NaN (not known). 0 when no entry is known. Reads
  // nothing back from the device: a step does not wait on it.
  torch::Tensor operator()(const torch::Tensor& logits, const torch::Tensor& labels) const;

  bool weighted() const { return weights_.positive.defined(); }
  // Moves the weights to the logits' device (called once by the owner).
  void to(torch::Device device);

 private:
  ClassWeights weights_;
};

}  // namespace chexscale::train
