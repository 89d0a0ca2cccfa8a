// Writes the seed corpus of the JPEG or DICOM fuzzer: small valid files of every kind the
// decoder handles (DICOM: uncompressed, RLE, JPEG-LS, JPEG lossless and JPEG baseline).
// make_image_seed_corpus jpeg|dicom <dir>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/image/dicom_io.h"
#include "data/image/jpeg_io.h"

namespace {

using chexscale::data::DicomCompression;
using chexscale::data::DicomWriteOptions;

std::vector<uint8_t> gray(int w, int h) {
  std::vector<uint8_t> g;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x)
      g.push_back(static_cast<uint8_t>((x * 13 + y * 7 + x * y) % 256));
  }
  return g;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

void jpeg_seeds(const std::string& dir) {
  const std::vector<uint8_t> g = gray(24, 16);
  std::vector<uint8_t> rgb;
  for (uint8_t v : g) {
    rgb.push_back(v);
    rgb.push_back(static_cast<uint8_t>(255 - v));
    rgb.push_back(static_cast<uint8_t>(v / 2));
  }
  write(dir + "/gray.jpg", chexscale::data::encode_jpeg_gray(g.data(), 24, 16, 90));
  write(dir + "/gray_q20.jpg", chexscale::data::encode_jpeg_gray(g.data(), 24, 16, 20));
  write(dir + "/colour.jpg", chexscale::data::encode_jpeg_rgb(rgb.data(), 24, 16, 75));
}

void dicom_seeds(const std::string& dir) {
  std::vector<uint16_t> stored;
  for (uint8_t v : gray(16, 12))
    stored.push_back(static_cast<uint16_t>(v * 16));
  DicomWriteOptions o;
  o.bits_stored = 12;
  chexscale::data::write_dicom_gray(dir + "/plain.dcm", stored.data(), 16, 12, o);
  o.monochrome1 = true;
  o.rescale_slope = 2;
  o.rescale_intercept = -100;
  o.window_center = 3000;
  o.window_width = 5000;
  o.compression = DicomCompression::kRle;
  chexscale::data::write_dicom_gray(dir + "/rle.dcm", stored.data(), 16, 12, o);
  o.compression = DicomCompression::kJpegLs;
  chexscale::data::write_dicom_gray(dir + "/jpegls.dcm", stored.data(), 16, 12, o);
  o.compression = DicomCompression::kJpegLossless;
  chexscale::data::write_dicom_gray(dir + "/jpeg_lossless.dcm", stored.data(), 16, 12, o);
  std::vector<uint16_t> stored8;
  for (uint8_t v : gray(16, 12))
    stored8.push_back(v);
  DicomWriteOptions b;
  b.bits_stored = 8;
  b.compression = DicomCompression::kJpegBaseline;
  chexscale::data::write_dicom_gray(dir + "/jpeg_baseline.dcm", stored8.data(), 16, 12, b);
  b.compression = DicomCompression::kRle;
  chexscale::data::write_dicom_gray(dir + "/rle8.dcm", stored8.data(), 16, 12, b);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_image_seed_corpus jpeg|dicom <dir>\n");
    return 2;
  }
  const std::string kind = argv[1];
  std::filesystem::create_directories(argv[2]);
  if (kind == "jpeg") {
    jpeg_seeds(argv[2]);
  } else if (kind == "dicom") {
    dicom_seeds(argv[2]);
  } else {
    std::fprintf(stderr, "unknown kind %s\n", argv[1]);
    return 2;
  }
  return 0;
}
