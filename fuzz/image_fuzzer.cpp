// libFuzzer target for JPEG (TurboJPEG) or DICOM (DCMTK) decoding, chosen at compile time by
// CHEXSCALE_FUZZ_DICOM: whatever the bytes, decoding either succeeds with an image of the size it
// reports, bit depth 8-16 and samples within that depth, or throws DataError; any other exception,
// crash, leak or sanitizer error is a finding. JPEG inputs are decoded twice: at full size and for
// a loader resizing to 8 (a reduced DCT scale when the image is at least 16 pixels a side).
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "common/error.h"
#ifdef CHEXSCALE_FUZZ_DICOM
#include "data/image/dicom_io.h"
#else
#include "data/image/jpeg_io.h"
#endif

namespace {

void check(const uint8_t* data, size_t size, int resize_to) {
  chexscale::data::GrayImage image;
  try {
#ifdef CHEXSCALE_FUZZ_DICOM
    (void)resize_to;
    chexscale::data::decode_dicom_gray(data, size, "fuzz.dcm", image);
#else
    chexscale::data::decode_jpeg_gray(data, size, "fuzz.jpg", image, resize_to);
#endif
  } catch (const chexscale::DataError&) {
    return;
  }
  const size_t n = static_cast<size_t>(image.width) * static_cast<size_t>(image.height);
  const bool sized = image.wide() ? image.pixels16.size() == n : image.pixels.size() == n;
  bool within = image.bit_depth >= 8 && image.bit_depth <= 16;
  for (size_t i = 0; within && image.wide() && i < n; ++i)
    within = image.pixels16[i] <= chexscale::data::max_sample(image.bit_depth);
  if (n == 0 || !sized || !within) {
    std::fprintf(stderr, "decoded image %dx%d, bit depth %d, inconsistent\n", image.width,
                 image.height, image.bit_depth);
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check(data, size, 0);
#ifndef CHEXSCALE_FUZZ_DICOM
  check(data, size, 8);
#endif
  return 0;
}
