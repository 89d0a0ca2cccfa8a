// Shared head and initialisation of the backbones (see classifier_parts.h).
#include "models/classifier_parts.h"

namespace chexscale::models {

namespace nn = torch::nn;

torch::Tensor classify_pooled(const torch::Tensor& features, double dropout, bool training,
                              nn::Linear& head) {
  torch::Tensor pooled = torch::adaptive_avg_pool2d(features, {1, 1}).flatten(1);
  if (dropout > 0) pooled = torch::dropout(pooled, dropout, training);
  return head(pooled);
}

void init_like_torchvision(nn::Module& model, nn::init::FanModeType conv_fan_mode,
                           bool zero_linear_bias) {
  torch::NoGradGuard no_grad;
  for (const auto& m : model.modules(/*include_self=*/false)) {
    if (auto* conv = m->as<nn::Conv2d>()) {
      // DenseNet's kaiming_normal_ defaults (leaky_relu, a=0) give the same gain as ReLU.
      nn::init::kaiming_normal_(conv->weight, 0, conv_fan_mode, torch::kReLU);
    } else if (auto* bn = m->as<nn::BatchNorm2d>()) {
      nn::init::constant_(bn->weight, 1);
      nn::init::constant_(bn->bias, 0);
    } else if (auto* linear = m->as<nn::Linear>(); linear != nullptr && zero_linear_bias) {
      nn::init::constant_(linear->bias, 0);
    }
  }
}

int64_t strided_side(int64_t side, int64_t kernel, int64_t stride, int64_t padding) {
  const int64_t padded = side + 2 * padding;
  return padded < kernel ? 0 : (padded - kernel) / stride + 1;
}

}  // namespace chexscale::models
