// Test helper: builds PNG files byte by byte from raw (filtered) rows with zlib -- signature,
// chunks with their CRC-32, IDAT split as asked -- so tests and the fuzzer's seed corpus control
// every filter byte and chunk, independently of the decoders under test.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>

namespace chexscale::test_util {

inline const std::string kPngSignature = "\x89PNG\r\n\x1a\n";

inline void put_be32(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    s.push_back(static_cast<char>((v >> shift) & 0xFF));
}

// One chunk: length, type, body, CRC-32 of type and body.
inline std::string png_chunk(const char* type, const std::string& body) {
  std::string c;
  put_be32(c, static_cast<uint32_t>(body.size()));
  c += std::string(type, 4) + body;
  const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(c.data() + 4), c.size() - 4);
  put_be32(c, static_cast<uint32_t>(crc));
  return c;
}

inline std::string png_ihdr(uint32_t width, uint32_t height, int color_type, int bit_depth = 8,
                            int interlace = 0) {
  std::string body;
  put_be32(body, width);
  put_be32(body, height);
  body += {static_cast<char>(bit_depth), static_cast<char>(color_type), 0, 0,
           static_cast<char>(interlace)};
  return png_chunk("IHDR", body);
}

inline std::string zlib_compress(const std::string& raw, int level = 6) {
  uLongf size = compressBound(raw.size());
  std::string out(size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                reinterpret_cast<const Bytef*>(raw.data()), raw.size(), level) != Z_OK) {
    throw std::runtime_error("compress2 failed");
  }
  out.resize(size);
  return out;
}

// Samples per pixel of an 8-bit PNG colour type (0 gray, 2 RGB, 4 gray+alpha, 6 RGBA).
inline int png_channels(int color_type) {
  return color_type == 0 ? 1 : color_type == 4 ? 2 : color_type == 2 ? 3 : 4;
}

// Raw rows of random bytes with the filter bytes cycling through 0-4 (None, Sub, Up, Average,
// Paeth), one row after another.
inline std::string random_png_rows(uint32_t width, uint32_t height, int channels, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string raw;
  for (uint32_t y = 0; y < height; ++y) {
    raw.push_back(static_cast<char>(y % 5));
    for (uint32_t i = 0; i < width * static_cast<uint32_t>(channels); ++i)
      raw.push_back(static_cast<char>(rng() & 0xFF));
  }
  return raw;
}

// An 8-bit PNG of width x height from its raw rows, the zlib stream split into `idat_parts`
// chunks (plus an empty one first when split), with chunks `before` and `after` the IDATs.
inline std::string build_png(uint32_t width, uint32_t height, int color_type,
                             const std::string& raw, int idat_parts = 1,
                             const std::string& before = "", const std::string& after = "") {
  const std::string z = zlib_compress(raw);
  std::string png = kPngSignature + png_ihdr(width, height, color_type) + before;
  if (idat_parts > 1) png += png_chunk("IDAT", "");
  const size_t part = z.size() / static_cast<size_t>(idat_parts) + 1;
  for (size_t pos = 0; pos < z.size(); pos += part)
    png += png_chunk("IDAT", z.substr(pos, part));
  return png + after + png_chunk("IEND", "");
}

}  // namespace chexscale::test_util
