// Resizing (area and bilinear), crops, flips, normalisation and ten-crop, checked against values
// computed here by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "data/resize.h"
#include "data/transforms.h"

namespace chexscale::data {
namespace {

float normalized(int v, int c) {
  return (v / 255.f - kImageNetMean[c]) / kImageNetStd[c];
}

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

std::vector<uint8_t> ramp(int w, int h) {
  std::vector<uint8_t> g(w * h);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x)
      g[y * w + x] = static_cast<uint8_t>((x * 3 + y * 5) % 256);
  }
  return g;
}

TEST(Transforms, CentreCropNormalisedAndReplicated) {
  const int w = 10, h = 8, crop = 4;
  const auto g = ramp(w, h);
  const CropParams p = choose_crop(w, h, crop, false, 1, 2, 3);
  EXPECT_EQ(p.x, 3);
  EXPECT_EQ(p.y, 2);
  EXPECT_FALSE(p.flip);
  std::vector<float> out(3 * crop * crop);
  write_normalized_crop(g.data(), w, h, p, crop, out.data());
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < crop; ++y) {
      for (int x = 0; x < crop; ++x) {
        EXPECT_FLOAT_EQ(out[(c * crop + y) * crop + x], normalized(g[(y + 2) * w + x + 3], c));
      }
    }
  }
}

// The ImageNet statistics the pretrained weights expect (torchvision's mean and std per RGB
// channel), written out here rather than taken from kImageNetMean / kImageNetStd.
TEST(Transforms, NormalisationUsesTheImageNetMeanAndStd) {
  const double mean[3] = {0.485, 0.456, 0.406};
  const double stddev[3] = {0.229, 0.224, 0.225};
  const std::vector<uint8_t> g = {0, 255, 128, 64};
  std::vector<float> out(3 * 4);
  write_normalized_crop(g.data(), 2, 2, {0, 0, false}, 2, out.data());
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 4; ++i)
      EXPECT_NEAR(out[c * 4 + i], (g[i] / 255.0 - mean[c]) / stddev[c], 1e-5) << c << "," << i;
  }
  EXPECT_NEAR(out[0], -2.1179, 1e-4);     // 0 in red: -0.485 / 0.229
  EXPECT_NEAR(out[4 + 1], 2.4286, 1e-4);  // 255 in green: 0.544 / 0.224
  EXPECT_NEAR(out[8 + 1], 2.64, 1e-4);    // 255 in blue: 0.594 / 0.225
}

TEST(Transforms, FlipMirrorsTheCrop) {
  const int w = 10, h = 8, crop = 4;
  const auto g = ramp(w, h);
  std::vector<float> out(3 * crop * crop);
  write_normalized_crop(g.data(), w, h, {1, 1, true}, crop, out.data());
  for (int y = 0; y < crop; ++y) {
    for (int x = 0; x < crop; ++x) {
      EXPECT_FLOAT_EQ(out[y * crop + x], normalized(g[(y + 1) * w + 1 + (crop - 1 - x)], 0));
    }
  }
}

TEST(Transforms, RandomCropIsDeterministicPerSeedEpochIndexAndCoversTheRange) {
  int min_x = 99, max_x = -1, flips = 0;
  for (int i = 0; i < 400; ++i) {
    const CropParams a = choose_crop(256, 256, 224, true, 5, 1, i);
    const CropParams b = choose_crop(256, 256, 224, true, 5, 1, i);
    EXPECT_EQ(a.x, b.x);
    EXPECT_EQ(a.y, b.y);
    EXPECT_EQ(a.flip, b.flip);
    ASSERT_GE(a.x, 0);
    ASSERT_LE(a.x, 32);
    ASSERT_LE(a.y, 32);
    min_x = std::min(min_x, a.x);
    max_x = std::max(max_x, a.x);
    flips += a.flip;
  }
  EXPECT_EQ(min_x, 0);
  EXPECT_EQ(max_x, 32);
  EXPECT_GT(flips, 150);
  EXPECT_LT(flips, 250);
  int same = 0;
  for (int i = 0; i < 100; ++i) {
    const CropParams a = choose_crop(256, 256, 224, true, 5, 1, i);
    const CropParams b = choose_crop(256, 256, 224, true, 5, 2, i);
    same += a.x == b.x && a.y == b.y && a.flip == b.flip;
  }
  EXPECT_LT(same, 5);  // another epoch gives other crops
}

TEST(Transforms, TenCropIsCornersCentreAndTheirFlips) {
  const int w = 9, h = 7, crop = 5;
  const auto g = ramp(w, h);
  const torch::Tensor t = ten_crop(g.data(), w, h, crop);
  ASSERT_EQ(t.sizes(), (std::vector<int64_t>{10, 3, crop, crop}));
  const int xs[5] = {0, 4, 0, 4, 2};
  const int ys[5] = {0, 0, 2, 2, 1};
  auto acc = t.accessor<float, 4>();
  for (int i = 0; i < 10; ++i) {
    for (int y = 0; y < crop; ++y) {
      for (int x = 0; x < crop; ++x) {
        const int sx = xs[i % 5] + (i >= 5 ? crop - 1 - x : x);
        EXPECT_FLOAT_EQ(acc[i][2][y][x], normalized(g[(ys[i % 5] + y) * w + sx], 2));
      }
    }
  }
}

}  // namespace
}  // namespace chexscale::data
