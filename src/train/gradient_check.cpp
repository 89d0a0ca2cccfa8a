// A model's defined gradients and their finiteness check (see gradient_check.h).
#include "train/gradient_check.h"

namespace chexscale::train {

std::vector<torch::Tensor> defined_gradients(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  grads.reserve(params.size());
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  return grads;
}

bool gradients_finite(const std::vector<torch::Tensor>& params) {
  const std::vector<torch::Tensor> grads = defined_gradients(params);
  if (grads.empty()) return true;
  // The norm carries any inf or NaN element through (NaN^2 = NaN, inf + x = inf).
  const std::vector<torch::Tensor> norms = torch::_foreach_norm(grads, 2);
  return torch::stack(norms).sum().isfinite().item<bool>();
}

}  // namespace chexscale::train
