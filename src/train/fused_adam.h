// Adam with one fused pass per parameter on CPU: the same update as torch::optim::Adam (and the
// same state, so checkpoints and optimizer_state() do not change), computed in a single loop
// over parameter, gradient and both moments instead of ~9 tensor operations and a temporary.
//
// Why: LibTorch 1.13's C++ Adam makes ~20 passes over memory per parameter and allocates a
// fresh `denom` tensor each step; on a CPU worker that costs more than DenseNet-121's forward at
// small images. The fused loop reads p, g, m, v once and writes p, m, v once.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace chexscale::train {

class FusedAdam : public torch::optim::Adam {
 public:
  FusedAdam(const std::vector<torch::Tensor>& params, torch::optim::AdamOptions options);

  // Parameters that are dense float32 CPU tensors laid out like their gradient and moments take
  // the fused loop; the others (GPU tensors, other dtypes) are updated together through
  // _foreach_ operations (adam_foreach.h: few kernel launches per step on a GPU, as
  // torch.optim.Adam's default there); amsgrad and sparse gradients take torch::optim::Adam's
  // per-tensor operations. The result never depends on which path ran beyond rounding.
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace chexscale::train
