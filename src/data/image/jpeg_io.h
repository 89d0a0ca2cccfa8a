// JPEG -> 8-bit gray through libjpeg-turbo's TurboJPEG API. Gray JPEGs decode as they are; colour
// ones (YCbCr) to their luma (Y) plane, which libjpeg-turbo decodes without the colour
// conversion; CMYK/YCCK ones are refused. Any libjpeg warning (truncated data, corrupt entropy
// data) is an error, as are dimensions over 32768 or a size the file's bytes cannot encode.
// A loader that resizes afterwards decodes at a reduced scale: libjpeg-turbo's DCT-domain scaling
// (1/2, 1/4, 1/8; Pillow's draft(), DALI and PIL-SIMD do the same) makes the smaller image
// straight from the coefficients, skipping most of the inverse DCT and the full-size output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "data/image/gray_image.h"

namespace chexscale::data {

// Decodes JPEG bytes into `out` (buffer reused). Throws DataError "<name>: <reason>".
// `resize_to` > 0: the size a side the caller resizes the image to next; the image is decoded at
// 1/d of its size for the largest d of 8, 4, 2 with d * resize_to <= both sides (Pillow's
// draft("L", (resize_to, resize_to)) picks the same scale, and the pixels are the same), in full
// when there is none or resize_to < 8. 0: full size.
void decode_jpeg_gray(const uint8_t* data, size_t size, const std::string& name, GrayImage& out,
                      int resize_to = 0);

// Encodes 8-bit gray pixels as a baseline gray JPEG of `quality` (1-100).
std::string encode_jpeg_gray(const uint8_t* pixels, int width, int height, int quality);
// Encodes 8-bit RGB pixels as a 4:2:0 colour JPEG of `quality` (1-100).
std::string encode_jpeg_rgb(const uint8_t* pixels, int width, int height, int quality);

}  // namespace chexscale::data
