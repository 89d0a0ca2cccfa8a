// Crop, flip and normalise into float tensors (see transforms.h).
#include "data/transforms.h"

#include "common/error.h"
#include "data/random.h"

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

void write_normalized_crop(const uint8_t* gray, int width, int height, const CropParams& params,
                           int crop, float* dst) {
  CHX_CHECK(params.x >= 0 && params.y >= 0 && params.x + crop <= width && params.y + crop <= height,
            "crop {}+{} at ({}, {}) outside {}x{}", crop, crop, params.x, params.y, width, height);
  const NormalizeTable& table = normalize_table();
  const size_t plane = static_cast<size_t>(crop) * crop;
  for (int y = 0; y < crop; ++y) {
    const uint8_t* src = gray + static_cast<size_t>(params.y + y) * width + params.x;
    float* r = dst + static_cast<size_t>(y) * crop;
    float* g = r + plane;
    float* b = g + plane;
    for (int x = 0; x < crop; ++x) {
      const uint8_t v = params.flip ? src[crop - 1 - x] : src[x];
      r[x] = table.value[0][v];
      g[x] = table.value[1][v];
      b[x] = table.value[2][v];
    }
  }
}

void write_ten_crop(const uint8_t* gray, int width, int height, int crop, float* dst) {
  const int right = width - crop;
  const int bottom = height - crop;
  const CropParams five[5] = {{0, 0, false},
                              {right, 0, false},
                              {0, bottom, false},
                              {right, bottom, false},
                              {right / 2, bottom / 2, false}};
  const size_t one = static_cast<size_t>(3) * crop * crop;
  for (int i = 0; i < 10; ++i) {
    CropParams p = five[i % 5];
    p.flip = i >= 5;
    write_normalized_crop(gray, width, height, p, crop, dst + i * one);
  }
}

torch::Tensor ten_crop(const uint8_t* gray, int width, int height, int crop) {
  torch::Tensor out = torch::empty({10, 3, crop, crop}, torch::kFloat32);
  write_ten_crop(gray, width, height, crop, out.data_ptr<float>());
  return out;
}

}  // namespace chexscale::data
