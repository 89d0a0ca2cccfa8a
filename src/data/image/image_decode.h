// The one entry point for decoding an image file, by its content rather than its name: PNG
// (signature), JPEG (SOI marker FF D8 FF) or DICOM ("DICM" at byte 128). Each format has its own
// decoder (png_io.h, jpeg_io.h, dicom_io.h); every one yields a gray image at the bit
// depth the file uses and throws DataError "<name>: <reason>" for a file it cannot decode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/image/gray_image.h"

namespace chexscale::data {

enum class ImageFormat { kPng, kJpeg, kDicom, kUnknown };

// The format of a file starting with `data` (at least its first 132 bytes for DICOM).
ImageFormat sniff_image_format(const uint8_t* data, size_t size);

// "PNG", "JPEG", "DICOM", "unknown".
const char* to_string(ImageFormat format);

// Decodes `data` by its format into `out` (buffers reused). DataError for an empty, unknown,
// truncated or corrupt input, naming `name`. `resize_to` > 0 says the caller resizes the image to
// resize_to x resize_to next: a JPEG then decodes at the reduced DCT scale that keeps both sides
// >= resize_to (jpeg_io.h), so the result may be smaller than the file's image; other formats
// decode at full size. 0: every format at full size.
void decode_image(const uint8_t* data, size_t size, const std::string& name, GrayImage& out,
                  int resize_to = 0);

// Reads and decodes an image file; `file_buffer` is scratch space reused across calls.
void read_image(const std::string& path, GrayImage& out, std::vector<uint8_t>& file_buffer,
                int resize_to = 0);

}  // namespace chexscale::data
