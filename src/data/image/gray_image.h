// A decoded gray image and a read-only view of one: 8-bit samples, or 16-bit samples of which
// `bit_depth` bits are used (a 12-bit DICOM, a 16-bit PNG). Normalisation divides by the largest
// value the bit depth allows, 2^bit_depth - 1, as TorchXRayVision's normalize(img, maxval) does.
#pragma once

#include <cstdint>
#include <vector>

namespace chexscale::data {

// The largest sample value of `bit_depth` bits.
inline uint32_t max_sample(int bit_depth) {
  return (1U << bit_depth) - 1U;
}

struct GrayImage {
  int width = 0;
  int height = 0;
  int bit_depth = 8;               // 8: samples in `pixels`; 9-16: samples in `pixels16`
  std::vector<uint8_t> pixels;     // row-major, width * height, when bit_depth == 8
  std::vector<uint16_t> pixels16;  // row-major, width * height, when bit_depth > 8

  bool wide() const { return bit_depth > 8; }
};

// Pixels held elsewhere (a shard record, a GrayImage). 16-bit storage may hold 8-bit values
// (bit_depth 8): a 16-bit shard keeps its 8-bit sources' records at their own depth.
struct GrayView {
  const uint8_t* pixels = nullptr;     // 8-bit storage, or
  const uint16_t* pixels16 = nullptr;  // 16-bit storage
  int width = 0;
  int height = 0;
  int bit_depth = 8;
};

inline GrayView view_of(const GrayImage& image) {
  GrayView v;
  if (image.wide()) {
    v.pixels16 = image.pixels16.data();
  } else {
    v.pixels = image.pixels.data();
  }
  v.width = image.width;
  v.height = image.height;
  v.bit_depth = image.bit_depth;
  return v;
}

// The image at 8 bits (the top 8 of its bit_depth bits, rounded): for display (heat maps).
GrayImage to_8bit(const GrayImage& image);

}  // namespace chexscale::data
