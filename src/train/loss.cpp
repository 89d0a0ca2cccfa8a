// Weighted binary cross-entropy on logits (see loss.h).
#include "train/loss.h"

#include "common/error.h"

namespace chexscale::train {

ClassWeights class_weights_from_counts(const std::vector<int64_t>& positives, int64_t total) {
  CHX_CHECK(total > 0, "class weights need at least one training example");
  const auto n = static_cast<int64_t>(positives.size());
  auto pos = torch::ones({n});
  auto neg = torch::ones({n});
  for (int64_t c = 0; c < n; ++c) {
    const int64_t p = positives[static_cast<size_t>(c)];
    CHX_CHECK(p >= 0 && p <= total, "class {}: {} positives of {} examples", c, p, total);
    if (p == 0 || p == total) continue;
    pos[c] = static_cast<double>(total - p) / static_cast<double>(total);
    neg[c] = static_cast<double>(p) / static_cast<double>(total);
  }
  return {pos, neg};
}

BceWithLogitsLoss::BceWithLogitsLoss(ClassWeights weights) : weights_(std::move(weights)) {
  CHX_CHECK(weights_.positive.defined() && weights_.negative.defined(),
            "both positive and negative class weights are needed");
  CHX_CHECK_EQ(weights_.positive.numel(), weights_.negative.numel(), "class weight sizes");
}

torch::Tensor BceWithLogitsLoss::operator()(const torch::Tensor& logits,
                                            const torch::Tensor& labels) const {
  CHX_CHECK(logits.sizes() == labels.sizes(), "logits {} vs labels {}", c10::str(logits.sizes()),
            c10::str(labels.sizes()));
  const auto x = logits.to(torch::kFloat32);
  if (!weighted()) return torch::binary_cross_entropy_with_logits(x, labels);
  CHX_CHECK_EQ(x.size(1), weights_.positive.numel(), "classes in logits vs class weights");
  // -log(sigmoid(x)) = softplus(-x); -log(1 - sigmoid(x)) = softplus(x): stable for any x.
  const auto pos_term = weights_.positive * labels * torch::softplus(-x);
  const auto neg_term = weights_.negative * (1 - labels) * torch::softplus(x);
  return (pos_term + neg_term).mean();
}

void BceWithLogitsLoss::to(torch::Device device) {
  if (!weighted()) return;
  weights_.positive = weights_.positive.to(device);
  weights_.negative = weights_.negative.to(device);
}

}  // namespace chexscale::train
