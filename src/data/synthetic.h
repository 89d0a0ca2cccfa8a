// Synthetic ChestX-ray14 data with learnable labels (`chexscale synth`): X-ray-like images (body,
// lungs, spine, ribs, noise) on which each pathology present draws its own trace -- a distinct
// shape or texture -- inside its own fixed square region (synthetic_region). Written in the exact
// ChestX-ray14 layout: images/*.png, Data_Entry_2017.csv (trailing commas), train_val_list.txt,
// test_list.txt, several images per patient.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "data/batch.h"
#include "data/labels.h"
#include "data/png_io.h"

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

// Patient ids are written with 8 digits, as ChestX-ray14's.
inline constexpr int64_t kMaxSynthPatients = 99999999;

struct SynthOptions {
  std::string out_dir;
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
  std::array<int64_t, kNumPathologies> positives{};
  int64_t png_bytes = 0;
};

// UsageError for options that validate() refuses or an out_dir that already holds a data set.
SynthResult write_synthetic_dataset(const SynthOptions& options);

}  // namespace chexscale::data
