// The glyphs of the embedded 5x7 font and text drawing (see bitmap_font.h). Each glyph is its 7
// rows of 5 pixels, '#' set and '.' clear, top row first.
#include "train/bitmap_font.h"

#include <algorithm>
#include <cctype>

namespace chexscale::train {
namespace {

struct Glyph {
  char c;
  const char* rows;  // kGlyphHeight rows of kGlyphWidth characters
};

constexpr Glyph kGlyphs[] = {
    {'A', ".###.#...##...#######...##...##...#"},  {'B', "####.#...##...#####.#...##...#####."},
    {'C', ".###.#...##....#....#....#...#.###."},  {'D', "####.#...##...##...##...##...#####."},
    {'E', "######....#....####.#....#....#####"},  {'F', "######....#....####.#....#....#...."},
    {'G', ".###.#...##....#.####...##...#.####"},  {'H', "#...##...##...#######...##...##...#"},
    {'I', ".###...#....#....#....#....#...###."},  {'J', "..###...#....#....#....#.#..#..##.."},
    {'K', "#...##..#.#.#..##...#.#..#..#.#...#"},  {'L', "#....#....#....#....#....#....#####"},
    {'M', "#...###.###.#.##.#.##...##...##...#"},  {'N', "#...##...###..##.#.##..###...##...#"},
    {'O', ".###.#...##...##...##...##...#.###."},  {'P', "####.#...##...#####.#....#....#...."},
    {'Q', ".###.#...##...##...##.#.##..#..##.#"},  {'R', "####.#...##...#####.#.#..#..#.#...#"},
    {'S', ".#####....#.....###.....#....#####."},  {'T', "#####..#....#....#....#....#....#.."},
    {'U', "#...##...##...##...##...##...#.###."},  {'V', "#...##...##...##...##...#.#.#...#.."},
    {'W', "#...##...##...##.#.##.#.##.#.#.#.#."},  {'X', "#...##...#.#.#...#...#.#.#...##...#"},
    {'Y', "#...##...#.#.#...#....#....#....#.."},  {'Z', "#####....#...#...#...#...#....#####"},
    {'0', ".###.#...##..###.#.###..##...#.###."},  {'1', "..#...##....#....#....#....#...###."},
    {'2', ".###.#...#....#...#...#...#...#####"},  {'3', "#####...#...#.....#.....##...#.###."},
    {'4', "...#...##..#.#.#..#.#####...#....#."},  {'5', "######....####.....#....##...#.###."},
    {'6', "..##..#...#....####.#...##...#.###."},  {'7', "#####....#...#...#...#....#....#..."},
    {'8', ".###.#...##...#.###.#...##...#.###."},  {'9', ".###.#...##...#.####....#...#..##.."},
    {' ', "..................................."},  {'.', "..........................##...##.."},
    {',', ".....................##....#...#..."},  {':', "......##...##........##...##......."},
    {'_', "..............................#####"},  {'-', "...............#####..............."},
    {'+', ".......#....#..#####..#....#......."},  {'=', "..........#####.....#####.........."},
    {'(', "...#...#...#....#....#.....#.....#."},  {')', ".#.....#.....#....#....#...#...#..."},
    {'[', ".###..#....#....#....#....#....###."},  {']', ".###....#....#....#....#....#..###."},
    {'/', ".........#...#...#...#...#........."},  {'%', "##...##..#...#...#...#...#..##...##"},
    {'\'', "..#....#...#......................."}, {'?', ".###.#...#....#...#...#.........#.."},
    {'!', "..#....#....#....#....#.........#.."},  {'#', ".#.#..#.#.#####.#.#.#####.#.#..#.#."},
};

const Glyph& glyph_of(char c) {
  const char upper = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const Glyph* question = nullptr;
  for (const Glyph& g : kGlyphs) {
    if (g.c == upper) return g;
    if (g.c == '?') question = &g;
  }
  return *question;
}

}  // namespace

int text_width(const std::string& text, int scale) {
  if (text.empty()) return 0;
  return (static_cast<int>(text.size()) * kGlyphAdvance - 1) * scale;
}

void fill_rect(RgbCanvas& canvas, int x, int y, int width, int height,
               std::array<uint8_t, 3> colour) {
  const int x0 = std::max(x, 0);
  const int y0 = std::max(y, 0);
  const int x1 = std::min(x + width, canvas.width);
  const int y1 = std::min(y + height, canvas.height);
  for (int py = y0; py < y1; ++py) {
    for (int px = x0; px < x1; ++px) {
      const size_t at = (static_cast<size_t>(py) * static_cast<size_t>(canvas.width) + px) * 3;
      for (int ch = 0; ch < 3; ++ch)
        canvas.pixels[at + ch] = colour[ch];
    }
  }
}

void draw_text(RgbCanvas& canvas, int x, int y, const std::string& text, int scale,
               std::array<uint8_t, 3> colour) {
  for (size_t i = 0; i < text.size(); ++i) {
    const Glyph& g = glyph_of(text[i]);
    const int left = x + static_cast<int>(i) * kGlyphAdvance * scale;
    for (int row = 0; row < kGlyphHeight; ++row) {
      for (int col = 0; col < kGlyphWidth; ++col) {
        if (g.rows[row * kGlyphWidth + col] == '#') {
          fill_rect(canvas, left + col * scale, y + row * scale, scale, scale, colour);
        }
      }
    }
  }
}

}  // namespace chexscale::train
