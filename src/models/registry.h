// The architectures chexscale can build, by torchvision name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/classifier.h"

namespace chexscale::models {

// Builds a freshly initialised model; UsageError when options.validate() refuses the options.
Classifier make_model(const ModelOptions& options);

// The smallest square input side, in pixels, `arch` computes on: 29 for every DenseNet (the
// transitions' unpadded pooling needs 2 pixels), 1 for every ResNet (all strides padded).
// UsageError for an unknown arch.
int64_t smallest_input_side(const std::string& arch);

// UsageError naming `field` (an options struct's field, e.g. "crop_size") when a square input of
// `side` pixels is below smallest_input_side(arch), so that a bad size is refused before any
// work starts rather than by LibTorch inside the first forward pass.
void check_input_side(const std::string& arch, int64_t side, std::string_view field);

// Every architecture name make_model accepts, in display order.
std::vector<std::string> architectures();

// Trainable parameters (what torchvision's sum(p.numel() for p in parameters()) counts).
int64_t count_parameters(const torch::nn::Module& model);

}  // namespace chexscale::models
