// Class activation maps (Zhou et al. 2016, as the CheXNet paper shows them): the head's weights
// for one class over the last feature maps, upsampled to the X-ray and blended over it in colour.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "train/inference.h"

namespace chexscale::train {

// The raw map of class `cls` for input [1, 3, h, w]: sum_k w[cls, k] * F_k, [h', w'] float32.
torch::Tensor class_activation_map(models::ClassifierImpl& model, const torch::Tensor& input,
                                   int64_t cls);

// The map of `cls` over the original image, min-max normalised to [0, 1], [H, W] float32 (0
// outside the centre crop the network saw).
torch::Tensor image_activation_map(const InferenceModel& m, const PreparedImage& image,
                                   int64_t cls);

// RGB pixels (H x W x 3) of the original X-ray with the map in "jet" colours blended over it.
std::vector<uint8_t> blend_heatmap(const data::GrayImage& gray, const torch::Tensor& map01,
                                   double alpha = 0.5);

}  // namespace chexscale::train
