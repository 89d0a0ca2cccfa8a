// The fast PNG path (png_fast_decode.h) against libspng (decode_png_gray_spng), pixel for pixel,
// 8- and 16-bit: on every variant libpng writes, on every row filter, on synthetic X-rays, and on
// damaged files, where both must agree on error or success. PNGs are built from raw rows
// (png_builder.h) or written by libpng: encoders independent of the decoders under test.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "common/error.h"
#include "data/image/png_fast_decode.h"
#include "data/image/png_io.h"
#include "data/synthetic/synthetic.h"
#include "png_variants.h"
#include "test_util/png_builder.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {

using test_util::build_png;
using test_util::png_channels;
using test_util::png_chunk;
using test_util::png_ihdr;
using test_util::random_png_rows;
using test_util::zlib_compress;

const uint8_t* bytes(const std::string& s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

// What a decoder made of a file: its pixels, or that it threw a DataError.
struct Outcome {
  bool error = false;
  GrayImage image;
};

template <typename Decode>
Outcome outcome(Decode decode, const std::string& png) {
  Outcome o;
  try {
    decode(bytes(png), png.size(), "mem.png", o.image);
  } catch (const DataError&) {
    o.error = true;
  }
  return o;
}

// A PNG of 16-bit samples from its raw rows (filter byte, then width * channels big-endian
// samples), with chunks `before` and `after` the one IDAT.
std::string build_png16(uint32_t width, uint32_t height, int color_type, const std::string& raw,
                        const std::string& before = "", const std::string& after = "") {
  return test_util::kPngSignature + png_ihdr(width, height, color_type, 16) + before +
         png_chunk("IDAT", zlib_compress(raw)) + after + png_chunk("IEND", "");
}

bool same_image(const GrayImage& a, const GrayImage& b) {
  return a.width == b.width && a.height == b.height && a.bit_depth == b.bit_depth &&
         a.pixels == b.pixels && a.pixels16 == b.pixels16;
}

// The fast path must accept `png` and give libspng's pixels, at libspng's bit depth.
void expect_fast_equals_libspng(const std::string& png, const std::string& what) {
  GrayImage fast;
  ASSERT_TRUE(decode_png_gray_fast(bytes(png), png.size(), fast)) << what;
  GrayImage reference;
  decode_png_gray_spng(bytes(png), png.size(), what, reference);
  EXPECT_EQ(fast.width, reference.width) << what;
  EXPECT_EQ(fast.height, reference.height) << what;
  EXPECT_EQ(fast.bit_depth, reference.bit_depth) << what;
  EXPECT_TRUE(fast.pixels == reference.pixels) << what;
  EXPECT_TRUE(fast.pixels16 == reference.pixels16) << what;
}

TEST(PngFast, EveryFilterOnEveryLayoutMatchesLibspng) {
  for (int color_type : {0, 2, 4, 6}) {
    for (uint32_t width : {1U, 2U, 3U, 5U, 37U, 64U}) {
      const uint32_t height = 11;
      const std::string raw =
          random_png_rows(width, height, png_channels(color_type), width * 7 + 1);
      expect_fast_equals_libspng(build_png(width, height, color_type, raw),
                                 fmt::format("colour type {}, width {}", color_type, width));
    }
  }
}

TEST(PngFast, SixteenBitEveryFilterOnEveryLayoutMatchesLibspng) {
  for (int color_type : {0, 2, 4, 6}) {
    for (uint32_t width : {1U, 2U, 3U, 5U, 37U, 64U}) {
      const uint32_t height = 11;
      const std::string raw =
          random_png_rows(width, height, 2 * png_channels(color_type), width * 5 + 2);
      expect_fast_equals_libspng(build_png16(width, height, color_type, raw),
                                 fmt::format("16-bit colour type {}, width {}", color_type, width));
    }
  }
}

// Every 16-bit sample value survives: the low byte is kept, not rounded to 8 bits.
TEST(PngFast, SixteenBitGrayKeepsEveryValue) {
  std::vector<uint16_t> values(256 * 256);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<uint16_t>(i * 40503U);  // an odd multiplier: every value once
  for (int level : {0, 6}) {
    const std::string png = encode_png_gray16(values.data(), 256, 256, level);
    GrayImage fast;
    ASSERT_TRUE(decode_png_gray_fast(bytes(png), png.size(), fast)) << "level " << level;
    EXPECT_EQ(fast.bit_depth, 16);
    EXPECT_TRUE(fast.pixels.empty());
    EXPECT_EQ(fast.pixels16, values) << "level " << level;
  }
}

TEST(PngFast, SplitIdatAndAncillaryChunksMatchLibspng) {
  const std::string raw = random_png_rows(29, 17, 1, 3);
  const std::string text = png_chunk("tEXt", std::string("Comment\0made by a test", 22));
  const std::string phys = png_chunk("pHYs", std::string("\0\0\x0b\x13\0\0\x0b\x13\x01", 9));
  expect_fast_equals_libspng(build_png(29, 17, 0, raw, 5), "IDAT in 5 chunks and an empty one");
  expect_fast_equals_libspng(build_png(29, 17, 0, raw, 3, phys + text, text),
                             "pHYs and tEXt before, tEXt after");
}

// Every variant libpng writes: the fast path takes exactly the 8- and 16-bit non-interlaced gray,
// gray+alpha, RGB and RGBA ones, and decode_png_gray gives libspng's pixels for all of them.
TEST(PngFast, TakesExactlyTheCommonVariantsAndMatchesLibspngOnAll) {
  test_util::TempDir dir;
  struct Variant {
    int color_type;
    std::vector<int> depths;
  };
  const std::vector<Variant> variants = {{PNG_COLOR_TYPE_GRAY, {1, 2, 4, 8, 16}},
                                         {PNG_COLOR_TYPE_PALETTE, {1, 2, 4, 8}},
                                         {PNG_COLOR_TYPE_GRAY_ALPHA, {8, 16}},
                                         {PNG_COLOR_TYPE_RGB, {8, 16}},
                                         {PNG_COLOR_TYPE_RGBA, {8, 16}}};
  std::mt19937 rng(7);
  for (const auto& v : variants) {
    for (int depth : v.depths) {
      for (bool interlaced : {false, true}) {
        test_util::PngSpec spec;
        spec.width = 45;
        spec.height = 19;
        spec.color_type = v.color_type;
        spec.bit_depth = depth;
        spec.interlaced = interlaced;
        const int samples = v.color_type == PNG_COLOR_TYPE_PALETTE ? 1 : png_channels(v.color_type);
        if (v.color_type == PNG_COLOR_TYPE_PALETTE) {
          for (int i = 0; i < (1 << depth); ++i) {
            spec.palette.push_back({static_cast<png_byte>(rng()), static_cast<png_byte>(rng()),
                                    static_cast<png_byte>(rng())});
          }
        }
        const size_t row_bytes = (spec.width * samples * depth + 7) / 8;
        std::vector<std::vector<unsigned char>> rows(spec.height);
        for (auto& row : rows) {
          for (size_t i = 0; i < row_bytes; ++i)
            row.push_back(static_cast<unsigned char>(rng() & 0xFF));
          if (depth == 8 && v.color_type == PNG_COLOR_TYPE_PALETTE) {
            for (auto& index : row)
              index = static_cast<unsigned char>(index % spec.palette.size());
          }
        }
        const std::string what = fmt::format("colour type {} depth {}{}", v.color_type, depth,
                                             interlaced ? " Adam7" : "");
        const std::string path = dir.path() + "/v.png";
        test_util::write_png_variant(path, spec, rows);
        std::vector<uint8_t> file;
        read_file_bytes(path, file);
        GrayImage fast;
        const bool common = depth >= 8 && !interlaced && v.color_type != PNG_COLOR_TYPE_PALETTE;
        EXPECT_EQ(decode_png_gray_fast(file.data(), file.size(), fast), common) << what;
        GrayImage combined;
        GrayImage reference;
        decode_png_gray(file.data(), file.size(), what, combined);
        decode_png_gray_spng(file.data(), file.size(), what, reference);
        EXPECT_EQ(combined.width, 45) << what;
        EXPECT_EQ(combined.height, 19) << what;
        EXPECT_EQ(combined.bit_depth, depth == 16 ? 16 : 8) << what;
        EXPECT_TRUE(same_image(combined, reference)) << what;
      }
    }
  }
}

// libpng's own filter choice per row (adaptive), each single filter, on noisy 8-bit images.
TEST(PngFast, LibpngFilterChoicesMatchLibspng) {
  test_util::TempDir dir;
  std::mt19937 rng(11);
  for (int color_type : {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGBA}) {
    for (int filters :
         {-1, PNG_FILTER_NONE, PNG_FILTER_SUB, PNG_FILTER_UP, PNG_FILTER_AVG, PNG_FILTER_PAETH}) {
      test_util::PngSpec spec;
      spec.width = 33;
      spec.height = 9;
      spec.color_type = color_type;
      spec.filters = filters;
      std::vector<std::vector<unsigned char>> rows(spec.height);
      for (int y = 0; y < spec.height; ++y) {
        for (int i = 0; i < spec.width * png_channels(color_type); ++i)
          rows[y].push_back(static_cast<unsigned char>(i * 3 + y * 5 + (rng() & 7)));
      }
      const std::string path = dir.path() + "/f.png";
      test_util::write_png_variant(path, spec, rows);
      std::vector<uint8_t> file;
      read_file_bytes(path, file);
      expect_fast_equals_libspng(std::string(file.begin(), file.end()),
                                 fmt::format("colour type {} filters {}", color_type, filters));
    }
  }
}

TEST(PngFast, SyntheticXraysMatchLibspng) {
  for (int size : {1024, 256}) {
    const GrayImage xray = render_synthetic_image(size == 256 ? 0x2A5 : 0, size, size + 5);
    for (int level : {6, 1, 9}) {
      expect_fast_equals_libspng(encode_png_gray(xray.pixels.data(), size, size, level),
                                 fmt::format("{}x{} X-ray, zlib level {}", size, size, level));
    }
    // The same X-ray at 16 bits (PadChest's depth), the low byte filled in.
    std::vector<uint16_t> wide(xray.pixels.size());
    for (size_t i = 0; i < wide.size(); ++i)
      wide[i] = static_cast<uint16_t>(xray.pixels[i] * 257 + (i * 7) % 131);
    expect_fast_equals_libspng(encode_png_gray16(wide.data(), size, size, 6),
                               fmt::format("{}x{} 16-bit X-ray", size, size));
  }
}

// Single-byte damage anywhere in a file, with the chunk CRC left as it is or recomputed (so the
// zlib stream, filter bytes and header fields are reached): both decoders agree on error or pixels.
TEST(PngFast, DamagedFilesGiveLibspngsOutcome) {
  const std::string text = png_chunk("tEXt", std::string("Title\0chest", 11));
  const std::vector<std::string> pngs = {
      build_png(13, 7, 0, random_png_rows(13, 7, 1, 5), 1, text, text),
      build_png(13, 7, 6, random_png_rows(13, 7, 4, 5), 1, text, text),
      build_png16(13, 7, 0, random_png_rows(13, 7, 2, 6), text, text),
      build_png16(9, 5, 6, random_png_rows(9, 5, 8, 7), text, text)};
  for (const std::string& png : pngs) {
    int decoded = 0;
    int errors = 0;
    for (bool fix_crc : {false, true}) {
      for (size_t i = 8; i < png.size(); ++i) {
        std::string damaged = png;
        damaged[i] = static_cast<char>(damaged[i] ^ 0x21);
        if (fix_crc) {  // recompute the CRC of the chunk holding byte i (bodies only)
          size_t pos = 8;
          while (pos + 12 <= damaged.size()) {
            const uint32_t len = (uint8_t(png[pos]) << 24) | (uint8_t(png[pos + 1]) << 16) |
                                 (uint8_t(png[pos + 2]) << 8) | uint8_t(png[pos + 3]);
            if (i >= pos + 8 && i < pos + 8 + len) {
              const uLong crc =
                  crc32(0, reinterpret_cast<const Bytef*>(damaged.data() + pos + 4), len + 4);
              for (int k = 0; k < 4; ++k)
                damaged[pos + 8 + len + k] = static_cast<char>((crc >> (24 - 8 * k)) & 0xFF);
            }
            pos += 12 + len;
          }
        }
        const Outcome ours = outcome(decode_png_gray, damaged);
        const Outcome reference = outcome(decode_png_gray_spng, damaged);
        ASSERT_EQ(ours.error, reference.error) << "byte " << i << (fix_crc ? ", CRC fixed" : "");
        if (!ours.error) {
          ASSERT_TRUE(same_image(ours.image, reference.image)) << "byte " << i;
        }
        errors += ours.error ? 1 : 0;
        decoded += ours.error ? 0 : 1;
      }
    }
    EXPECT_GT(errors, static_cast<int>(png.size()));  // most damage is an error
    EXPECT_GT(decoded, 0);  // damage to the text chunks only: libspng decodes, so must we
  }
}

// A truncated file is an error or -- when only the last bytes are cut, which libspng does not
// read once it has every row (Adler-32, last CRC, IEND) -- the intact file's pixels; the fast path
// declines every cut.
TEST(PngFast, TruncatedFilesAreErrorsOrTheIntactPixels) {
  const std::string png = build_png(21, 8, 2, random_png_rows(21, 8, 3, 9), 2);
  GrayImage intact;
  decode_png_gray(bytes(png), png.size(), "intact.png", intact);
  int errors = 0;
  for (size_t n = 0; n < png.size(); ++n) {
    const std::string cut = png.substr(0, n);
    GrayImage img;
    EXPECT_FALSE(decode_png_gray_fast(bytes(cut), n, img)) << n << " bytes";
    const Outcome o = outcome(decode_png_gray, cut);
    errors += o.error ? 1 : 0;
    if (!o.error) {
      EXPECT_TRUE(o.image.pixels == intact.pixels) << n << " bytes";
    }
    if (n + 32 < png.size()) {
      EXPECT_TRUE(o.error) << n << " bytes, deflate data lost";
    }
  }
  EXPECT_GT(errors, static_cast<int>(png.size()) - 32);
}

TEST(PngFast, BadFiltersShortDataAndHugeHeadersAreErrorsNamingTheFile) {
  std::vector<std::string> broken;
  std::string bad_filter = random_png_rows(21, 8, 3, 9);
  bad_filter[(21 * 3 + 1) * 4] = 5;  // row 4's filter type: there is no filter 5
  broken.push_back(build_png(21, 8, 2, bad_filter));
  std::string trailing = zlib_compress(random_png_rows(21, 8, 3, 9)) + "extra";
  std::string short_raw = random_png_rows(21, 7, 3, 9);  // a row short
  broken.push_back(test_util::kPngSignature + png_ihdr(21, 8, 2) +
                   png_chunk("IDAT", zlib_compress(short_raw)) + png_chunk("IEND", ""));
  // A header claiming 32768 x 32768 RGBA over a few bytes: refused, not allocated.
  broken.push_back(test_util::kPngSignature + png_ihdr(32768, 32768, 6) +
                   png_chunk("IDAT", zlib_compress(std::string(1, '\0'))) + png_chunk("IEND", ""));
  for (const auto& b : broken) {
    GrayImage img;
    EXPECT_FALSE(decode_png_gray_fast(bytes(b), b.size(), img)) << b.size() << " bytes";
    try {
      decode_png_gray(bytes(b), b.size(), "broken.png", img);
      ADD_FAILURE() << b.size() << " bytes decoded without error";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("broken.png"), std::string::npos) << e.what();
    }
  }
  // Data after the zlib stream: declined by the fast path, whatever libspng makes of it.
  const std::string with_trailing = test_util::kPngSignature + png_ihdr(21, 8, 2) +
                                    png_chunk("IDAT", trailing) + png_chunk("IEND", "");
  GrayImage img;
  EXPECT_FALSE(decode_png_gray_fast(bytes(with_trailing), with_trailing.size(), img));
}

}  // namespace
}  // namespace chexscale::data
