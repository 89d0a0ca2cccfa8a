// libFuzzer target for PNG decoding: whatever the bytes, neither the fast path nor libspng may
// crash, and whenever the fast path accepts a file, libspng must decode it to the same pixels at
// the same bit depth (8 or 16)
// (a differential check: the fast path is never more lenient than libspng, and never different).
// Each input is tried as it is and with every chunk's CRC-32 made right, so that mutations reach
// the header, zlib stream and row filters instead of stopping at a CRC mismatch.
#include <libdeflate.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "common/error.h"
#include "data/image/png_fast_decode.h"
#include "data/image/png_io.h"

namespace {

uint32_t read_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Rewrites the CRC of every complete chunk after the 8-byte signature.
void fix_crcs(std::vector<uint8_t>& png) {
  size_t pos = 8;
  while (pos + 12 <= png.size()) {
    const uint32_t length = read_be32(png.data() + pos);
    if (length > png.size() - pos - 12) return;
    const uint32_t crc = libdeflate_crc32(0, png.data() + pos + 4, length + 4);
    for (int k = 0; k < 4; ++k)
      png[pos + 8 + length + k] = static_cast<uint8_t>(crc >> (24 - 8 * k));
    pos += 12 + static_cast<size_t>(length);
  }
}

void check(const uint8_t* data, size_t size) {
  using chexscale::data::GrayImage;
  GrayImage fast;
  const bool fast_ok = chexscale::data::decode_png_gray_fast(data, size, fast);
  GrayImage reference;
  bool reference_ok = true;
  try {
    chexscale::data::decode_png_gray_spng(data, size, "fuzz.png", reference);
  } catch (const chexscale::DataError&) {
    reference_ok = false;
  }
  if (fast_ok && (!reference_ok || fast.width != reference.width ||
                  fast.height != reference.height || fast.bit_depth != reference.bit_depth ||
                  fast.pixels != reference.pixels || fast.pixels16 != reference.pixels16)) {
    std::fprintf(stderr, "fast path accepted a PNG that libspng %s\n",
                 reference_ok ? "decodes differently" : "rejects");
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check(data, size);
  std::vector<uint8_t> fixed(data, data + size);
  fix_crcs(fixed);
  check(fixed.data(), fixed.size());
  return 0;
}
