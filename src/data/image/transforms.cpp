// Crop, flip and normalise into float tensors (see transforms.h).
#include "data/image/transforms.h"

#include "common/error.h"
#include "common/random.h"

namespace chexscale::data {
namespace {

// (v / 255 - mean[c]) / std[c] for every byte value and channel.
struct NormalizeTable {
  std::array<std::array<float, 256>, 3> value{};
  NormalizeTable() {
    for (int c = 0; c < 3; ++c) {
      for (int v = 0; v < 256; ++v) {
        value[c][v] = (static_cast<float>(v) / 255.f - kImageNetMean[c]) / kImageNetStd[c];
      }
    }
  }
};

const NormalizeTable& normalize_table() {
  static const NormalizeTable table;
  return table;
}

}  // namespace

CropParams choose_crop(int width, int height, int crop, bool augment, uint64_t seed, int64_t epoch,
                       int64_t index) {
  CHX_CHECK(crop <= width && crop <= height, "crop {} larger than image {}x{}", crop, width,
            height);
  if (!augment) return {(width - crop) / 2, (height - crop) / 2, false};
  SplitMix64 rng(mix_seed({seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index)}));
  CropParams p;
  p.x = static_cast<int>(rng.below(static_cast<uint64_t>(width - crop + 1)));
  p.y = static_cast<int>(rng.below(static_cast<uint64_t>(height - crop + 1)));
  p.flip = (rng.next() & 1U) != 0;
  return p;
}

namespace {

// One crop of 8-bit storage at bit depth 8: through the table.
void crop_8bit(const GrayView& g, const CropParams& params, int crop, float* dst) {
  const NormalizeTable& table = normalize_table();
  const size_t plane = static_cast<size_t>(crop) * crop;
  for (int y = 0; y < crop; ++y) {
    const uint8_t* src = g.pixels + static_cast<size_t>(params.y + y) * g.width + params.x;
    float* r = dst + static_cast<size_t>(y) * crop;
    float* gr = r + plane;
    float* b = gr + plane;
    for (int x = 0; x < crop; ++x) {
      const uint8_t v = params.flip ? src[crop - 1 - x] : src[x];
      r[x] = table.value[0][v];
      gr[x] = table.value[1][v];
      b[x] = table.value[2][v];
    }
  }
}

// One crop of 16-bit storage: v * scale[c] + offset[c], scale = 1 / (maxval * std[c]).
void crop_16bit(const GrayView& g, const CropParams& params, int crop, float* dst) {
  const auto maxval = static_cast<float>(max_sample(g.bit_depth));
  std::array<float, 3> scale{};
  std::array<float, 3> offset{};
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.f / (maxval * kImageNetStd[c]);
    offset[c] = -kImageNetMean[c] / kImageNetStd[c];
  }
  const size_t plane = static_cast<size_t>(crop) * crop;
  for (int y = 0; y < crop; ++y) {
    const uint16_t* src = g.pixels16 + static_cast<size_t>(params.y + y) * g.width + params.x;
    float* r = dst + static_cast<size_t>(y) * crop;
    float* gr = r + plane;
    float* b = gr + plane;
    for (int x = 0; x < crop; ++x) {
      const auto v = static_cast<float>(params.flip ? src[crop - 1 - x] : src[x]);
      r[x] = v * scale[0] + offset[0];
      gr[x] = v * scale[1] + offset[1];
      b[x] = v * scale[2] + offset[2];
    }
  }
}

}  // namespace

void write_normalized_crop(const GrayView& gray, const CropParams& params, int crop, float* dst) {
  CHX_CHECK(params.x >= 0 && params.y >= 0 && params.x + crop <= gray.width &&
                params.y + crop <= gray.height,
            "crop {}+{} at ({}, {}) outside {}x{}", crop, crop, params.x, params.y, gray.width,
            gray.height);
  CHX_CHECK(gray.bit_depth >= 8 && gray.bit_depth <= 16, "bit depth {}", gray.bit_depth);
  if (gray.pixels16 != nullptr) {
    crop_16bit(gray, params, crop, dst);
  } else {
    CHX_CHECK(gray.bit_depth == 8, "{}-bit samples in 8-bit storage", gray.bit_depth);
    crop_8bit(gray, params, crop, dst);
  }
}

void write_ten_crop(const GrayView& gray, int crop, float* dst) {
  const int right = gray.width - crop;
  const int bottom = gray.height - crop;
  const CropParams five[5] = {{0, 0, false},
                              {right, 0, false},
                              {0, bottom, false},
                              {right, bottom, false},
                              {right / 2, bottom / 2, false}};
  const size_t one = static_cast<size_t>(3) * crop * crop;
  for (int i = 0; i < 10; ++i) {
    CropParams p = five[i % 5];
    p.flip = i >= 5;
    write_normalized_crop(gray, p, crop, dst + i * one);
  }
}

torch::Tensor ten_crop(const GrayView& gray, int crop) {
  torch::Tensor out = torch::empty({10, 3, crop, crop}, torch::kFloat32);
  write_ten_crop(gray, crop, out.data_ptr<float>());
  return out;
}

}  // namespace chexscale::data
