// ResNet as in torchvision/models/resnet.py (see resnet.h). Module registration order follows
// torchvision's so that named_parameters()/named_buffers() come out in its order.
#include "models/resnet.h"

#include <string>

#include "models/classifier_parts.h"

namespace chexscale::models {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(
      nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// BasicBlock (conv3x3-conv3x3) or Bottleneck (conv1x1-conv3x3-conv1x1, expansion 4): convN/bnN
// pairs with ReLU between them, plus the identity or `downsample` shortcut, then ReLU. As in
// torchvision v1.5, a Bottleneck strides in its 3x3 convolution.
class ResidualBlockImpl : public nn::Module {
 public:
  ResidualBlockImpl(bool bottleneck, int64_t inplanes, int64_t planes, int64_t stride) {
    struct ConvSpec {
      int64_t in, out, kernel, stride;
    };
    const int64_t out_planes = planes * (bottleneck ? 4 : 1);
    const std::vector<ConvSpec> specs =
        bottleneck ? std::vector<ConvSpec>{{inplanes, planes, 1, 1},
                                           {planes, planes, 3, stride},
                                           {planes, out_planes, 1, 1}}
                   : std::vector<ConvSpec>{{inplanes, planes, 3, stride}, {planes, planes, 3, 1}};
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const auto& s = specs[i];
      const std::string n = std::to_string(i + 1);
      convs_.push_back(register_module("conv" + n, conv(s.in, s.out, s.kernel, s.stride)));
      norms_.push_back(register_module("bn" + n, nn::BatchNorm2d(s.out)));
    }
    if (stride != 1 || inplanes != out_planes) {
      downsample_ = register_module(
          "downsample",
          nn::Sequential(conv(inplanes, out_planes, 1, stride), nn::BatchNorm2d(out_planes)));
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor out = x;
    for (std::size_t i = 0; i < convs_.size(); ++i) {
      out = norms_[i](convs_[i](out));
      if (i + 1 < convs_.size()) out.relu_();
    }
    out += downsample_ ? downsample_->forward(x) : x;
    return out.relu_();
  }

 private:
  std::vector<nn::Conv2d> convs_;
  std::vector<nn::BatchNorm2d> norms_;
  nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(ResidualBlock);

class ResNetImpl : public ClassifierImpl {
 public:
  ResNetImpl(const ModelOptions& options, const ResNetConfig& config)
      : options_(options),
        conv1_(register_module("conv1", conv(3, 64, 7, 2))),
        bn1_(register_module("bn1", nn::BatchNorm2d(64))) {
    const int64_t expansion = config.bottleneck ? 4 : 1;
    int64_t inplanes = 64;
    const int64_t planes[] = {64, 128, 256, 512};
    for (std::size_t i = 0; i < 4; ++i) {
      nn::Sequential layer;
      for (int64_t b = 0; b < config.layers.at(i); ++b) {
        const int64_t stride = (b == 0 && i > 0) ? 2 : 1;
        layer->push_back(ResidualBlock(config.bottleneck, inplanes, planes[i], stride));
        inplanes = planes[i] * expansion;
      }
      layers_.push_back(register_module("layer" + std::to_string(i + 1), layer));
    }
    fc_ = register_module("fc", nn::Linear(512 * expansion, options.num_classes));
    // torchvision: kaiming_normal_(fan_out, relu); fc keeps nn.Linear's default init.
    init_like_torchvision(*this, torch::kFanOut, /*zero_linear_bias=*/false);
  }

  torch::Tensor forward(torch::Tensor x) override {
    return classify_pooled(features(std::move(x)), options_.dropout, is_training(), fc_);
  }

  torch::Tensor features(torch::Tensor x) override {
    x = torch::max_pool2d(bn1_(conv1_(x)).relu_(), 3, 2, 1);
    for (auto& layer : layers_)
      x = layer->forward(x);
    return x;
  }

  nn::Linear head() override { return fc_; }
  std::string head_name() const override { return "fc"; }
  const ModelOptions& options() const override { return options_; }

 private:
  ModelOptions options_;
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  std::vector<nn::Sequential> layers_;
  nn::Linear fc_{nullptr};
};

}  // namespace

ResNetConfig resnet18_config() {
  return {false, {2, 2, 2, 2}};
}
ResNetConfig resnet34_config() {
  return {false, {3, 4, 6, 3}};
}
ResNetConfig resnet50_config() {
  return {true, {3, 4, 6, 3}};
}
ResNetConfig resnet101_config() {
  return {true, {3, 4, 23, 3}};
}

Classifier make_resnet(const ModelOptions& options, const ResNetConfig& config) {
  return std::make_shared<ResNetImpl>(options, config);
}

int64_t resnet_feature_side(int64_t input_side) {
  int64_t side = strided_side(strided_side(input_side, 7, 2, 3), 3, 2, 1);  // conv1, max pool
  for (int layer = 2; layer <= 4; ++layer)
    side = strided_side(side, 3, 2, 1);  // the first block of layer2..4 (its 1x1 shortcut alike)
  return side;
}

}  // namespace chexscale::models
