// Rendering of synthetic X-ray-like images and the per-class traces (see synthetic.h).
//
// Traces, in a region's local coordinates (s, t) in [0, 1), value +1 brighter / -1 darker:
//   0 Atelectasis         horizontal stripes, 4 periods
//   1 Cardiomegaly        bright filled disk
//   2 Effusion            bright lower part under a curved (meniscus) edge
//   3 Infiltration        concentric rings (target)
//   4 Mass                bright filled square
//   5 Nodule              3 x 3 small bright dots
//   6 Pneumonia           diagonal stripes
//   7 Pneumothorax        dark filled disk
//   8 Consolidation       3 x 3 checkerboard, bright and dark
//   9 Edema               vertical stripes, 4 periods
//  10 Emphysema           bright ring
//  11 Fibrosis            grid of lines (cross-hatch)
//  12 Pleural_Thickening  bright frame along the region's border
//  13 Hernia              bright triangle pointing up
// Shapes are symmetric under horizontal flips except the diagonal stripes (a flip makes the other
// diagonal, which no other class uses), so flip augmentation keeps them learnable.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/enum_parse.h"
#include "common/error.h"
#include "common/random.h"
#include "data/image/dicom_io.h"
#include "data/image/jpeg_io.h"
#include "data/synthetic/synthetic.h"

namespace chexscale::data {
namespace {

constexpr double kGridStart = 0.1;
constexpr double kCell = 0.2;
constexpr double kCellMargin = 0.15;  // of the cell, each side
constexpr float kTraceAmplitude = 55.f;

float stripes(double x, int periods) {
  return std::sin(2 * M_PI * periods * x) > 0 ? 1.f : 0.f;
}

// The trace of class `cls` at local (s, t): 1 bright, -1 dark, 0 nothing.
float trace(int cls, double s, double t) {
  const double ds = s - 0.5;
  const double dt = t - 0.5;
  const double r = std::sqrt(ds * ds + dt * dt);
  switch (cls) {
    case 0:
      return stripes(t + 0.0625, 4);
    case 1:
      return r < 0.45 ? 1.f : 0.f;
    case 2:
      return t > 0.45 + 0.8 * ds * ds ? 1.f : 0.f;
    case 3:
      return r < 0.48 ? stripes(r + 0.02, 3) : 0.f;
    case 4:
      return std::abs(ds) < 0.32 && std::abs(dt) < 0.32 ? 1.f : 0.f;
    case 5: {
      const double fs = std::fmod(s * 3, 1.0) - 0.5;
      const double ft = std::fmod(t * 3, 1.0) - 0.5;
      return fs * fs + ft * ft < 0.09 ? 1.f : 0.f;
    }
    case 6:
      return stripes((s + t) * 0.5 + 0.03, 5);
    case 7:
      return r < 0.45 ? -1.f : 0.f;
    case 8:
      return (static_cast<int>(s * 3) + static_cast<int>(t * 3)) % 2 == 0 ? 1.f : -1.f;
    case 9:
      return stripes(s + 0.0625, 4);
    case 10:
      return r > 0.3 && r < 0.45 ? 1.f : 0.f;
    case 11:
      return std::fmod(s * 4, 1.0) < 0.3 || std::fmod(t * 4, 1.0) < 0.3 ? 1.f : 0.f;
    case 12:
      return s < 0.15 || s > 0.85 || t < 0.15 || t > 0.85 ? 1.f : 0.f;
    case 13:
      return t > 0.1 && t < 0.9 && std::abs(ds) < (t - 0.1) * 0.55 ? 1.f : 0.f;
    default:
      return 0.f;
  }
}

double ellipse(double u, double v, double cu, double cv, double ru, double rv) {
  const double a = (u - cu) / ru;
  const double b = (v - cv) / rv;
  return a * a + b * b;
}

}  // namespace

const std::array<double, kNumPathologies> kSyntheticLabelRates = {
    0.103, 0.08, 0.119, 0.177, 0.08, 0.08, 0.08, 0.08, 0.08, 0.08, 0.08, 0.08, 0.08, 0.08};

PixelRect synthetic_region(int cls, int image_size) {
  CHX_CHECK(cls >= 0 && cls < kNumPathologies, "class {} out of range", cls);
  const double x0 = kGridStart + (cls % 4 + kCellMargin) * kCell;
  const double y0 = kGridStart + (cls / 4 + kCellMargin) * kCell;
  const double side = (1 - 2 * kCellMargin) * kCell;
  const auto px = [&](double f) { return static_cast<int>(std::lround(f * image_size)); };
  return {px(x0), px(y0), px(x0 + side), px(y0 + side)};
}

GrayImage render_synthetic_image(LabelBits labels, int image_size, uint64_t seed) {
  CHX_CHECK(image_size >= 16, "synthetic image size {} < 16", image_size);
  SplitMix64 rng(mix_seed({seed, 0xC4E57}));
  // Per-image anatomy: brightness, lung size and position vary a little.
  const double body = 125 + 20 * (rng.uniform() - 0.5);
  const double lung_dark = 55 + 15 * rng.uniform();
  const double lung_rv = 0.30 + 0.04 * (rng.uniform() - 0.5);
  const double lung_dv = 0.03 * (rng.uniform() - 0.5);
  const double rib_phase = rng.uniform();
  const double noise = 7.0;

  std::array<PixelRect, kNumPathologies> regions;
  for (int c = 0; c < kNumPathologies; ++c)
    regions[c] = synthetic_region(c, image_size);

  GrayImage img;
  img.width = img.height = image_size;
  img.pixels.resize(static_cast<size_t>(image_size) * image_size);
  const double inv = 1.0 / image_size;
  SplitMix64 noise_rng(mix_seed({seed, 0x0015E}));
  for (int y = 0; y < image_size; ++y) {
    const double v = (y + 0.5) * inv;
    for (int x = 0; x < image_size; ++x) {
      const double u = (x + 0.5) * inv;
      double p = 18;
      if (ellipse(u, v, 0.5, 0.56, 0.47, 0.52) < 1) p = body;
      const double lung = std::min(ellipse(u, v, 0.31, 0.47 + lung_dv, 0.16, lung_rv),
                                   ellipse(u, v, 0.69, 0.47 + lung_dv, 0.16, lung_rv));
      if (lung < 1) {
        p -= (body - lung_dark) * (1 - 0.5 * lung);
        p += 14 *
             std::max(0.0, std::sin(2 * M_PI * (v * 8 + 1.5 * (u - 0.5) * (u - 0.5) + rib_phase)));
      }
      if (std::abs(u - 0.5) < 0.045 && v > 0.1) p += 35;  // spine
      const uint64_t r = noise_rng.next();
      p += noise * (static_cast<double>((r & 0xFFFF) + ((r >> 16) & 0xFFFF)) / 65535.0 - 1.0) * 1.7;
      img.pixels[static_cast<size_t>(y) * image_size + x] =
          static_cast<uint8_t>(std::clamp(p + 0.5, 0.0, 255.0));
    }
  }
  // Traces on top, each inside its own region.
  for (int c = 0; c < kNumPathologies; ++c) {
    if (!has_label(labels, c)) continue;
    const PixelRect& rc = regions[c];
    const double w = rc.x1 - rc.x0;
    const double h = rc.y1 - rc.y0;
    for (int y = rc.y0; y < rc.y1; ++y) {
      for (int x = rc.x0; x < rc.x1; ++x) {
        const float f = trace(c, (x - rc.x0 + 0.5) / w, (y - rc.y0 + 0.5) / h);
        if (f == 0.f) continue;
        uint8_t& px = img.pixels[static_cast<size_t>(y) * image_size + x];
        px = static_cast<uint8_t>(std::clamp(px + f * kTraceAmplitude, 0.f, 255.f));
      }
    }
  }
  return img;
}

namespace {

constexpr int kSynthJpegQuality = 95;

// Plain write: the data set's CSV, written last and atomically, marks a finished data set.
int64_t write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw IoError(fmt::format("cannot write {}", path));
  return static_cast<int64_t>(bytes.size());
}

// The 8-bit image widened to `bits`: v in the high bits, seeded noise in the low ones.
std::vector<uint16_t> widen(const GrayImage& image, int bits, uint64_t seed) {
  SplitMix64 rng(mix_seed({seed, 0x16B17}));
  const int low = bits - 8;
  std::vector<uint16_t> wide(image.pixels.size());
  for (size_t i = 0; i < wide.size(); ++i) {
    wide[i] = static_cast<uint16_t>((uint32_t{image.pixels[i]} << low) |
                                    (rng.next() & ((1U << low) - 1U)));
  }
  return wide;
}

// One of four DICOM variants: 12/16 bits, MONOCHROME2/1, rescaled, windowed to the stored range,
// uncompressed, RLE or JPEG-LS, or all in `compression` (JPEG baseline: 8 bits stored). Rendered
// as decode_dicom_gray does, each gives the image back (in the high 8 of its bits; JPEG baseline
// within its loss).
int64_t write_synthetic_dicom(const GrayImage& image, uint64_t seed, const std::string& path,
                              std::optional<DicomCompression> compression) {
  DicomWriteOptions o;
  switch (seed % 4) {
    case 0:
      o.bits_stored = 12;
      break;
    case 1:
      o.bits_stored = 16;
      o.monochrome1 = true;
      o.rescale_slope = 2;
      o.rescale_intercept = -1024;
      o.compression = DicomCompression::kRle;
      break;
    case 2:
      o.bits_stored = 16;
      o.compression = DicomCompression::kJpegLs;
      break;
    default:
      o.bits_stored = 12;
      o.monochrome1 = true;
      o.rescale_slope = 0.5;
      o.compression = DicomCompression::kRle;
      break;
  }
  if (compression) o.compression = *compression;
  if (o.compression == DicomCompression::kJpegBaseline) o.bits_stored = 8;
  const double levels = std::ldexp(1.0, o.bits_stored);
  o.window_width = o.rescale_slope * levels;
  o.window_center = o.rescale_intercept + o.rescale_slope * levels / 2;
  std::vector<uint16_t> stored = widen(image, o.bits_stored, seed);
  if (o.monochrome1) {
    for (uint16_t& v : stored)
      v = static_cast<uint16_t>(max_sample(o.bits_stored) - v);
  }
  write_dicom_gray(path, stored.data(), image.width, image.height, o);
  return static_cast<int64_t>(std::filesystem::file_size(path));
}

}  // namespace

const char* to_string(SynthImageFormat format) {
  switch (format) {
    case SynthImageFormat::kLayout:
      return "layout";
    case SynthImageFormat::kPng:
      return "png";
    case SynthImageFormat::kPng16:
      return "png16";
    case SynthImageFormat::kJpeg:
      return "jpeg";
    default:
      return "dicom";
  }
}

SynthImageFormat parse_synth_image_format(const std::string& name) {
  return parse_enum(name, "format",
                    {SynthImageFormat::kLayout, SynthImageFormat::kPng, SynthImageFormat::kPng16,
                     SynthImageFormat::kJpeg, SynthImageFormat::kDicom});
}

int64_t write_synthetic_image_file(const GrayImage& image, SynthImageFormat format, uint64_t seed,
                                   const std::string& path,
                                   std::optional<DicomCompression> dicom_compression) {
  switch (format) {
    case SynthImageFormat::kPng:
      return write_bytes(path, encode_png_gray(image.pixels.data(), image.width, image.height));
    case SynthImageFormat::kPng16: {
      const std::vector<uint16_t> wide = widen(image, 16, seed);
      return write_bytes(path, encode_png_gray16(wide.data(), image.width, image.height));
    }
    case SynthImageFormat::kJpeg:
      return write_bytes(path, encode_jpeg_gray(image.pixels.data(), image.width, image.height,
                                                kSynthJpegQuality));
    case SynthImageFormat::kDicom:
      return write_synthetic_dicom(image, seed, path, dicom_compression);
    default:
      throw Error("write_synthetic_image_file: kLayout is resolved by the layout");
  }
}

}  // namespace chexscale::data
