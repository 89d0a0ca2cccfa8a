// A model's gradients: the defined ones, and whether they are all finite (the check behind --on-nan
// and the fp16 loss scaler's overflow detection, in a few kernels whatever the parameter count).
#pragma once

#include <torch/torch.h>

#include <vector>

namespace chexscale::train {

// The gradients of `params` that are defined, in parameter order (they alias the gradients).
std::vector<torch::Tensor> defined_gradients(const std::vector<torch::Tensor>& params);

// True when no defined gradient of `params` holds an inf or a NaN (parameters without a gradient
// are ignored; no gradient at all is finite). One multi-tensor L2 norm (torch's _foreach_norm:
// a handful of kernels on a GPU rather than one reduction per parameter; as fast as per-tensor
// sums on a CPU), then one host sync. Like PyTorch's clip_grad_norm_(error_if_nonfinite), it
// judges the norm: a gradient whose norm overflows float (an element above ~1.8e19) counts as
// non-finite too.
bool gradients_finite(const std::vector<torch::Tensor>& params);

}  // namespace chexscale::train
