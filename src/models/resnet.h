// ResNet (He et al. 2016) exactly as torchvision 0.14 builds it: BasicBlock (18/34) and Bottleneck
// (50/101) blocks, the same state_dict names, shapes and initialisation (zero_init_residual off).
#pragma once

#include <cstdint>
#include <vector>

#include "models/classifier.h"

namespace chexscale::models {

struct ResNetConfig {
  bool bottleneck = true;                      // Bottleneck (expansion 4) or BasicBlock
  std::vector<int64_t> layers = {3, 4, 6, 3};  // blocks in layer1..layer4
};

// torchvision's resnet18/34/50/101 configurations.
ResNetConfig resnet18_config();
ResNetConfig resnet34_config();
ResNetConfig resnet50_config();
ResNetConfig resnet101_config();

Classifier make_resnet(const ModelOptions& options, const ResNetConfig& config);

// The side of the last feature maps for a square input of `input_side` pixels (>= 1 for any
// side >= 1: every stride is padded).
int64_t resnet_feature_side(int64_t input_side);

}  // namespace chexscale::models
