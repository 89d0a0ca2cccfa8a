// Synthetic images: each class's trace appears in its own region exactly when its label is set.
#include <gtest/gtest.h>

#include <cstdlib>

#include "data/synthetic.h"

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

}  // namespace
}  // namespace chexscale::data
