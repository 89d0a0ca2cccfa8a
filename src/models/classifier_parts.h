// What every torchvision-style backbone here shares: the pooled, optionally dropped-out linear head
// and torchvision's weight initialisation.
#pragma once

#include <torch/torch.h>

namespace chexscale::models {

// head(dropout(flatten(adaptive_avg_pool(features, 1x1)))); dropout only when training and p > 0.
torch::Tensor classify_pooled(const torch::Tensor& features, double dropout, bool training,
                              torch::nn::Linear& head);

// torchvision's init: kaiming_normal_ (ReLU gain) for every Conv2d with the given fan mode,
// BatchNorm weight 1 and bias 0, Linear bias 0 when `zero_linear_bias` (DenseNet); Linear weights
// keep nn.Linear's default (LibTorch's Linear matches PyTorch's).
void init_like_torchvision(torch::nn::Module& model, torch::nn::init::FanModeType conv_fan_mode,
                           bool zero_linear_bias);

// The output side of a square convolution or pooling window over `side` pixels, as LibTorch
// computes it; 0 when the padded input is smaller than the window (LibTorch refuses that input).
int64_t strided_side(int64_t side, int64_t kernel, int64_t stride, int64_t padding);

}  // namespace chexscale::models
