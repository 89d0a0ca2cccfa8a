// What the decoder tests share: stored values that use every bit of a bit depth, a file read and
// decoded as the loader does, and the check that a file fails to decode with an error naming it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "data/image/gray_image.h"
#include "data/image/image_decode.h"

namespace chexscale::data {

// width x height stored values that use every bit of `bits`: a ramp with a fine pattern and both
// extremes (0 and the largest value) in the first two samples.
inline std::vector<uint16_t> full_range_pattern(int width, int height, int bits) {
  const uint32_t maxval = max_sample(bits);
  std::vector<uint16_t> v(static_cast<size_t>(width) * height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const uint32_t ramp = (static_cast<uint32_t>(x) * maxval) / (width - 1);
      v[static_cast<size_t>(y) * width + x] =
          static_cast<uint16_t>((ramp + static_cast<uint32_t>(y) * 37 * (x % 3)) % (maxval + 1));
    }
  }
  v[0] = 0;
  v[1] = static_cast<uint16_t>(maxval);
  return v;
}

// read_image() of `path` (for a resize to `resize_to`; 0: full size).
inline GrayImage decode_file(const std::string& path, int resize_to = 0) {
  GrayImage img;
  std::vector<uint8_t> buffer;
  read_image(path, img, buffer, resize_to);
  return img;
}

// Decodes `path`, expecting a DataError that names it; returns its message ("" and a failure when
// the file decodes).
inline std::string expect_data_error(const std::string& path) {
  try {
    decode_file(path);
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << path << ": decoded without an error";
  return "";
}

}  // namespace chexscale::data
