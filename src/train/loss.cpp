// Weighted binary cross-entropy on logits (see loss.h).
#include "train/loss.h"

#include "common/error.h"

namespace chexscale::train {

ClassWeights class_weights_from_counts(const std::vector<int64_t>& positives,
                                       const std::vector<int64_t>& known) {
  CHX_CHECK_EQ(positives.size(), known.size(), "positive vs known counts");
  const auto n = static_cast<int64_t>(positives.size());
  auto pos = torch::ones({n});
  auto neg = torch::ones({n});
  for (int64_t c = 0; c < n; ++c) {
    const int64_t p = positives[static_cast<size_t>(c)];
    const int64_t total = known[static_cast<size_t>(c)];
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
  // Unknown (NaN) labels get weight 0 and a stand-in 0; the mean over all entries is rescaled to
  // the mean over the known ones. With every label known, the weight and the scale are exactly 1:
  // the same numbers as the plain BCE. The scale stays a tensor on the logits' device (no
  // read-back, no sync with the device); with nothing known every term is 0 and so is the loss.
  const auto known = torch::isnan(labels).logical_not();
  const auto mask = known.to(torch::kFloat32);
  const auto y = torch::where(known, labels, torch::zeros_like(labels));
  const auto known_count = mask.sum().clamp_min(1);
  const auto scale = torch::full({}, static_cast<double>(x.numel()), mask.options()) / known_count;
  if (!weighted()) {
    return torch::binary_cross_entropy_with_logits(x, y, mask) * scale;
  }
  CHX_CHECK_EQ(x.size(1), weights_.positive.numel(), "classes in logits vs class weights");
  // -log(sigmoid(x)) = softplus(-x); -log(1 - sigmoid(x)) = softplus(x): stable for any x.
  const auto pos_term = weights_.positive * y * torch::softplus(-x);
  const auto neg_term = weights_.negative * (1 - y) * torch::softplus(x);
  return ((pos_term + neg_term) * mask).mean() * scale;
}

void BceWithLogitsLoss::to(torch::Device device) {
  if (!weighted()) return;
  weights_.positive = weights_.positive.to(device);
  weights_.negative = weights_.negative.to(device);
}

}  // namespace chexscale::train
