// Image decoding by content (image_decode.h) against independent references: Pillow reads the
// same PNG and JPEG files and pydicom the same DICOM files (tests/data/image/image_reference.py),
// and the pixels must agree -- exactly for lossless files, within a stated bound for JPEG. Hostile
// JPEG and DICOM inputs (truncated, wrong lengths, huge dimensions) are DataErrors naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "data/image/dicom_io.h"
#include "data/image/image_decode.h"
#include "data/image/jpeg_io.h"
#include "data/image/png_io.h"
#include "data/image/resize.h"
#include "data/synthetic/synthetic.h"
#include "image_reference.h"
#include "stored_values.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {

constexpr int kW = 40;
constexpr int kH = 28;

std::vector<uint16_t> pattern(int bits) {
  return full_range_pattern(kW, kH, bits);
}

// Max |ours - reference|; sizes and bit depths must match.
int max_difference(const GrayImage& ours, const ReferenceImage& ref, const std::string& what) {
  EXPECT_TRUE(ref.error.empty()) << what << ": " << ref.error;
  EXPECT_EQ(ours.width, ref.width) << what;
  EXPECT_EQ(ours.height, ref.height) << what;
  EXPECT_EQ(ours.bit_depth, ref.bit_depth) << what;
  const size_t n = static_cast<size_t>(ours.width) * ours.height;
  if (ref.pixels.size() != n) return 1 << 20;
  int worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const int v = ours.wide() ? ours.pixels16[i] : ours.pixels[i];
    worst = std::max(worst, std::abs(v - ref.pixels[i]));
  }
  return worst;
}

// 8-bit RGB of the synthetic X-ray with a colour cast, for colour JPEGs.
std::vector<uint8_t> tinted(const GrayImage& gray) {
  std::vector<uint8_t> rgb;
  for (uint8_t g : gray.pixels) {
    rgb.push_back(g);
    rgb.push_back(static_cast<uint8_t>(g * 3 / 4));
    rgb.push_back(static_cast<uint8_t>(255 - g / 2));
  }
  return rgb;
}

TEST(ImageDecode, FormatIsFoundByContentNotByName) {
  test_util::TempDir dir;
  const GrayImage xray = render_synthetic_image(0x5, 64, 3);
  const std::string png = encode_png_gray(xray.pixels.data(), 64, 64);
  const std::string jpeg = encode_jpeg_gray(xray.pixels.data(), 64, 64, 90);
  const auto as_bytes = [](const std::string& s) {
    return reinterpret_cast<const uint8_t*>(s.data());
  };
  EXPECT_EQ(sniff_image_format(as_bytes(png), png.size()), ImageFormat::kPng);
  EXPECT_EQ(sniff_image_format(as_bytes(jpeg), jpeg.size()), ImageFormat::kJpeg);
  const std::string dcm = dir.path() + "/named.png";  // a DICOM file with a PNG's name
  std::vector<uint16_t> stored(xray.pixels.begin(), xray.pixels.end());
  DicomWriteOptions o;
  o.bits_stored = 8;
  write_dicom_gray(dcm, stored.data(), 64, 64, o);
  const std::string dcm_bytes = test_util::file_contents(dcm);
  EXPECT_EQ(sniff_image_format(as_bytes(dcm_bytes), dcm_bytes.size()), ImageFormat::kDicom);

  // Each decodes to the same 8-bit image whatever its name says (the JPEG within its bound).
  EXPECT_EQ(decode_file(dir.write("really_a_png.jpg", png)).pixels, xray.pixels);
  EXPECT_EQ(decode_file(dcm).pixels, xray.pixels);
  const GrayImage from_jpeg = decode_file(dir.write("really_a_jpeg.dcm", jpeg));
  ASSERT_EQ(from_jpeg.pixels.size(), xray.pixels.size());
  int worst = 0;
  for (size_t i = 0; i < xray.pixels.size(); ++i)
    worst = std::max(worst, std::abs(from_jpeg.pixels[i] - xray.pixels[i]));
  EXPECT_LE(worst, 20);  // quality 90 on a noisy image

  const std::string other = dir.write("notes.png", "GIF89a this is no X-ray");
  EXPECT_NE(expect_data_error(other).find("not a PNG, JPEG or DICOM"), std::string::npos);
  EXPECT_NE(expect_data_error(dir.write("empty.png", "")).find("empty"), std::string::npos);
}

TEST(ImageDecode, Png16KeepsEveryBitAsPillowReadsIt) {
  test_util::TempDir dir;
  const std::vector<uint16_t> v = pattern(16);
  const std::string path = dir.write("g16.png", encode_png_gray16(v.data(), kW, kH));
  const GrayImage img = decode_file(path);
  ASSERT_EQ(img.bit_depth, 16);
  EXPECT_EQ(img.pixels16, v);
  EXPECT_EQ(max_difference(img, reference_decode({path})[0], path), 0);
}

// Pillow and TurboJPEG run the same libjpeg-turbo IDCT: decoded to gray (Pillow's draft("L"),
// the luma plane of a colour JPEG), gray and colour JPEGs agree exactly.
TEST(ImageDecode, JpegAgreesWithPillow) {
  test_util::TempDir dir;
  const GrayImage xray = render_synthetic_image(0x3, 48, 11);
  const std::string gray = dir.write("gray.jpg", encode_jpeg_gray(xray.pixels.data(), 48, 48, 85));
  const std::vector<uint8_t> rgb = tinted(xray);
  const std::string colour = dir.write("colour.jpg", encode_jpeg_rgb(rgb.data(), 48, 48, 85));
  const auto refs = reference_decode({gray, colour});
  EXPECT_EQ(max_difference(decode_file(gray), refs[0], gray), 0);
  EXPECT_EQ(max_difference(decode_file(colour), refs[1], colour), 0);
}

// Decoding for a loader that resizes to N: the DCT scale is Pillow's draft("L", (N, N)) -- the
// largest of 1/8, 1/4, 1/2 with scale * N <= both sides -- and so are the pixels, exactly, for
// gray and colour JPEGs of an odd, non-square size. Below 8 a side, the full image.
TEST(ImageDecode, JpegForATrainingSizeIsPillowsDraft) {
  test_util::TempDir dir;
  constexpr int kWidth = 203;
  constexpr int kHeight = 137;
  const GrayImage xray = render_synthetic_image(0x6, kWidth, 13);  // the top kHeight rows
  const std::string gray =
      dir.write("gray.jpg", encode_jpeg_gray(xray.pixels.data(), kWidth, kHeight, 90));
  const std::vector<uint8_t> rgb = tinted(xray);
  const std::string colour =
      dir.write("colour.jpg", encode_jpeg_rgb(rgb.data(), kWidth, kHeight, 90));
  struct Case {
    int resize_to;
    int scale;  // the denominator expected
  };
  for (const Case c : {Case{17, 8}, Case{34, 4}, Case{18, 4}, Case{60, 2}, Case{68, 2}, Case{69, 1},
                       Case{137, 1}}) {
    const auto refs = reference_decode({gray, colour}, c.resize_to);
    for (size_t i = 0; i < 2; ++i) {
      const std::string& path = i == 0 ? gray : colour;
      const std::string what = fmt::format("{} for {}", path, c.resize_to);
      const GrayImage img = decode_file(path, c.resize_to);
      EXPECT_EQ(img.width, (kWidth + c.scale - 1) / c.scale) << what;
      EXPECT_EQ(img.height, (kHeight + c.scale - 1) / c.scale) << what;
      EXPECT_EQ(max_difference(img, refs[i], what), 0) << what;
    }
  }
  const GrayImage full = decode_file(gray);
  EXPECT_EQ(full.width, kWidth);
  EXPECT_EQ(decode_file(gray, 7).pixels, full.pixels);  // below 8: no scaling
}

// The scaled decode is close to what it replaces, a full decode then area resizing, and the
// other formats ignore the size: they decode in full.
TEST(ImageDecode, ScaledJpegIsCloseToFullDecodeAndResize) {
  test_util::TempDir dir;
  const GrayImage xray = render_synthetic_image(0x41, 512, 17);
  const std::string jpeg = dir.write("x.jpg", encode_jpeg_gray(xray.pixels.data(), 512, 512, 95));
  const GrayImage scaled = decode_file(jpeg, 128);
  ASSERT_EQ(scaled.width, 128);
  ASSERT_EQ(scaled.height, 128);
  GrayImage resized;
  resize_gray(decode_file(jpeg), 128, 128, resized);
  int worst = 0;
  double total = 0;
  for (size_t i = 0; i < resized.pixels.size(); ++i) {
    const int d = std::abs(scaled.pixels[i] - resized.pixels[i]);
    worst = std::max(worst, d);
    total += d;
  }
  EXPECT_LE(worst, 2);  // 1 on this image: the same low-pass, rounded at another point
  EXPECT_LE(total / static_cast<double>(resized.pixels.size()), 0.2);  // 0.065 here

  const std::string png = dir.write("x.png", encode_png_gray(xray.pixels.data(), 512, 512));
  EXPECT_EQ(decode_file(png, 128).pixels, xray.pixels);
}

// Cut and corrupt JPEGs are errors at a reduced scale as in full.
TEST(ImageDecode, HostileJpegAtAReducedScaleIsAClearError) {
  test_util::TempDir dir;
  const GrayImage xray = render_synthetic_image(0x9, 256, 5);
  const std::string jpeg = encode_jpeg_gray(xray.pixels.data(), 256, 256, 90);
  for (size_t cut : {size_t{20}, jpeg.size() / 3, jpeg.size() - 40}) {
    const std::string path = dir.write("cut" + std::to_string(cut) + ".jpg", jpeg.substr(0, cut));
    for (int resize_to : {32, 64, 128}) {
      GrayImage img;
      std::vector<uint8_t> buffer;
      try {
        read_image(path, img, buffer, resize_to);
        ADD_FAILURE() << path << " at " << resize_to << ": decoded without an error";
      } catch (const DataError& e) {
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_EQ(decode_file(dir.write("intact.jpg", jpeg), 64).width, 64);
}

struct DicomCase {
  const char* name;
  DicomWriteOptions options;
};

std::vector<DicomCase> dicom_cases() {
  std::vector<DicomCase> cases;
  DicomWriteOptions o;
  o.bits_stored = 12;
  o.window_center = 1800;
  o.window_width = 2500;
  cases.push_back({"mono2_12bit_window.dcm", o});
  o = {};
  o.bits_stored = 16;
  o.monochrome1 = true;
  o.rescale_slope = 2;
  o.rescale_intercept = -1000;
  o.window_center = 60000;
  o.window_width = 90000;
  cases.push_back({"mono1_16bit_rescale_window.dcm", o});
  o = {};
  o.bits_stored = 16;
  o.compression = DicomCompression::kRle;
  cases.push_back({"mono2_16bit_rle_no_window.dcm", o});
  o = {};
  o.bits_stored = 12;
  o.monochrome1 = true;
  o.rescale_slope = 0.5;
  o.rescale_intercept = 10;
  o.window_center = 1000;
  o.window_width = 1500;
  o.compression = DicomCompression::kRle;
  cases.push_back({"mono1_12bit_rle_window.dcm", o});
  return cases;
}

// DCMTK renders with the modality LUT and the first window, MONOCHROME1 inverted, onto the bits
// stored; pydicom's pixel_array -> apply_modality_lut -> apply_voi_lut does the same in floating
// point. Rounding may differ by one.
TEST(ImageDecode, DicomAgreesWithPydicom) {
  test_util::TempDir dir;
  std::vector<std::string> paths;
  std::vector<GrayImage> ours;
  for (const DicomCase& c : dicom_cases()) {
    const std::vector<uint16_t> stored = pattern(c.options.bits_stored);
    paths.push_back(dir.path() + "/" + c.name);
    write_dicom_gray(paths.back(), stored.data(), kW, kH, c.options);
    ours.push_back(decode_file(paths.back()));
    EXPECT_EQ(ours.back().bit_depth, c.options.bits_stored) << c.name;
  }
  const auto refs = reference_decode(paths);
  for (size_t i = 0; i < paths.size(); ++i)
    EXPECT_LE(max_difference(ours[i], refs[i], paths[i]), 1);
  // Without a window, a MONOCHROME2 file's values are the stored ones, exactly.
  EXPECT_EQ(ours[2].pixels16, pattern(16));
}

// pydicom here has no JPEG-LS decoder: the JPEG-LS file must decode exactly as its uncompressed
// twin (which the previous test checks against pydicom).
TEST(ImageDecode, DicomJpegLsIsLossless) {
  test_util::TempDir dir;
  const std::vector<uint16_t> stored = pattern(12);
  DicomWriteOptions o;
  o.bits_stored = 12;
  o.monochrome1 = true;
  o.window_center = 2000;
  o.window_width = 3000;
  write_dicom_gray(dir.path() + "/plain.dcm", stored.data(), kW, kH, o);
  o.compression = DicomCompression::kJpegLs;
  write_dicom_gray(dir.path() + "/jls.dcm", stored.data(), kW, kH, o);
  const GrayImage plain = decode_file(dir.path() + "/plain.dcm");
  const GrayImage jls = decode_file(dir.path() + "/jls.dcm");
  EXPECT_EQ(jls.bit_depth, 12);
  EXPECT_EQ(jls.pixels16, plain.pixels16);
  EXPECT_LT(test_util::file_contents(dir.path() + "/jls.dcm").size(),
            test_util::file_contents(dir.path() + "/plain.dcm").size());
}

// Overwrites `size` bytes at the first occurrence of `marker` plus `offset`.
std::string patched(std::string bytes, const std::string& marker, size_t offset,
                    const std::string& value) {
  const size_t at = bytes.find(marker);
  EXPECT_NE(at, std::string::npos) << "marker not found";
  if (at != std::string::npos) bytes.replace(at + offset, value.size(), value);
  return bytes;
}

TEST(ImageDecode, HostileJpegIsAClearError) {
  test_util::TempDir dir;
  const GrayImage xray = render_synthetic_image(0x9, 64, 5);
  const std::string jpeg = encode_jpeg_gray(xray.pixels.data(), 64, 64, 90);
  for (size_t cut : {size_t{3}, size_t{20}, jpeg.size() / 3, jpeg.size() - 40, jpeg.size() - 2}) {
    const std::string path = dir.write("cut" + std::to_string(cut) + ".jpg", jpeg.substr(0, cut));
    EXPECT_NE(expect_data_error(path).find("JPEG"), std::string::npos);
  }
  // SOF0: FF C0, length (2), precision (1), height (2), width (2).
  const std::string sof("\xFF\xC0", 2);
  EXPECT_NE(expect_data_error(dir.write("huge.jpg", patched(jpeg, sof, 5, "\x90\x00\x90\x00")))
                .find("more than 32768"),
            std::string::npos);
  EXPECT_NE(expect_data_error(dir.write("big.jpg", patched(jpeg, sof, 5, "\x75\x30\x75\x30")))
                .find("cannot fit"),
            std::string::npos);
  EXPECT_NE(expect_data_error(dir.write("zero.jpg", patched(jpeg, sof, 5, std::string(4, '\0'))))
                .find("JPEG"),
            std::string::npos);
  // Corrupt entropy-coded data in the middle of the scan.
  std::string corrupt = jpeg;
  for (size_t i = corrupt.size() / 2; i < corrupt.size() / 2 + 64; ++i)
    corrupt[i] = static_cast<char>(0xFF);
  expect_data_error(dir.write("corrupt.jpg", corrupt));
  // After all these errors, on the same thread, an intact JPEG decodes to the same pixels.
  const std::string intact = dir.write("intact.jpg", jpeg);
  const std::vector<uint8_t> pixels = decode_file(intact).pixels;
  EXPECT_EQ(decode_file(dir.write("again.jpg", jpeg)).pixels, pixels);
  EXPECT_EQ(pixels.size(), 64u * 64u);
}

TEST(ImageDecode, HostileDicomIsAClearError) {
  test_util::TempDir dir;
  const std::vector<uint16_t> stored = pattern(12);
  DicomWriteOptions o;
  o.bits_stored = 12;
  const std::string good_path = dir.path() + "/good.dcm";
  write_dicom_gray(good_path, stored.data(), kW, kH, o);
  const std::string good = test_util::file_contents(good_path);
  o.compression = DicomCompression::kRle;
  write_dicom_gray(dir.path() + "/rle.dcm", stored.data(), kW, kH, o);
  const std::string rle = test_util::file_contents(dir.path() + "/rle.dcm");

  for (const std::string* file : {&good, &rle}) {
    for (size_t cut : {size_t{100}, size_t{140}, size_t{300}, file->size() / 2, file->size() - 1}) {
      expect_data_error(dir.write("cut" + std::to_string(cut) + ".dcm", file->substr(0, cut)));
    }
  }
  // Explicit VR little endian: tag group, element, VR, then the value (US: 2-byte length).
  const std::string rows("\x28\x00\x10\x00US\x02\x00", 8);
  EXPECT_NE(expect_data_error(dir.write("huge.dcm", patched(good, rows, 8, "\xFF\xFF")))
                .find("at most 32768"),
            std::string::npos);
  EXPECT_NE(
      expect_data_error(dir.write("tall.dcm", patched(good, rows, 8, std::string("\x00\x10", 2))))
          .find("truncated DICOM"),
      std::string::npos);
  const std::string bits_stored("\x28\x00\x01\x01US\x02\x00", 8);
  EXPECT_NE(expect_data_error(
                dir.write("bits.dcm", patched(good, bits_stored, 8, std::string("\x14\x00", 2))))
                .find("bits stored"),
            std::string::npos);
  // Pixel Data (7FE0,0010) OW: 2 reserved bytes, then a 4-byte length past the end of the file.
  const std::string pixel_data("\xE0\x7F\x10\x00OW", 6);
  expect_data_error(
      dir.write("length.dcm", patched(good, pixel_data, 8, std::string("\x00\x00\x00\x10", 4))));
  expect_data_error(
      dir.write("odd.dcm", patched(good, pixel_data, 8, std::string("\x01\x00\x00\x00", 4))));
  const std::string photometric = "MONOCHROME2";
  EXPECT_NE(expect_data_error(dir.write("rgb.dcm", patched(good, photometric, 0, "RGB        ")))
                .find("not a monochrome"),
            std::string::npos);
}

}  // namespace
}  // namespace chexscale::data
