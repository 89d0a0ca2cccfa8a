// PNG <-> grayscale. Decodes every variant found in ChestX-ray14, PadChest and their copies (gray
// 1-16 bit, gray+alpha, RGB, RGBA, palette, interlaced): 8- and 16-bit non-interlaced ones through
// a fast path (png_fast_decode.h), the rest and anything irregular with libspng. Gray 8-bit goes
// straight to the output buffer; other variants are converted with Pillow's luma weights, alpha
// ignored. 16-bit PNGs decode to 16-bit images (bit depth 16), every bit kept; the others to 8-bit.
// Encoding (8-bit gray or RGB, 16-bit gray) uses libspng.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/image/gray_image.h"

namespace chexscale::data {

// Decodes PNG bytes into `out` (its buffer is reused). Throws DataError "<name>: <reason>" for
// an empty, truncated, corrupt or non-PNG input. Tries the fast path (png_fast_decode.h) first,
// then libspng.
void decode_png_gray(const uint8_t* data, size_t size, const std::string& name, GrayImage& out);

// The same with libspng only: the reference for every variant, and the fallback of the fast path.
void decode_png_gray_spng(const uint8_t* data, size_t size, const std::string& name,
                          GrayImage& out);

// Reads a whole file into `buffer` (reused); throws DataError naming the path when unreadable.
void read_file_bytes(const std::string& path, std::vector<uint8_t>& buffer);

// Encodes 8-bit gray pixels as a PNG (zlib level 0-9).
std::string encode_png_gray(const uint8_t* pixels, int width, int height,
                            int compression_level = 6);
// Encodes 16-bit gray pixels (host order) as a 16-bit gray PNG.
std::string encode_png_gray16(const uint16_t* pixels, int width, int height,
                              int compression_level = 6);
// Encodes 8-bit RGB pixels (row-major, 3 bytes a pixel) as a PNG.
std::string encode_png_rgb(const uint8_t* pixels, int width, int height, int compression_level = 6);

}  // namespace chexscale::data
