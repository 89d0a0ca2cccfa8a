// Separable resizing of gray images (8-bit, or 16-bit samples of any bit depth): area averaging
// when shrinking (each output pixel is the mean of the input area it covers, as OpenCV's
// INTER_AREA) and bilinear with half-pixel centres when enlarging, chosen per axis. Vertical pass
// first into one float row, so the working set stays in cache; shrinking by an integer factor (1024
// -> 256) sums k x k blocks in integers.
#pragma once

#include <cstdint>

#include "data/image/gray_image.h"

namespace chexscale::data {

// The largest side an image is resized to (4x ChestX-ray14's 1024): a larger one is a typo that
// would need gigabytes per image and exhaust the machine's memory.
constexpr int64_t kMaxImageSize = 4096;

void resize_gray(const uint8_t* src, int src_width, int src_height, uint8_t* dst, int dst_width,
                 int dst_height);
void resize_gray(const uint16_t* src, int src_width, int src_height, uint16_t* dst, int dst_width,
                 int dst_height);

// Resizes `in` to width x height into `out` (buffer reused), keeping its bit depth; a copy when
// the size is unchanged.
void resize_gray(const GrayImage& in, int width, int height, GrayImage& out);

}  // namespace chexscale::data
