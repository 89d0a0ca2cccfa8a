// DICOM <-> gray through DCMTK. Decoding (DicomImage, the first frame) applies what a viewer
// applies, as TorchXRayVision's read_xray_dcm: the modality transform (Rescale Slope/Intercept or
// a Modality LUT), then the first VOI LUT or else the first Window Center/Width, and shows
// MONOCHROME1 inverted (white is the highest value, as in MONOCHROME2). The result has the
// file's Bits Stored (8-16; 8-bit storage for 8 or less): a 12-bit file gives values 0-4095.
// Uncompressed and every transfer syntax DCMTK's codecs decode (JPEG baseline/extended/lossless,
// JPEG-LS, RLE) are read. Colour images, more than 16 bits stored, over 32768 pixels a side or
// pixel data shorter than the image are DataErrors naming the file.
//
// Encoding writes monochrome files (synthetic data, tests) with DCMTK's encoders: 16 bits
// allocated (8 for 8 bits stored), uncompressed, RLE lossless, JPEG lossless (process 14,
// selection value 1, 2-16 bits), JPEG-LS lossless or JPEG baseline (process 1, 8 bits stored
// only, lossy at quality 90).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "data/image/gray_image.h"

namespace chexscale::data {

// Decodes DICOM bytes (a Part-10 file: preamble, "DICM", meta header) into `out`. Throws
// DataError "<name>: <reason>".
void decode_dicom_gray(const uint8_t* data, size_t size, const std::string& name, GrayImage& out);

enum class DicomCompression { kNone, kRle, kJpegLossless, kJpegLs, kJpegBaseline };

// "none", "rle", "jpeg-lossless", "jpeg-ls", "jpeg-baseline"; parse: UsageError naming the
// choices for another name.
const char* to_string(DicomCompression compression);
DicomCompression parse_dicom_compression(const std::string& name);

// The JPEG baseline quality write_dicom_gray uses.
inline constexpr int kDicomJpegBaselineQuality = 90;

struct DicomWriteOptions {
  int bits_stored = 16;        // 8-16 (8 for kJpegBaseline); samples below 2^bits_stored
  bool monochrome1 = false;    // stored inverted: 0 is white
  double rescale_slope = 1.0;  // written as Rescale Slope/Intercept
  double rescale_intercept = 0.0;
  double window_center = 0.0;  // written with the width when window_width > 0
  double window_width = 0.0;
  DicomCompression compression = DicomCompression::kNone;
  std::string patient_id = "0";
};

// Writes `stored` (width x height stored values, as they go into Pixel Data) as a DICOM file
// (Digital X-Ray, for presentation). Error naming the path when it cannot be written.
void write_dicom_gray(const std::string& path, const uint16_t* stored, int width, int height,
                      const DicomWriteOptions& options);

}  // namespace chexscale::data
