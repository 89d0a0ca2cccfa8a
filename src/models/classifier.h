// The interface every CheXNet backbone implements: torchvision-identical modules with a
// replaceable classifier head, plus access to the last feature maps for class activation maps.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace chexscale::models {

// Number of ChestX-ray14 pathologies: the default head size.
inline constexpr int64_t kChestXray14Classes = 14;

struct ModelOptions {
  std::string arch = "densenet121";  // densenet121/169/201, resnet18/34/50/101
  int64_t num_classes = kChestXray14Classes;
  double dropout = 0.0;  // before the classifier head; 0 = none (as torchvision)

  // UsageError for an unknown arch (listing the valid ones), num_classes < 1, or dropout
  // outside [0, 1), naming the field. Defined with the architectures (registry.cpp).
  void validate() const;
};

class ClassifierImpl : public torch::nn::Module {
 public:
  // Logits [N, num_classes] (no sigmoid).
  virtual torch::Tensor forward(torch::Tensor x) = 0;
  // The last convolutional feature maps after the final activation, [N, C, h, w]; the input of
  // global average pooling. forward(x) == head(dropout(avgpool(features(x)))).
  virtual torch::Tensor features(torch::Tensor x) = 0;
  // The final linear layer ("classifier" in DenseNet, "fc" in ResNet).
  virtual torch::nn::Linear head() = 0;
  // torchvision's name of the head's parameters prefix: "classifier" or "fc".
  virtual std::string head_name() const = 0;
  virtual const ModelOptions& options() const = 0;
};

using Classifier = std::shared_ptr<ClassifierImpl>;

}  // namespace chexscale::models
