// The architectures chexscale can build, by torchvision name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/classifier.h"

namespace chexscale::models {

// Builds a freshly initialised model; UsageError when options.validate() refuses the options.
Classifier make_model(const ModelOptions& options);

// Every architecture name make_model accepts, in display order.
std::vector<std::string> architectures();

// Trainable parameters (what torchvision's sum(p.numel() for p in parameters()) counts).
int64_t count_parameters(const torch::nn::Module& model);

}  // namespace chexscale::models
