// Fast PNG decoding for the common cases of ChestX-ray14 (8-bit) and PadChest (16-bit): 8- or
// 16-bit gray, gray+alpha, RGB or RGBA, not interlaced. Every chunk's CRC-32 is checked, the IDAT
// data are inflated in one call with libdeflate (which checks the zlib Adler-32) and the rows are
// unfiltered here into the gray output (8-bit gray in place; 16-bit samples to host order, all 16
// bits kept). Anything else -- another variant, or any irregularity or error -- is declined, and
// the caller decodes with libspng, which handles every variant and reports the error.
#pragma once

#include <cstddef>
#include <cstdint>

#include "data/image/gray_image.h"

namespace chexscale::data {

// Decodes `data` into `out` (bit depth 8 or 16, as the file's) and returns true when the PNG is one
// the fast path handles and it is intact; returns false otherwise (`out` is then unspecified).
// Never throws for bad input.
// Gives the same pixels as the libspng path (decode_png_gray_spng) on every PNG it accepts.
bool decode_png_gray_fast(const uint8_t* data, size_t size, GrayImage& out);

}  // namespace chexscale::data
