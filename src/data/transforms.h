// CheXNet's input transforms on 8-bit gray images already resized (224 crop of 256): random crop
// and horizontal flip for training or a centre crop, ImageNet mean/std normalisation, gray
// replicated to 3 channels, written straight into a float tensor. Random choices depend only on
// (seed, epoch, index), so any thread may transform any example.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>

namespace chexscale::data {

// CheXNet's input: images resized to 256 x 256, then a 224 x 224 crop.
inline constexpr int64_t kDefaultImageSize = 256;
inline constexpr int64_t kDefaultCropSize = 224;

inline constexpr std::array<float, 3> kImageNetMean = {0.485f, 0.456f, 0.406f};
inline constexpr std::array<float, 3> kImageNetStd = {0.229f, 0.224f, 0.225f};

struct CropParams {
  int x = 0;  // left column of the crop in the source image
  int y = 0;  // top row
  bool flip = false;
};

// A random crop position and flip (augment) or the centre crop without flip.
CropParams choose_crop(int width, int height, int crop, bool augment, uint64_t seed, int64_t epoch,
                       int64_t index);

// Writes the crop x crop window of `gray` (width x height) at `params`, normalised and
// replicated, into dst[3][crop][crop] (contiguous float).
void write_normalized_crop(const uint8_t* gray, int width, int height, const CropParams& params,
                           int crop, float* dst);

// Evaluation ten-crop: the four corner crops, the centre crop, then the same five flipped,
// as a [10, 3, crop, crop] float tensor (average the model's outputs over dim 0).
torch::Tensor ten_crop(const uint8_t* gray, int width, int height, int crop);
// Writes the same ten crops into dst[10][3][crop][crop].
void write_ten_crop(const uint8_t* gray, int width, int height, int crop, float* dst);

}  // namespace chexscale::data
