// Bit-depth reduction of gray images for display (see gray_image.h).
#include "data/image/gray_image.h"

namespace chexscale::data {

GrayImage to_8bit(const GrayImage& image) {
  if (!image.wide()) return image;
  GrayImage out;
  out.width = image.width;
  out.height = image.height;
  out.pixels.resize(image.pixels16.size());
  const uint32_t maxval = max_sample(image.bit_depth);
  for (size_t i = 0; i < image.pixels16.size(); ++i) {
    out.pixels[i] = static_cast<uint8_t>((image.pixels16[i] * 255U + maxval / 2) / maxval);
  }
  return out;
}

}  // namespace chexscale::data
