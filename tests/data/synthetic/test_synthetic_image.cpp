// Synthetic images: each class's trace appears in its own region exactly when its label is set;
// each `synth --format` encoding decodes back to the image (in the high 8 of its bits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "common/error.h"
#include "data/image/image_decode.h"
#include "data/synthetic/synthetic.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {

bool inside(const PixelRect& r, int x, int y) {
  return x >= r.x0 && x < r.x1 && y >= r.y0 && y < r.y1;
}

TEST(Synthetic, RegionsAreDisjointAndInsideTheImage) {
  for (int size : {64, 128, 1024}) {
    for (int a = 0; a < kNumPathologies; ++a) {
      const PixelRect ra = synthetic_region(a, size);
      EXPECT_GE(ra.x0, 0);
      EXPECT_LE(ra.x1, size);
      EXPECT_GT(ra.x1 - ra.x0, size / 10);
      for (int b = a + 1; b < kNumPathologies; ++b) {
        const PixelRect rb = synthetic_region(b, size);
        EXPECT_TRUE(ra.x1 <= rb.x0 || rb.x1 <= ra.x0 || ra.y1 <= rb.y0 || rb.y1 <= ra.y0)
            << a << " overlaps " << b;
      }
    }
  }
}

// With the same background seed, the image with label c differs from the one without it only
// inside region c, and there substantially.
TEST(Synthetic, EachTraceIsPresentExactlyWhenItsLabelIsSet) {
  const int size = 128;
  for (uint64_t seed : {1u, 2u}) {
    const GrayImage none = render_synthetic_image(0, size, seed);
    for (int c = 0; c < kNumPathologies; ++c) {
      const GrayImage with = render_synthetic_image(static_cast<LabelBits>(1U << c), size, seed);
      const PixelRect r = synthetic_region(c, size);
      double diff_inside = 0;
      int changed_outside = 0;
      for (int y = 0; y < size; ++y) {
        for (int x = 0; x < size; ++x) {
          const int d = std::abs(with.pixels[y * size + x] - none.pixels[y * size + x]);
          if (inside(r, x, y))
            diff_inside += d;
          else
            changed_outside += d != 0;
        }
      }
      const double area = (r.x1 - r.x0) * (r.y1 - r.y0);
      EXPECT_EQ(changed_outside, 0) << "class " << c;
      EXPECT_GT(diff_inside / area, 8.0) << "class " << c << " trace too faint";
    }
  }
  // Another seed changes the background, not just the noise.
  EXPECT_NE(render_synthetic_image(0, size, 1).pixels, render_synthetic_image(0, size, 2).pixels);
}

// Max |decoded >> (bits - 8) - image| over the image.
int max_error_8bit(const GrayImage& decoded, const GrayImage& image) {
  EXPECT_EQ(decoded.width, image.width);
  EXPECT_EQ(decoded.height, image.height);
  int worst = 0;
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    const int v =
        decoded.wide() ? decoded.pixels16.at(i) >> (decoded.bit_depth - 8) : decoded.pixels.at(i);
    worst = std::max(worst, std::abs(v - image.pixels[i]));
  }
  return worst;
}

TEST(SyntheticFormats, EachDecodesBackToTheImage) {
  test_util::TempDir dir;
  const GrayImage image = render_synthetic_image(0x1234, 64, 5);
  std::vector<uint8_t> buffer;
  GrayImage decoded;
  const auto write_and_read = [&](SynthImageFormat format, uint64_t seed) {
    const std::string path = dir.path() + "/" + to_string(format) + std::to_string(seed);
    const int64_t bytes = write_synthetic_image_file(image, format, seed, path);
    EXPECT_EQ(static_cast<size_t>(bytes), test_util::file_contents(path).size());
    read_image(path, decoded, buffer);
    return test_util::file_contents(path);
  };
  EXPECT_EQ(
      sniff_image_format(
          reinterpret_cast<const uint8_t*>(write_and_read(SynthImageFormat::kPng, 0).data()), 8),
      ImageFormat::kPng);
  EXPECT_EQ(decoded.pixels, image.pixels);
  write_and_read(SynthImageFormat::kPng16, 1);
  EXPECT_EQ(decoded.bit_depth, 16);
  EXPECT_EQ(max_error_8bit(decoded, image), 0);
  int low_bytes_set = 0;  // the low byte carries seeded noise, not zeros
  for (uint16_t v : decoded.pixels16)
    low_bytes_set += (v & 0xFF) != 0;
  EXPECT_GT(low_bytes_set, static_cast<int>(decoded.pixels16.size()) / 2);
  write_and_read(SynthImageFormat::kJpeg, 2);
  EXPECT_EQ(decoded.bit_depth, 8);
  EXPECT_LE(max_error_8bit(decoded, image), 8);  // quality 95 on a noisy image
  const int depths[4] = {12, 16, 16, 12};
  for (uint64_t seed = 0; seed < 4; ++seed) {  // the four DICOM variants
    write_and_read(SynthImageFormat::kDicom, seed);
    EXPECT_EQ(decoded.bit_depth, depths[seed]) << seed;
    EXPECT_LE(max_error_8bit(decoded, image), 1) << seed;
  }
  EXPECT_THROW(write_synthetic_image_file(image, SynthImageFormat::kLayout, 0, dir.path() + "/x"),
               Error);
  EXPECT_EQ(parse_synth_image_format("png16"), SynthImageFormat::kPng16);
  EXPECT_THROW(parse_synth_image_format("tiff"), UsageError);
}

}  // namespace
}  // namespace chexscale::data
