// Channels-last (NHWC) memory format for convolutional training: the layout tensor cores and
// oneDNN convolutions prefer. Only the layout changes; shapes, values and names stay as they are.
#pragma once

#include <torch/torch.h>

namespace chexscale::train {

// Converts every 4-D parameter and buffer of `module` (and a 4-D gradient, if any) to
// channels-last in place. The tensors keep their identity (set_data), so an optimizer or gradient
// reducer built on the parameters stays valid.
void convert_to_channels_last(torch::nn::Module& module);

// `images` ([N, C, H, W]) in channels-last layout; UsageError for a tensor that is not 4-D.
torch::Tensor to_channels_last(const torch::Tensor& images);

}  // namespace chexscale::train
