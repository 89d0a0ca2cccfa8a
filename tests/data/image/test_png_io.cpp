// PNG decoding to gray (8-bit, or 16-bit for 16-bit PNGs): every variant gives the expected pixels
// (computed here from the samples written, with Pillow's luma weights), and broken files are
// DataErrors naming the file.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "data/image/image_decode.h"
#include "data/image/png_io.h"
#include "png_variants.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {

constexpr int kW = 37;
constexpr int kH = 23;

int gray_at(int x, int y) {
  return (x * 7 + y * 13) % 256;
}
int luma(int r, int g, int b) {
  return static_cast<int>(std::lround(0.299 * r + 0.587 * g + 0.114 * b));
}

GrayImage decode(const std::string& path) {
  GrayImage img;
  std::vector<uint8_t> buffer;
  read_image(path, img, buffer);
  return img;
}

// Max |decoded - expected| over the image; the size must match exactly.
int max_error(const GrayImage& img, const std::vector<int>& expected) {
  EXPECT_EQ(img.width, kW);
  EXPECT_EQ(img.height, kH);
  if (img.pixels.size() != expected.size()) return 999;
  int worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<int>(img.pixels[i]) - expected[i]));
  }
  return worst;
}

// Writes a kW x kH image whose pixel (x, y) has samples sample(x, y, channel).
template <typename Sample>
std::string write_variant(const test_util::TempDir& dir, const std::string& name,
                          test_util::PngSpec spec, int channels, Sample sample) {
  spec.width = kW;
  spec.height = kH;
  std::vector<std::vector<unsigned char>> rows(kH);
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x) {
      for (int c = 0; c < channels; ++c) {
        const int v = sample(x, y, c);
        if (spec.bit_depth == 16) {
          rows[y].push_back(static_cast<unsigned char>(v >> 8));
          rows[y].push_back(static_cast<unsigned char>(v & 0xFF));
        } else {
          rows[y].push_back(static_cast<unsigned char>(v));
        }
      }
    }
  }
  const std::string path = dir.path() + "/" + name;
  test_util::write_png_variant(path, spec, rows);
  return path;
}

std::vector<int> expected_gray() {
  std::vector<int> e;
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x)
      e.push_back(gray_at(x, y));
  }
  return e;
}

int red(int x, int y) {
  return (x * 11) % 256;
}
int green(int x, int y) {
  return (y * 17 + x) % 256;
}
int blue(int x, int y) {
  return (x * y) % 256;
}

std::vector<int> expected_luma() {
  std::vector<int> e;
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x)
      e.push_back(luma(red(x, y), green(x, y), blue(x, y)));
  }
  return e;
}

int rgb_sample(int x, int y, int c) {
  return c == 0 ? red(x, y) : c == 1 ? green(x, y) : c == 2 ? blue(x, y) : (x * 31) % 256;
}

TEST(Png, Gray8) {
  test_util::TempDir dir;
  const auto path =
      write_variant(dir, "g8.png", {}, 1, [](int x, int y, int) { return gray_at(x, y); });
  EXPECT_EQ(max_error(decode(path), expected_gray()), 0);
}

TEST(Png, Gray8Interlaced) {
  test_util::TempDir dir;
  test_util::PngSpec spec;
  spec.interlaced = true;
  const auto path =
      write_variant(dir, "g8i.png", spec, 1, [](int x, int y, int) { return gray_at(x, y); });
  EXPECT_EQ(max_error(decode(path), expected_gray()), 0);
}

TEST(Png, GrayAlphaIgnoresAlpha) {
  test_util::TempDir dir;
  test_util::PngSpec spec;
  spec.color_type = PNG_COLOR_TYPE_GRAY_ALPHA;
  const auto path = write_variant(dir, "ga.png", spec, 2, [](int x, int y, int c) {
    return c == 0 ? gray_at(x, y) : (x * 5) % 256;
  });
  EXPECT_EQ(max_error(decode(path), expected_gray()), 0);
}

// Max |decoded - expected| over a 16-bit image; the size and bit depth must match exactly.
int max_error16(const GrayImage& img, const std::vector<int>& expected) {
  EXPECT_EQ(img.width, kW);
  EXPECT_EQ(img.height, kH);
  EXPECT_EQ(img.bit_depth, 16);
  if (img.pixels16.size() != expected.size()) return 99999;
  int worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<int>(img.pixels16[i]) - expected[i]));
  }
  return worst;
}

TEST(Png, Gray16KeepsEverySixteenBits) {
  test_util::TempDir dir;
  test_util::PngSpec spec;
  spec.bit_depth = 16;
  const auto sample = [](int x, int y, int) { return gray_at(x, y) * 256 + (x * 3) % 256; };
  const auto path = write_variant(dir, "g16.png", spec, 1, sample);
  std::vector<int> expected;
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x)
      expected.push_back(sample(x, y, 0));
  }
  EXPECT_EQ(max_error16(decode(path), expected), 0);  // the low byte is kept
}

TEST(Png, Gray1BitScalesToFullRange) {
  test_util::TempDir dir;
  test_util::PngSpec spec;
  spec.bit_depth = 1;
  spec.width = kW;
  spec.height = kH;
  std::vector<std::vector<unsigned char>> rows(kH, std::vector<unsigned char>((kW + 7) / 8, 0));
  std::vector<int> expected;
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x) {
      const bool on = (x + y) % 3 == 0;
      if (on) rows[y][x / 8] |= static_cast<unsigned char>(0x80 >> (x % 8));
      expected.push_back(on ? 255 : 0);
    }
  }
  test_util::write_png_variant(dir.path() + "/g1.png", spec, rows);
  EXPECT_EQ(max_error(decode(dir.path() + "/g1.png"), expected), 0);
}

TEST(Png, RgbToLuma) {
  test_util::TempDir dir;
  test_util::PngSpec spec;
  spec.color_type = PNG_COLOR_TYPE_RGB;
  const auto path = write_variant(dir, "rgb.png", spec, 3, rgb_sample);
  EXPECT_LE(max_error(decode(path), expected_luma()), 1);
}

TEST(Png, RgbaToLumaIgnoringAlpha) {
  test_util::TempDir dir;
  test_util::PngSpec spec;
  spec.color_type = PNG_COLOR_TYPE_RGBA;
  const auto path = write_variant(dir, "rgba.png", spec, 4, rgb_sample);
  EXPECT_LE(max_error(decode(path), expected_luma()), 1);
}

TEST(Png, Rgb16ToSixteenBitLuma) {
  test_util::TempDir dir;
  test_util::PngSpec spec;
  spec.color_type = PNG_COLOR_TYPE_RGB;
  spec.bit_depth = 16;
  const auto sample = [](int x, int y, int c) { return rgb_sample(x, y, c) * 256 + 0x7F; };
  const auto path = write_variant(dir, "rgb16.png", spec, 3, sample);
  std::vector<int> expected;
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x) {
      expected.push_back(static_cast<int>(std::lround(
          0.299 * sample(x, y, 0) + 0.587 * sample(x, y, 1) + 0.114 * sample(x, y, 2))));
    }
  }
  EXPECT_LE(max_error16(decode(path), expected), 2);
}

TEST(Png, PaletteToLumaOfItsColours) {
  test_util::TempDir dir;
  test_util::PngSpec spec;
  spec.color_type = PNG_COLOR_TYPE_PALETTE;
  for (int i = 0; i < 16; ++i) {
    spec.palette.push_back({static_cast<png_byte>(i * 16), static_cast<png_byte>(255 - i * 9),
                            static_cast<png_byte>((i * 50) % 256)});
  }
  const auto path =
      write_variant(dir, "pal.png", spec, 1, [](int x, int y, int) { return (x + y) % 16; });
  std::vector<int> expected;
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x) {
      const png_color& c = spec.palette[(x + y) % 16];
      expected.push_back(luma(c.red, c.green, c.blue));
    }
  }
  EXPECT_LE(max_error(decode(path), expected), 1);
}

TEST(Png, RoundTripsOwnEncoder) {
  std::vector<uint8_t> pixels;
  for (int i = 0; i < kW * kH; ++i)
    pixels.push_back(static_cast<uint8_t>(i * 31));
  const std::string png = encode_png_gray(pixels.data(), kW, kH);
  GrayImage img;
  decode_png_gray(reinterpret_cast<const uint8_t*>(png.data()), png.size(), "mem", img);
  EXPECT_EQ(img.pixels, pixels);
}

// Broken inputs: a DataError whose message names the file, never a crash.
TEST(Png, BrokenFilesAreDataErrorsNamingTheFile) {
  test_util::TempDir dir;
  const auto good =
      write_variant(dir, "good.png", {}, 1, [](int x, int y, int) { return gray_at(x, y); });
  const std::string bytes = test_util::file_contents(good);
  std::string flipped = bytes;
  flipped[bytes.size() / 2] = static_cast<char>(flipped[bytes.size() / 2] ^ 0x5A);
  const std::vector<std::string> broken = {
      dir.write("empty.png", ""),
      dir.write("text.png", "this is not a PNG file at all, just text\n"),
      dir.write("truncated.png", bytes.substr(0, bytes.size() / 2)),
      dir.write("header_only.png", bytes.substr(0, 40)),
      dir.write("flipped.png", flipped),
      dir.path() + "/missing.png",
  };
  for (const auto& path : broken) {
    try {
      decode(path);
      ADD_FAILURE() << path << " decoded without error";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace chexscale::data
