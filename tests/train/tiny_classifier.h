// A small real convolutional Classifier for fast unit tests of the training step (two 3x3
// convolutions, global average pooling, a linear head): same interface as DenseNet/ResNet.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "models/classifier.h"

namespace chexscale::test_util {

class TinyClassifierImpl : public models::ClassifierImpl {
 public:
  explicit TinyClassifierImpl(int64_t num_classes = models::kChestXray14Classes) {
    options_.arch = "tiny";
    options_.num_classes = num_classes;
    conv1_ =
        register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)));
    conv2_ =
        register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 3).padding(1)));
    fc_ = register_module("fc", torch::nn::Linear(16, num_classes));
  }
  torch::Tensor features(torch::Tensor x) override {
    x = torch::relu(conv1_->forward(x));
    return torch::relu(conv2_->forward(x));
  }
  torch::Tensor forward(torch::Tensor x) override { return fc_->forward(features(x).mean({2, 3})); }
  torch::nn::Linear head() override { return fc_; }
  std::string head_name() const override { return "fc"; }
  const models::ModelOptions& options() const override { return options_; }

 private:
  models::ModelOptions options_;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::Conv2d conv2_{nullptr};
  torch::nn::Linear fc_{nullptr};
};

inline models::Classifier make_tiny_classifier(uint64_t seed) {
  torch::manual_seed(seed);
  return std::make_shared<TinyClassifierImpl>();
}

}  // namespace chexscale::test_util
