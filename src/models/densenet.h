// DenseNet-BC (Huang et al. 2017) exactly as torchvision 0.14 builds it: the same modules,
// state_dict names, shapes and initialisation, so torchvision weights load unchanged
// (memory_efficient off).
#pragma once

#include <cstdint>
#include <vector>

#include "models/classifier.h"

namespace chexscale::models {

struct DenseNetConfig {
  int64_t growth_rate = 32;
  std::vector<int64_t> block_config = {6, 12, 24, 16};  // layers per dense block
  int64_t num_init_features = 64;
  int64_t bn_size = 4;
};

// torchvision's densenet121/169/201 configurations.
DenseNetConfig densenet121_config();
DenseNetConfig densenet169_config();
DenseNetConfig densenet201_config();

Classifier make_densenet(const ModelOptions& options, const DenseNetConfig& config);

// The side of the last feature maps for a square input of `input_side` pixels; 0 when a
// transition's unpadded 2x2 pooling meets a single pixel (LibTorch refuses the input).
int64_t densenet_feature_side(const DenseNetConfig& config, int64_t input_side);

}  // namespace chexscale::models
