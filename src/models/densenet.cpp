// DenseNet as in torchvision/models/densenet.py (see densenet.h). Module registration order
// follows torchvision's so that named_parameters()/named_buffers() come out in its order.
#include "models/densenet.h"

#include <string>

#include "models/classifier_parts.h"

namespace chexscale::models {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
}

// _DenseLayer: BN-ReLU-Conv1x1 bottleneck then BN-ReLU-Conv3x3, producing growth_rate channels.
class DenseLayerImpl : public nn::Module {
 public:
  DenseLayerImpl(int64_t in_features, int64_t growth_rate, int64_t bn_size)
      : norm1_(register_module("norm1", nn::BatchNorm2d(in_features))),
        conv1_(register_module("conv1", conv(in_features, bn_size * growth_rate, 1, 1, 0))),
        norm2_(register_module("norm2", nn::BatchNorm2d(bn_size * growth_rate))),
        conv2_(register_module("conv2", conv(bn_size * growth_rate, growth_rate, 3, 1, 1))) {}

  // `concatenated` is the channel-wise concatenation of all earlier features of the block.
  torch::Tensor forward(const torch::Tensor& concatenated) {
    torch::Tensor out = conv1_(norm1_(concatenated).relu_());
    return conv2_(norm2_(out).relu_());
  }

 private:
  nn::BatchNorm2d norm1_;
  nn::Conv2d conv1_;
  nn::BatchNorm2d norm2_;
  nn::Conv2d conv2_;
};
TORCH_MODULE(DenseLayer);

// _DenseBlock: layers denselayer1..n, each fed the concatenation of the input and all earlier
// outputs.
class DenseBlockImpl : public nn::Module {
 public:
  DenseBlockImpl(int64_t num_layers, int64_t in_features, int64_t bn_size, int64_t growth_rate) {
    for (int64_t i = 0; i < num_layers; ++i) {
      layers_.push_back(
          register_module("denselayer" + std::to_string(i + 1),
                          DenseLayer(in_features + i * growth_rate, growth_rate, bn_size)));
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    std::vector<torch::Tensor> features{x};
    features.reserve(layers_.size() + 1);
    for (auto& layer : layers_)
      features.push_back(layer(torch::cat(features, 1)));
    return torch::cat(features, 1);
  }

 private:
  std::vector<DenseLayer> layers_;
};
TORCH_MODULE(DenseBlock);

// _Transition: BN-ReLU-Conv1x1 halving the channels, then 2x2 average pooling.
class TransitionImpl : public nn::Module {
 public:
  TransitionImpl(int64_t in_features, int64_t out_features)
      : norm_(register_module("norm", nn::BatchNorm2d(in_features))),
        conv_(register_module("conv", conv(in_features, out_features, 1, 1, 0))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    return torch::avg_pool2d(conv_(norm_(x).relu_()), 2, 2);
  }

 private:
  nn::BatchNorm2d norm_;
  nn::Conv2d conv_;
};
TORCH_MODULE(Transition);

class DenseNetImpl : public ClassifierImpl {
 public:
  DenseNetImpl(const ModelOptions& options, const DenseNetConfig& config) : options_(options) {
    features_->push_back("conv0", conv(3, config.num_init_features, 7, 2, 3));
    features_->push_back("norm0", nn::BatchNorm2d(config.num_init_features));
    features_->push_back("relu0", nn::ReLU(nn::ReLUOptions().inplace(true)));
    features_->push_back("pool0", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    int64_t num_features = config.num_init_features;
    const auto blocks = static_cast<int64_t>(config.block_config.size());
    for (int64_t i = 0; i < blocks; ++i) {
      const int64_t num_layers = config.block_config[i];
      features_->push_back(
          "denseblock" + std::to_string(i + 1),
          DenseBlock(num_layers, num_features, config.bn_size, config.growth_rate));
      num_features += num_layers * config.growth_rate;
      if (i != blocks - 1) {
        features_->push_back("transition" + std::to_string(i + 1),
                             Transition(num_features, num_features / 2));
        num_features /= 2;
      }
    }
    features_->push_back("norm5", nn::BatchNorm2d(num_features));
    register_module("features", features_);
    classifier_ = register_module("classifier", nn::Linear(num_features, options.num_classes));
    // torchvision: kaiming_normal_ with its defaults (fan_in), Linear bias 0.
    init_like_torchvision(*this, torch::kFanIn, /*zero_linear_bias=*/true);
  }

  torch::Tensor forward(torch::Tensor x) override {
    return classify_pooled(features(std::move(x)), options_.dropout, is_training(), classifier_);
  }

  torch::Tensor features(torch::Tensor x) override {
    return features_->forward(std::move(x)).relu_();
  }

  nn::Linear head() override { return classifier_; }
  std::string head_name() const override { return "classifier"; }
  const ModelOptions& options() const override { return options_; }

 private:
  ModelOptions options_;
  nn::Sequential features_;
  nn::Linear classifier_{nullptr};
};

}  // namespace

DenseNetConfig densenet121_config() {
  return {32, {6, 12, 24, 16}, 64, 4};
}
DenseNetConfig densenet169_config() {
  return {32, {6, 12, 32, 32}, 64, 4};
}
DenseNetConfig densenet201_config() {
  return {32, {6, 12, 48, 32}, 64, 4};
}

Classifier make_densenet(const ModelOptions& options, const DenseNetConfig& config) {
  return std::make_shared<DenseNetImpl>(options, config);
}

int64_t densenet_feature_side(const DenseNetConfig& config, int64_t input_side) {
  int64_t side = strided_side(strided_side(input_side, 7, 2, 3), 3, 2, 1);  // conv0, pool0
  for (size_t i = 0; i + 1 < config.block_config.size(); ++i)
    side = strided_side(side, 2, 2, 0);  // each transition's average pooling
  return side;
}

}  // namespace chexscale::models
