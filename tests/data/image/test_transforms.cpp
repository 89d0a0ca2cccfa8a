// Crops, flips, normalisation and ten-crop, checked against values computed here by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "data/image/transforms.h"

namespace chexscale::data {
namespace {

float normalized(int v, int c) {
  return (v / 255.f - kImageNetMean[c]) / kImageNetStd[c];
}

GrayView gray8(const std::vector<uint8_t>& g, int w, int h) {
  GrayView v;
  v.pixels = g.data();
  v.width = w;
  v.height = h;
  return v;
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
  write_normalized_crop(gray8(g, w, h), p, crop, out.data());
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
  write_normalized_crop(gray8(g, 2, 2), {0, 0, false}, 2, out.data());
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
  write_normalized_crop(gray8(g, w, h), {1, 1, true}, crop, out.data());
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
  const torch::Tensor t = ten_crop(gray8(g, w, h), crop);
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
