// Synthetic chest X-ray data with learnable labels (`chexscale synth`): X-ray-like images (body,
// lungs, spine, ribs, noise) on which each label present draws its own trace -- a distinct shape
// or texture -- inside its own fixed square region (synthetic_region; bit c of the data set's
// label set draws class c's trace). Written in a data set's exact layout, several images per
// patient: ChestX-ray14 (images/*.png, Data_Entry_2017.csv with trailing commas, the split
// lists), CheXpert, MIMIC-CXR-JPG or PadChest (see docs/data.md).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/datasets/dataset_kind.h"
#include "data/image/dicom_io.h"
#include "data/image/png_io.h"
#include "data/labels/labels.h"

namespace chexscale::data {

// A pixel rectangle [x0, x1) x [y0, y1).
struct PixelRect {
  int x0 = 0;
  int y0 = 0;
  int x1 = 0;
  int y1 = 0;
};

// Where class `cls`'s trace is drawn in an image_size x image_size synthetic image: cell
// (cls % 4, cls / 4) of a 4x4 grid spanning [0.1, 0.9] of the image, less 15 % of the cell on each
// side. Every trace pixel lies inside it; nothing else of the trace is drawn elsewhere.
PixelRect synthetic_region(int cls, int image_size);

// Fraction of images with each label (ChestX-ray14's rates, raised to at least 8 % so that small
// sets have positives of every class in every split).
extern const std::array<double, kNumPathologies> kSyntheticLabelRates;

// One image: the background drawn from `seed` plus the trace of each class in `labels`.
// The same seed gives the same background whatever the labels.
GrayImage render_synthetic_image(LabelBits labels, int image_size, uint64_t seed);

// How synthetic images are encoded (`synth --format`); kLayout: as the layout writes them (8-bit
// PNG, PadChest 16-bit PNG). png16: 16-bit gray PNG (the 8-bit image in the high byte, seeded
// noise in the low one); jpeg: gray JPEG of quality 95; dicom: 12- and 16-bit, MONOCHROME2 and
// MONOCHROME1, Rescale Slope/Intercept and a Window Center/Width spanning the stored range, some
// uncompressed, some RLE or JPEG-LS lossless (chosen by the image's seed), or every one in the
// transfer syntax of SynthOptions::dicom_compression (jpeg-baseline: 8 bits stored). File names
// keep the layout's (decoding goes by content).
enum class SynthImageFormat { kLayout, kPng, kPng16, kJpeg, kDicom };

// "layout", "png", "png16", "jpeg", "dicom"; UsageError naming the choices for another name.
SynthImageFormat parse_synth_image_format(const std::string& name);
const char* to_string(SynthImageFormat format);

// Writes the 8-bit `image` to `path` in `format` (not kLayout); `seed` picks the DICOM variant and
// the 16-bit noise; `dicom_compression`, when set, the DICOM transfer syntax. Returns the bytes
// written; IoError naming the path when it cannot be written.
int64_t write_synthetic_image_file(const GrayImage& image, SynthImageFormat format, uint64_t seed,
                                   const std::string& path,
                                   std::optional<DicomCompression> dicom_compression = {});

// Patient ids are written with 8 digits, as ChestX-ray14's.
inline constexpr int64_t kMaxSynthPatients = 99999999;

struct SynthOptions {
  std::string out_dir;
  DatasetKind dataset = DatasetKind::kNih;  // the layout written
  SynthImageFormat format = SynthImageFormat::kLayout;
  std::optional<DicomCompression> dicom_compression;  // kDicom only; unset: mixed by seed
  int64_t images = 1000;
  int64_t patients = 0;  // 0: images / 3 (at least 1)
  int image_size = 128;
  uint64_t seed = 0;
  int threads = 0;                                 // 0: all cores
  std::function<void(int64_t, int64_t)> progress;  // (written, total), from the calling thread

  // UsageError naming the field of the first value out of range; reads no file.
  void validate() const;
};

struct SynthResult {
  int64_t images = 0;
  int64_t patients = 0;
  std::vector<std::string> label_names;              // the data set's label set
  std::array<int64_t, kNumPathologies> positives{};  // per bit of label_names
  int64_t png_bytes = 0;
};

// UsageError for options that validate() refuses or an out_dir that already holds a data set.
SynthResult write_synthetic_dataset(const SynthOptions& options);

}  // namespace chexscale::data
