// Adam through _foreach_ operations (see adam_foreach.h), in the order of LibTorch's adam.cpp:
//   g' = g + wd * p;  m = b1 * m + (1 - b1) * g';  v = b2 * v + (1 - b2) * g'^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
#include "train/adam_foreach.h"

#include <cmath>

namespace chexscale::train {

void adam_foreach_update(AdamForeachLists& lists, const torch::optim::AdamOptions& options,
                         double bias1, double bias2) {
  if (lists.params.empty()) return;
  const auto [beta1, beta2] = options.betas();
  std::vector<torch::Tensor> grads = lists.grads;
  if (options.weight_decay() != 0) {
    grads = at::_foreach_add(lists.grads, lists.params, options.weight_decay());
  }
  at::_foreach_mul_(lists.exp_avgs, beta1);
  at::_foreach_add_(lists.exp_avgs, grads, 1 - beta1);
  at::_foreach_mul_(lists.exp_avg_sqs, beta2);
  at::_foreach_addcmul_(lists.exp_avg_sqs, grads, grads, 1 - beta2);
  std::vector<torch::Tensor> denom = at::_foreach_sqrt(lists.exp_avg_sqs);
  at::_foreach_div_(denom, std::sqrt(bias2));
  at::_foreach_add_(denom, options.eps());
  at::_foreach_addcdiv_(lists.params, lists.exp_avgs, denom, -options.lr() / bias1);
}

}  // namespace chexscale::train
