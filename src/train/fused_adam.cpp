// FusedAdam (see fused_adam.h): the update of torch::optim::Adam (LibTorch 1.13 adam.cpp, the
// PyTorch Adam of Kingma & Ba with bias correction and L2 weight decay added to the gradient):
//   g' = g + wd * p;  m = b1 * m + (1 - b1) * g';  v = b2 * v + (1 - b2) * g'^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
#include "train/fused_adam.h"

#include "common/torch_compat.h"
#include "train/adam_foreach.h"
#include "train/fused_adam_kernel.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <map>

namespace chexscale::train {
namespace {

bool fusable(const torch::Tensor& p, const torch::Tensor& g, const torch::Tensor& m,
             const torch::Tensor& v) {
  const auto same_layout = [&](const torch::Tensor& t) {
    return t.device() == p.device() && t.scalar_type() == torch::kFloat &&
           t.strides() == p.strides() && t.sizes() == p.sizes() && !t.is_sparse();
  };
  return p.device().is_cpu() && p.scalar_type() == torch::kFloat && !g.is_sparse() &&
         p.is_non_overlapping_and_dense() && same_layout(g) && same_layout(m) && same_layout(v);
}

// torch::optim::Adam's own tensor operations, for amsgrad and sparse gradients.
void tensor_update(torch::Tensor& p, torch::Tensor grad, torch::optim::AdamParamState& state,
                   const torch::optim::AdamOptions& o, double bias1, double bias2) {
  if (o.weight_decay() != 0) grad = grad.add(p, o.weight_decay());
  const auto [beta1, beta2] = o.betas();
  state.exp_avg().mul_(beta1).add_(grad, 1 - beta1);
  state.exp_avg_sq().mul_(beta2).addcmul_(grad, grad, 1 - beta2);
  torch::Tensor denom;
  if (o.amsgrad()) {
    torch::max_out(state.max_exp_avg_sq(), state.exp_avg_sq(), state.max_exp_avg_sq());
    denom = (state.max_exp_avg_sq().sqrt() / std::sqrt(bias2)).add_(o.eps());
  } else {
    denom = (state.exp_avg_sq().sqrt() / std::sqrt(bias2)).add_(o.eps());
  }
  p.addcdiv_(state.exp_avg(), denom, -o.lr() / bias1);
}

// The fused loop over a dense float CPU tensor, on LibTorch's threads.
void fused_update(torch::Tensor& p, const torch::Tensor& grad, torch::optim::AdamParamState& state,
                  const torch::optim::AdamOptions& o, double bias1, double bias2) {
  const auto [beta1, beta2] = o.betas();
  const AdamScalars s{static_cast<float>(beta1),
                      static_cast<float>(1 - beta1),
                      static_cast<float>(beta2),
                      static_cast<float>(1 - beta2),
                      static_cast<float>(std::sqrt(bias2)),
                      static_cast<float>(o.eps()),
                      static_cast<float>(-o.lr() / bias1),
                      static_cast<float>(o.weight_decay())};
  float* pd = p.data_ptr<float>();
  const float* gd = grad.data_ptr<float>();
  float* md = state.exp_avg().data_ptr<float>();
  float* vd = state.exp_avg_sq().data_ptr<float>();
  at::parallel_for(0, p.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    adam_update_float(pd + begin, gd + begin, md + begin, vd + begin, end - begin, s);
  });
}

}  // namespace

FusedAdam::FusedAdam(const std::vector<torch::Tensor>& params, torch::optim::AdamOptions options)
    : torch::optim::Adam(params, std::move(options)) {}

torch::Tensor FusedAdam::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    std::map<int64_t, AdamForeachLists> by_step;  // the _foreach_ path's tensors, by step count
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto key = compat::optimizer_state_key(p);
      auto it = state_.find(key);
      if (it == state_.end()) {
        auto fresh = std::make_unique<torch::optim::AdamParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        if (o.amsgrad()) {
          fresh->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        }
        it = state_.emplace(key, std::move(fresh)).first;
      }
      auto& state = static_cast<torch::optim::AdamParamState&>(*it->second);
      state.step(state.step() + 1);
      const auto [beta1, beta2] = o.betas();
      const double bias1 = 1 - std::pow(beta1, state.step());
      const double bias2 = 1 - std::pow(beta2, state.step());
      const torch::Tensor& grad = p.grad();
      if (o.amsgrad() || grad.is_sparse()) {
        tensor_update(p, grad, state, o, bias1, bias2);
        continue;
      }
      if (!fusable(p, grad, state.exp_avg(), state.exp_avg_sq())) {  // GPUs, other dtypes
        AdamForeachLists& lists = by_step[state.step()];
        lists.params.push_back(p);
        lists.grads.push_back(grad);
        lists.exp_avgs.push_back(state.exp_avg());
        lists.exp_avg_sqs.push_back(state.exp_avg_sq());
        continue;
      }
      fused_update(p, grad, state, o, bias1, bias2);
    }
    const auto [beta1, beta2] = o.betas();
    for (auto& [step, lists] : by_step)
      adam_foreach_update(lists, o, 1 - std::pow(beta1, step), 1 - std::pow(beta2, step));
  }
  return loss;
}

}  // namespace chexscale::train
