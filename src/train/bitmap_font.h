// A small embedded 5x7 bitmap font (capitals, digits, punctuation) for writing captions on the
// RGB figures chexscale draws, scaled by whole pixels; lowercase letters are drawn as capitals.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace chexscale::train {

inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphHeight = 7;
inline constexpr int kGlyphAdvance = kGlyphWidth + 1;  // one blank column between letters

// An RGB image (row-major, 3 bytes a pixel) that text is written into.
struct RgbCanvas {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // width * height * 3
};

// Width in pixels of `text` written at `scale` (no trailing blank column).
int text_width(const std::string& text, int scale);

// Fills the rectangle of `width` x `height` pixels at (x, y) with `colour`, clipped to the canvas.
void fill_rect(RgbCanvas& canvas, int x, int y, int width, int height,
               std::array<uint8_t, 3> colour);

// Writes `text` with its top-left corner at (x, y), each font pixel a scale x scale square of
// `colour`; what falls outside the canvas is clipped. A character the font lacks is drawn as '?'.
void draw_text(RgbCanvas& canvas, int x, int y, const std::string& text, int scale,
               std::array<uint8_t, 3> colour);

}  // namespace chexscale::train
