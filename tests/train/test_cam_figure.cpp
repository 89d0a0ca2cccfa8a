// The CAM figure (cam_figure.h) and its bitmap font (bitmap_font.h): glyphs where the font's
// pictures put them, the figure's size, two panels that differ (gray X-ray, coloured map) and
// the title and panel names written in white on the bands around them.
#include <gtest/gtest.h>

#include <string>

#include "train/bitmap_font.h"
#include "train/cam_figure.h"

namespace chexscale::train {
namespace {

constexpr std::array<uint8_t, 3> kWhite = {255, 255, 255};

bool is_white(const RgbCanvas& c, int x, int y) {
  const size_t at = (static_cast<size_t>(y) * c.width + x) * 3;
  return c.pixels[at] == 255 && c.pixels[at + 1] == 255 && c.pixels[at + 2] == 255;
}

int white_pixels(const RgbCanvas& c, int x0, int y0, int x1, int y1) {
  int n = 0;
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x)
      n += is_white(c, x, y) ? 1 : 0;
  }
  return n;
}

RgbCanvas blank(int width, int height) {
  RgbCanvas c;
  c.width = width;
  c.height = height;
  c.pixels.assign(static_cast<size_t>(width) * height * 3, 0);
  return c;
}

// 'I' is a bar of three on top and bottom and a stem in the middle column: 11 font pixels.
TEST(BitmapFont, DrawsTheGlyphScaled) {
  RgbCanvas c = blank(20, 20);
  draw_text(c, 1, 1, "I", 2, kWhite);
  EXPECT_EQ(white_pixels(c, 0, 0, 20, 20), 11 * 4);
  // Top bar: font columns 1-3 -> x 3..8, rows y 1..2; the stem: font column 2 -> x 5..6.
  for (int x = 3; x <= 8; ++x)
    EXPECT_TRUE(is_white(c, x, 1) && is_white(c, x, 2)) << x;
  EXPECT_FALSE(is_white(c, 2, 1));
  EXPECT_FALSE(is_white(c, 9, 1));
  EXPECT_TRUE(is_white(c, 5, 7) && is_white(c, 6, 7));
  EXPECT_FALSE(is_white(c, 4, 7));
  EXPECT_FALSE(is_white(c, 7, 7));
  // Bottom bar, font row 6 -> y 13..14; nothing below.
  EXPECT_TRUE(is_white(c, 3, 14) && is_white(c, 8, 14));
  EXPECT_EQ(white_pixels(c, 0, 15, 20, 20), 0);
}

TEST(BitmapFont, LowercaseIsCapitalsAndUnknownIsAQuestionMark) {
  RgbCanvas lower = blank(40, 10);
  RgbCanvas upper = blank(40, 10);
  draw_text(lower, 0, 0, "edema", 1, kWhite);
  draw_text(upper, 0, 0, "EDEMA", 1, kWhite);
  EXPECT_EQ(lower.pixels, upper.pixels);
  RgbCanvas tilde = blank(10, 10);
  RgbCanvas question = blank(10, 10);
  draw_text(tilde, 0, 0, "~", 1, kWhite);
  draw_text(question, 0, 0, "?", 1, kWhite);
  EXPECT_EQ(tilde.pixels, question.pixels);
  EXPECT_GT(white_pixels(question, 0, 0, 10, 10), 0);
}

TEST(BitmapFont, WidthAndClipping) {
  EXPECT_EQ(text_width("", 3), 0);
  EXPECT_EQ(text_width("AB", 3), (2 * 6 - 1) * 3);
  RgbCanvas c = blank(8, 8);
  draw_text(c, -3, -3, "WW", 2, kWhite);  // mostly outside: clipped, not written past the buffer
  EXPECT_EQ(c.pixels.size(), 8u * 8u * 3u);
  EXPECT_GT(white_pixels(c, 0, 0, 8, 8), 0);
}

// A 64 x 48 X-ray (a horizontal ramp) whose map is hot in its right half.
struct Example {
  data::GrayImage xray;
  torch::Tensor map = torch::zeros({48, 64});
};

Example example() {
  Example e;
  e.xray.width = 64;
  e.xray.height = 48;
  for (int y = 0; y < 48; ++y) {
    for (int x = 0; x < 64; ++x)
      e.xray.pixels.push_back(static_cast<uint8_t>(x * 4));
  }
  e.map.narrow(1, 32, 32).fill_(1.0);
  return e;
}

TEST(CamFigure, PanelsAreAtLeast512AndSideBySide) {
  const Example e = example();
  const RgbCanvas f = cam_figure(e.xray, e.map, "Edema", 0.873);
  // The smaller side 48 -> 512: factor 10.67, 64 -> 683.
  EXPECT_EQ(f.width, 2 * 683 + 8);
  EXPECT_EQ(f.height, 48 + 512 + 32);
  ASSERT_EQ(f.pixels.size(), static_cast<size_t>(f.width) * f.height * 3);
  // Left panel gray everywhere; right panel coloured where the map is hot, and different.
  int differing = 0;
  int coloured = 0;
  for (int y = 48; y < 48 + 512; ++y) {
    for (int x = 0; x < 683; ++x) {
      const uint8_t* l = &f.pixels[(static_cast<size_t>(y) * f.width + x) * 3];
      const uint8_t* r = &f.pixels[(static_cast<size_t>(y) * f.width + x + 683 + 8) * 3];
      ASSERT_TRUE(l[0] == l[1] && l[1] == l[2]) << x << "," << y;
      differing += (l[0] != r[0] || l[1] != r[1] || l[2] != r[2]) ? 1 : 0;
      coloured += (x > 400 && r[0] != r[2]) ? 1 : 0;
    }
  }
  EXPECT_GT(differing, 683 * 512 / 3);
  EXPECT_GT(coloured, 250 * 500);
  // The map's cold left part keeps the X-ray as it is.
  const size_t at = (static_cast<size_t>(300) * f.width + 100) * 3;
  const size_t right_at = at + static_cast<size_t>(683 + 8) * 3;
  EXPECT_EQ(f.pixels[at], f.pixels[right_at]);
}

// The title, at 3x, in its band and nowhere else in it; the panels' names under each panel.
TEST(CamFigure, TitleAndNamesAreWrittenOnTheBands) {
  const Example e = example();
  const RgbCanvas f = cam_figure(e.xray, e.map, "Edema", 0.873);
  EXPECT_EQ(cam_figure_title("Edema", 0.873), "Edema: probability 0.873");
  const int title_right = 12 + (24 * 6 - 1) * 3;  // 24 characters at 3x from x = 12
  const int title_top = (48 - 21) / 2;
  const int in_title = white_pixels(f, 12, title_top, title_right, title_top + 21);
  EXPECT_GT(in_title, 24 * 9 * 5);  // more than 5 font pixels a character on average
  EXPECT_EQ(white_pixels(f, 0, 0, f.width, 48), in_title) << "white outside the title's box";
  const int bottom = 48 + 512;
  EXPECT_GT(white_pixels(f, 0, bottom, 683, f.height), 50) << "no 'X-ray' under the left panel";
  EXPECT_GT(white_pixels(f, 683 + 8, bottom, f.width, f.height), 200)
      << "no 'class activation map' under the right panel";
}

TEST(CamFigure, LargeImagesKeepTheirSize) {
  data::GrayImage big;
  big.width = 600;
  big.height = 700;
  big.pixels.assign(600 * 700, 128);
  const RgbCanvas f = cam_figure(big, torch::zeros({700, 600}), "Enlarged Cardiomediastinum", 0.5);
  EXPECT_EQ(f.width, 2 * 600 + 8);
  EXPECT_EQ(f.height, 48 + 700 + 32);
  EXPECT_GT(white_pixels(f, 0, 0, f.width, 48), 0);
}

// A title too wide for 3x (90 characters: 1617 px of 1374 - 24) is written at 2x (1078 px).
TEST(CamFigure, LongTitlesAreWrittenSmaller) {
  const Example e = example();
  const std::string name(71, 'W');
  const RgbCanvas f = cam_figure(e.xray, e.map, name, 0.5);
  ASSERT_EQ(f.width, 1374);
  ASSERT_EQ(cam_figure_title(name, 0.5).size(), 90u);
  const int top = (48 - 14) / 2;
  const int in_box = white_pixels(f, 12, top, 12 + (90 * 6 - 1) * 2, top + 14);
  EXPECT_GT(in_box, 71 * 4 * 10);
  EXPECT_EQ(white_pixels(f, 0, 0, f.width, 48), in_box);
}

}  // namespace
}  // namespace chexscale::train
