// Format sniffing and dispatch to the PNG, JPEG and DICOM decoders (see image_decode.h).
#include "data/image/image_decode.h"

#include <fmt/format.h>

#include <cstring>

#include "common/error.h"
#include "data/image/dicom_io.h"
#include "data/image/jpeg_io.h"
#include "data/image/png_io.h"

namespace chexscale::data {

ImageFormat sniff_image_format(const uint8_t* data, size_t size) {
  static constexpr uint8_t kPng[8] = {137, 80, 78, 71, 13, 10, 26, 10};
  if (size >= sizeof(kPng) && std::memcmp(data, kPng, sizeof(kPng)) == 0) return ImageFormat::kPng;
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) {
    return ImageFormat::kJpeg;
  }
  if (size >= 132 && std::memcmp(data + 128, "DICM", 4) == 0) return ImageFormat::kDicom;
  return ImageFormat::kUnknown;
}

const char* to_string(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng:
      return "PNG";
    case ImageFormat::kJpeg:
      return "JPEG";
    case ImageFormat::kDicom:
      return "DICOM";
    default:
      return "unknown";
  }
}

void decode_image(const uint8_t* data, size_t size, const std::string& name, GrayImage& out,
                  int resize_to) {
  if (size == 0) throw DataError(fmt::format("{}: empty file", name));
  switch (sniff_image_format(data, size)) {
    case ImageFormat::kPng:
      decode_png_gray(data, size, name, out);
      return;
    case ImageFormat::kJpeg:
      decode_jpeg_gray(data, size, name, out, resize_to);
      return;
    case ImageFormat::kDicom:
      decode_dicom_gray(data, size, name, out);
      return;
    default:
      throw DataError(
          fmt::format("{}: not a PNG, JPEG or DICOM file (unrecognised first bytes)", name));
  }
}

void read_image(const std::string& path, GrayImage& out, std::vector<uint8_t>& file_buffer,
                int resize_to) {
  read_file_bytes(path, file_buffer);
  decode_image(file_buffer.data(), file_buffer.size(), path, out, resize_to);
}

}  // namespace chexscale::data
