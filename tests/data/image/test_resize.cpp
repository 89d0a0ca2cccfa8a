// Resizing (area and bilinear) checked against values computed here by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "data/image/resize.h"

namespace chexscale::data {
namespace {

TEST(Resize, AreaDownscaleByIntegerFactorIsTheBlockMean) {
  const int w = 64, h = 48;
  std::vector<uint8_t> src(w * h);
  for (int i = 0; i < w * h; ++i)
    src[i] = static_cast<uint8_t>((i * 37 + i / 7) % 256);
  std::vector<uint8_t> dst(16 * 12);
  resize_gray(src.data(), w, h, dst.data(), 16, 12);
  for (int y = 0; y < 12; ++y) {
    for (int x = 0; x < 16; ++x) {
      int sum = 0;
      for (int dy = 0; dy < 4; ++dy) {
        for (int dx = 0; dx < 4; ++dx)
          sum += src[(y * 4 + dy) * w + x * 4 + dx];
      }
      EXPECT_NEAR(dst[y * 16 + x], sum / 16.0, 0.51) << x << "," << y;
    }
  }
}

TEST(Resize, AreaDownscaleByFractionalFactorWeighsPartialPixels) {
  // 3 -> 2: output 0 covers input [0, 1.5): (a + 0.5 b) / 1.5; output 1 covers [1.5, 3).
  const std::vector<uint8_t> src = {30, 90, 210};
  std::vector<uint8_t> dst(2);
  resize_gray(src.data(), 3, 1, dst.data(), 2, 1);
  EXPECT_NEAR(dst[0], (30 + 0.5 * 90) / 1.5, 0.51);
  EXPECT_NEAR(dst[1], (0.5 * 90 + 210) / 1.5, 0.51);
}

// Brute-force area average: each output pixel is the mean of the source rectangle it covers,
// each source pixel weighted by its overlap with it.
double area_mean(const std::vector<uint8_t>& src, int w, int h, int out_w, int out_h, int x,
                 int y) {
  const double sx = static_cast<double>(w) / out_w, sy = static_cast<double>(h) / out_h;
  auto overlap = [](double lo, double hi, int i) {
    return std::max(0.0, std::min(hi, i + 1.0) - std::max(lo, static_cast<double>(i)));
  };
  double sum = 0;
  for (int j = 0; j < h; ++j) {
    for (int i = 0; i < w; ++i)
      sum += overlap(x * sx, (x + 1) * sx, i) * overlap(y * sy, (y + 1) * sy, j) * src[j * w + i];
  }
  return sum / (sx * sy);
}

TEST(Resize, IntegerFactorOnOneAxisOnlyIsAnAreaResize) {
  // 64 x 40 -> 16 x 16: width shrinks by 4, height by 2.5. The image sits at the start of a
  // taller buffer (rows below it are 255), so that wrongly taking the k x k block path reads
  // defined memory and fails by value instead of crashing.
  const int w = 64, h = 40;
  std::vector<uint8_t> buffer(w * 64, 255);
  for (int i = 0; i < w * h; ++i)
    buffer[i] = static_cast<uint8_t>((i * 29 + i / 11) % 200);
  const std::vector<uint8_t> src(buffer.begin(), buffer.begin() + w * h);
  std::vector<uint8_t> dst(16 * 16);
  resize_gray(buffer.data(), w, h, dst.data(), 16, 16);
  for (int y = 0; y < 16; ++y) {
    for (int x = 0; x < 16; ++x)
      EXPECT_NEAR(dst[y * 16 + x], area_mean(src, w, h, 16, 16, x, y), 0.51) << x << "," << y;
  }
}

TEST(Resize, BilinearUpscaleInterpolatesBetweenCentres) {
  // 2 -> 4 with half-pixel centres: outputs at x = -0.25, 0.25, 0.75, 1.25 (clamped).
  const std::vector<uint8_t> src = {0, 200};
  std::vector<uint8_t> dst(4);
  resize_gray(src.data(), 2, 1, dst.data(), 4, 1);
  EXPECT_EQ(dst[0], 0);
  EXPECT_EQ(dst[1], 50);
  EXPECT_EQ(dst[2], 150);
  EXPECT_EQ(dst[3], 200);
}

TEST(Resize, ConstantImageStaysConstant) {
  std::vector<uint8_t> src(1000 * 700, 173);
  std::vector<uint8_t> dst(256 * 256);
  resize_gray(src.data(), 1000, 700, dst.data(), 256, 256);
  for (uint8_t v : dst)
    ASSERT_EQ(v, 173);
}

}  // namespace
}  // namespace chexscale::data
