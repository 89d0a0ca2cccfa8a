// JPEG -> 8-bit gray through libjpeg-turbo's TurboJPEG API. Gray JPEGs decode as they are; colour
// ones (YCbCr) to their luma (Y) plane, which libjpeg-turbo decodes without the colour
// conversion; CMYK/YCCK ones are refused. Any libjpeg warning (truncated data, corrupt entropy
// data) is an error, as are dimensions over 32768 or a size the file's bytes cannot encode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "data/gray_image.h"

namespace chexscale::data {

// Decodes JPEG bytes into `out` (buffer reused). Throws DataError "<name>: <reason>".
void decode_jpeg_gray(const uint8_t* data, size_t size, const std::string& name, GrayImage& out);

// Encodes 8-bit gray pixels as a baseline gray JPEG of `quality` (1-100).
std::string encode_jpeg_gray(const uint8_t* pixels, int width, int height, int quality);
// Encodes 8-bit RGB pixels as a 4:2:0 colour JPEG of `quality` (1-100).
std::string encode_jpeg_rgb(const uint8_t* pixels, int width, int height, int quality);

}  // namespace chexscale::data
