// CheXNet's input transforms on gray images already resized (224 crop of 256): random crop
// and horizontal flip for training or a centre crop, scaling by the image's bit depth (v / 255 for
// 8-bit, v / 4095 for 12-bit, v / 65535 for 16-bit), ImageNet mean/std normalisation, gray
// replicated to 3 channels, written straight into a float tensor. Random choices depend only on
// (seed, epoch, index), so any thread may transform any example.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>

#include "data/image/gray_image.h"

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

// Writes the crop x crop window of `gray` at `params`, scaled to [0, 1] by its bit depth,
// normalised and replicated, into dst[3][crop][crop] (contiguous float).
void write_normalized_crop(const GrayView& gray, const CropParams& params, int crop, float* dst);

// Evaluation ten-crop: the four corner crops, the centre crop, then the same five flipped,
// as a [10, 3, crop, crop] float tensor (average the model's outputs over dim 0).
torch::Tensor ten_crop(const GrayView& gray, int crop);
// Writes the same ten crops into dst[10][3][crop][crop].
void write_ten_crop(const GrayView& gray, int crop, float* dst);

}  // namespace chexscale::data
