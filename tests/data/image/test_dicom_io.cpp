// DICOM's compressed transfer syntaxes and VOI LUT (dicom_io.h) against references: each
// lossless syntax DCMTK's encoders write (RLE, JPEG lossless process 14 SV1, JPEG-LS) decodes to
// exactly the pixels of the uncompressed file; JPEG baseline stays within a stated bound of the
// original and agrees with pydicom (its Pillow JPEG handler), as RLE does (pydicom's own RLE
// decoder; this pydicom has no JPEG lossless or JPEG-LS decoder, so those are checked against the
// uncompressed twin, itself checked against pydicom in test_image_decode.cpp). A VOI LUT Sequence
// written by pydicom renders as pydicom's apply_voi_lut. Corrupt compressed pixel data and a
// syntax without a codec (JPEG 2000) are DataErrors naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "data/image/dicom_io.h"
#include "data/image/image_decode.h"
#include "data/synthetic/synthetic.h"
#include "image_reference.h"
#include "stored_values.h"
#include "test_util/process.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {

constexpr int kW = 48;
constexpr int kH = 32;

// The transfer syntax UIDs written into the file's meta header.
constexpr const char* kRleUid = "1.2.840.10008.1.2.5";
constexpr const char* kJpegLosslessUid = "1.2.840.10008.1.2.4.70";
constexpr const char* kJpegLsUid = "1.2.840.10008.1.2.4.80";
constexpr const char* kJpegBaselineUid = "1.2.840.10008.1.2.4.50";

std::vector<uint16_t> pattern(int bits) {
  return full_range_pattern(kW, kH, bits);
}

std::vector<int> values(const GrayImage& img) {
  return img.wide() ? std::vector<int>(img.pixels16.begin(), img.pixels16.end())
                    : std::vector<int>(img.pixels.begin(), img.pixels.end());
}

int max_difference(const std::vector<int>& a, const std::vector<int>& b) {
  if (a.size() != b.size()) return 1 << 20;
  int worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

std::string write(const test_util::TempDir& dir, const std::string& name,
                  const std::vector<uint16_t>& stored, const DicomWriteOptions& o) {
  const std::string path = dir.path() + "/" + name;
  write_dicom_gray(path, stored.data(), kW, kH, o);
  return path;
}

TEST(DicomIo, CompressionNamesRoundTrip) {
  for (const DicomCompression c :
       {DicomCompression::kNone, DicomCompression::kRle, DicomCompression::kJpegLossless,
        DicomCompression::kJpegLs, DicomCompression::kJpegBaseline}) {
    EXPECT_EQ(parse_dicom_compression(to_string(c)), c);
  }
  EXPECT_THROW(parse_dicom_compression("jpeg2000"), UsageError);
}

// 8, 12 and 16 bits stored, MONOCHROME1 with rescale and window and MONOCHROME2 without: every
// lossless syntax decodes to the uncompressed file's pixels, and the file says its syntax.
TEST(DicomIo, LosslessSyntaxesDecodeExactlyAsUncompressed) {
  test_util::TempDir dir;
  const std::pair<DicomCompression, const char*> syntaxes[] = {
      {DicomCompression::kRle, kRleUid},
      {DicomCompression::kJpegLossless, kJpegLosslessUid},
      {DicomCompression::kJpegLs, kJpegLsUid}};
  for (const int bits : {8, 12, 16}) {
    for (const bool mono1 : {false, true}) {
      DicomWriteOptions o;
      o.bits_stored = bits;
      o.monochrome1 = mono1;
      if (mono1) {
        o.rescale_slope = 2;
        o.rescale_intercept = -100;
        o.window_center = 1.1 * max_sample(bits);
        o.window_width = 1.5 * max_sample(bits);
      }
      const std::vector<uint16_t> stored = pattern(bits);
      const std::string what = std::to_string(bits) + (mono1 ? "_mono1" : "_mono2");
      const std::string plain_path = write(dir, what + "_plain.dcm", stored, o);
      const GrayImage plain = decode_file(plain_path);
      ASSERT_EQ(plain.bit_depth, bits) << what;
      if (!mono1) {
        EXPECT_EQ(values(plain), std::vector<int>(stored.begin(), stored.end()));
      }
      const size_t plain_size = test_util::file_contents(plain_path).size();
      for (const auto& [compression, uid] : syntaxes) {
        o.compression = compression;
        const std::string path =
            write(dir, what + "_" + to_string(compression) + ".dcm", stored, o);
        const std::string bytes = test_util::file_contents(path);
        EXPECT_NE(bytes.find(uid), std::string::npos) << path;
        const GrayImage img = decode_file(path);
        EXPECT_EQ(img.bit_depth, bits) << path;
        EXPECT_EQ(img.width, kW) << path;
        EXPECT_EQ(values(img), values(plain)) << path;
        EXPECT_NE(bytes.size(), plain_size) << path;  // really re-encoded
      }
    }
  }
}

// JPEG baseline of 8 bits stored, quality 90, on a (noisy) synthetic X-ray: within 24 grey levels
// of the original (measured: 21), and pydicom's decode within 1; the windowed 12-bit MONOCHROME1
// RLE file within 1 (the window's rounding).
TEST(DicomIo, JpegBaselineAndRleAgreeWithPydicom) {
  test_util::TempDir dir;
  const GrayImage xray = render_synthetic_image(0x15, kW, 9);
  std::vector<uint16_t> stored;
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x)
      stored.push_back(xray.pixels[static_cast<size_t>(y) * kW + x]);
  }
  DicomWriteOptions o;
  o.bits_stored = 8;
  o.compression = DicomCompression::kJpegBaseline;
  const std::string jpeg = write(dir, "baseline.dcm", stored, o);
  EXPECT_NE(test_util::file_contents(jpeg).find(kJpegBaselineUid), std::string::npos);
  o.monochrome1 = true;
  const std::string jpeg_mono1 = write(dir, "baseline_mono1.dcm", stored, o);
  DicomWriteOptions r;
  r.bits_stored = 12;
  r.monochrome1 = true;
  r.rescale_slope = 0.5;
  r.window_center = 900;
  r.window_width = 1600;
  r.compression = DicomCompression::kRle;
  const std::vector<uint16_t> stored12 = pattern(12);
  const std::string rle = write(dir, "rle12.dcm", stored12, r);

  const GrayImage ours = decode_file(jpeg);
  ASSERT_EQ(ours.bit_depth, 8);
  EXPECT_LE(max_difference(values(ours), std::vector<int>(stored.begin(), stored.end())), 24);
  const auto refs = reference_decode({jpeg, jpeg_mono1, rle});
  const std::string paths[] = {jpeg, jpeg_mono1, rle};
  const int bounds[] = {1, 1, 1};
  for (size_t i = 0; i < refs.size(); ++i) {
    ASSERT_TRUE(refs[i].error.empty()) << paths[i] << ": " << refs[i].error;
    const GrayImage img = decode_file(paths[i]);
    EXPECT_EQ(img.bit_depth, refs[i].bit_depth) << paths[i];
    EXPECT_LE(max_difference(values(img), refs[i].pixels), bounds[i]) << paths[i];
  }
}

// A VOI LUT Sequence (added by pydicom to a file of ours that also has a window) is applied
// instead of the window, as pydicom's apply_voi_lut and TorchXRayVision's read_xray_dcm do:
// within 1 of pydicom's rendering for MONOCHROME2 and MONOCHROME1, 12 and 16 bits.
TEST(DicomIo, VoiLutSequenceAgreesWithPydicom) {
  test_util::TempDir dir;
  for (const int bits : {12, 16}) {
    for (const bool mono1 : {false, true}) {
      DicomWriteOptions o;
      o.bits_stored = bits;
      o.monochrome1 = mono1;
      o.window_center = max_sample(bits) / 4.0;  // far from the LUT's rendering
      o.window_width = max_sample(bits) / 8.0;
      const std::string what = std::to_string(bits) + (mono1 ? "_mono1" : "_mono2");
      const std::string plain = write(dir, what + ".dcm", pattern(bits), o);
      const std::string with_lut = dir.path() + "/" + what + "_lut.dcm";
      const test_util::ProcessResult r = test_util::run_shell(
          "/usr/bin/python3 '" + test_util::source_dir() + "/tests/data/image/dicom_voi_lut.py' '" +
          plain + "' '" + with_lut + "'");
      ASSERT_EQ(r.exit_code, 0) << r.output;
      std::istringstream in(r.output);
      int w = 0;
      int h = 0;
      int depth = 0;
      in >> w >> h >> depth;
      std::vector<int> reference;
      for (int v = 0; in >> v;)
        reference.push_back(v);
      const GrayImage lut = decode_file(with_lut);
      EXPECT_EQ(lut.width, w);
      EXPECT_EQ(lut.height, h);
      EXPECT_EQ(lut.bit_depth, depth);
      EXPECT_LE(max_difference(values(lut), reference), 1) << with_lut;
      // The window alone renders differently: the LUT was applied, not the window.
      EXPECT_GT(max_difference(values(decode_file(plain)), reference), max_sample(bits) / 8)
          << plain;
    }
  }
}

// Overwrites the bytes at the first occurrence of `marker` after `from` with `value`.
std::string patched_after(std::string bytes, size_t from, const std::string& marker,
                          const std::string& value) {
  const size_t at = bytes.find(marker, from);
  EXPECT_NE(at, std::string::npos) << "marker not found";
  if (at != std::string::npos) bytes.replace(at, value.size(), value);
  return bytes;
}

TEST(DicomIo, UndecodableCompressedFilesAreDataErrorsNamingTheFile) {
  test_util::TempDir dir;
  const std::vector<uint16_t> stored = pattern(12);
  DicomWriteOptions o;
  o.bits_stored = 12;
  std::string files[3];
  const DicomCompression kinds[] = {DicomCompression::kJpegLossless, DicomCompression::kJpegLs,
                                    DicomCompression::kRle};
  for (int i = 0; i < 3; ++i) {
    o.compression = kinds[i];
    files[i] = test_util::file_contents(
        write(dir, std::string("ok_") + to_string(kinds[i]) + ".dcm", stored, o));
  }
  // Pixel Data (7FE0,0010), OB, undefined length: the offset table item, then the fragment.
  const std::string pixel_data("\xE0\x7F\x10\x00OB", 6);
  const size_t jpeg_at = files[0].find(pixel_data);
  const size_t jls_at = files[1].find(pixel_data);
  const size_t rle_at = files[2].find(pixel_data);
  ASSERT_NE(jpeg_at, std::string::npos);
  ASSERT_NE(jls_at, std::string::npos);
  ASSERT_NE(rle_at, std::string::npos);
  // JPEG's and JPEG-LS's start of image (FF D8) gone; RLE's header claiming 15 segments.
  const std::string soi("\xFF\xD8", 2);
  expect_data_error(
      dir.write("no_soi.dcm", patched_after(files[0], jpeg_at, soi, std::string(2, '\0'))));
  expect_data_error(
      dir.write("no_soi_ls.dcm", patched_after(files[1], jls_at, soi, std::string(2, '\0'))));
  // The first fragment item (FE FF 00 E0) after the empty offset table: its RLE header follows.
  const std::string item("\xFE\xFF\x00\xE0", 4);
  const size_t table = files[2].find(item, rle_at);
  ASSERT_NE(table, std::string::npos);
  std::string rle = files[2];
  const size_t fragment = rle.find(item, table + 8);
  ASSERT_NE(fragment, std::string::npos);
  rle[fragment + 8] = '\x0F';
  expect_data_error(dir.write("rle_segments.dcm", rle));
  // Half of every compressed stream replaced by noise.
  for (int i = 0; i < 3; ++i) {
    std::string noisy = files[i];
    const size_t start = files[i].find(pixel_data) + 40;
    for (size_t k = start; k < noisy.size() - 16; ++k)
      noisy[k] = static_cast<char>((k * 131) ^ 0x5A);
    const std::string path = dir.write(std::string("noise_") + to_string(kinds[i]) + ".dcm", noisy);
    try {
      const GrayImage img = decode_file(path);  // decoders may accept noise: then a full image
      EXPECT_EQ(img.pixels16.size(), static_cast<size_t>(kW) * kH) << path;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  // A syntax with no codec here: JPEG 2000 (same UID length as JPEG lossless's).
  const std::string j2k = patched_after(files[0], 0, kJpegLosslessUid, "1.2.840.10008.1.2.4.90");
  EXPECT_NE(expect_data_error(dir.write("j2k.dcm", j2k)).find("DICOM"), std::string::npos);
  // After these errors the intact files still decode, to the same pixels.
  for (int i = 0; i < 3; ++i) {
    const GrayImage img =
        decode_file(dir.write(std::string("again_") + to_string(kinds[i]) + ".dcm", files[i]));
    EXPECT_EQ(values(img), std::vector<int>(stored.begin(), stored.end()));
  }
}

// `synth --dicom-compression X` writes through write_synthetic_image_file: every variant of every
// syntax decodes back to the 8-bit image in its high bits (exactly for lossless syntaxes, within
// 24 for JPEG baseline, 8 bits stored; measured 16).
TEST(DicomIo, SynthWritesEachCompression) {
  test_util::TempDir dir;
  const GrayImage image = render_synthetic_image(0x2461, 64, 7);
  for (const DicomCompression c :
       {DicomCompression::kNone, DicomCompression::kRle, DicomCompression::kJpegLossless,
        DicomCompression::kJpegLs, DicomCompression::kJpegBaseline}) {
    for (uint64_t seed = 0; seed < 4; ++seed) {
      const std::string path =
          dir.path() + "/" + to_string(c) + "_" + std::to_string(seed) + ".dcm";
      write_synthetic_image_file(image, SynthImageFormat::kDicom, seed, path, c);
      const GrayImage img = decode_file(path);
      const int shift = img.bit_depth - 8;
      int worst = 0;
      for (size_t i = 0; i < image.pixels.size(); ++i) {
        const int v = img.wide() ? img.pixels16[i] >> shift : img.pixels[i];
        worst = std::max(worst, std::abs(v - image.pixels[i]));
      }
      if (c == DicomCompression::kJpegBaseline) {
        EXPECT_EQ(img.bit_depth, 8) << path;
        EXPECT_LE(worst, 24) << path;
      } else {
        EXPECT_GE(img.bit_depth, 12) << path;
        EXPECT_LE(worst, 1) << path;  // the window's rounding
      }
    }
  }
}

}  // namespace
}  // namespace chexscale::data
