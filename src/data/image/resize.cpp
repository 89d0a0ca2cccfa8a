// Area / bilinear resampling with precomputed taps (see resize.h).
#include "data/image/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/error.h"

namespace chexscale::data {
namespace {

// For each output index: the first input index and `count` weights summing to 1.
struct AxisTaps {
  int count = 0;  // taps per output (max over outputs; unused ones have weight 0)
  std::vector<int> start;
  std::vector<float> weights;  // out_size * count
};

AxisTaps make_taps(int in_size, int out_size) {
  AxisTaps taps;
  const double scale = static_cast<double>(in_size) / out_size;
  taps.start.resize(out_size);
  if (scale >= 1.0) {  // area: overlap of [j*s, (j+1)*s) with each input pixel
    taps.count = static_cast<int>(std::ceil(scale)) + 1;
    taps.weights.assign(static_cast<size_t>(out_size) * taps.count, 0.f);
    for (int j = 0; j < out_size; ++j) {
      const double lo = j * scale;
      const double hi = std::min<double>((j + 1) * scale, in_size);
      const int first = static_cast<int>(std::floor(lo));
      for (int k = 0; k < taps.count; ++k) {
        const int i = first + k;
        if (i >= in_size) break;
        const double overlap = std::min<double>(i + 1, hi) - std::max<double>(i, lo);
        if (overlap > 0)
          taps.weights[static_cast<size_t>(j) * taps.count + k] =
              static_cast<float>(overlap / scale);
      }
      taps.start[j] = first;
    }
  } else {  // bilinear, half-pixel centres, edges clamped
    taps.count = 2;
    taps.weights.assign(static_cast<size_t>(out_size) * 2, 0.f);
    for (int j = 0; j < out_size; ++j) {
      const double x = std::clamp((j + 0.5) * scale - 0.5, 0.0, in_size - 1.0);
      const int i0 = std::min(static_cast<int>(x), std::max(0, in_size - 2));
      const double f = x - i0;
      taps.start[j] = i0;
      taps.weights[static_cast<size_t>(j) * 2] = static_cast<float>(1 - f);
      if (in_size > 1) taps.weights[static_cast<size_t>(j) * 2 + 1] = static_cast<float>(f);
    }
  }
  return taps;
}

// Shrinking by the same integer factor k on both axes (1024 -> 256): exact k x k block means in
// integers, rows summed into a line first (uint16 for 8-bit samples: k * k * 255 < 65536 for
// k <= 16; uint32 for 16-bit ones).
template <typename T>
void shrink_by_integer_factor(const T* src, int src_width, T* dst, int dst_width, int dst_height,
                              int k) {
  using Sum = std::conditional_t<sizeof(T) == 1, uint16_t, uint32_t>;
  std::vector<Sum> sums(static_cast<size_t>(src_width));
  const uint32_t area = static_cast<uint32_t>(k * k);
  for (int y = 0; y < dst_height; ++y) {
    const T* in = src + static_cast<size_t>(y) * k * src_width;
    for (int x = 0; x < src_width; ++x)
      sums[x] = in[x];
    for (int r = 1; r < k; ++r) {
      in += src_width;
      for (int x = 0; x < src_width; ++x)
        sums[x] = static_cast<Sum>(sums[x] + in[x]);
    }
    T* out = dst + static_cast<size_t>(y) * dst_width;
    for (int x = 0; x < dst_width; ++x) {
      uint32_t block = 0;
      for (int c = 0; c < k; ++c)
        block += sums[static_cast<size_t>(x) * k + c];
      out[x] = static_cast<T>((block + area / 2) / area);
    }
  }
}

template <typename T>
void resize_samples(const T* src, int src_width, int src_height, T* dst, int dst_width,
                    int dst_height) {
  constexpr float kMax = sizeof(T) == 1 ? 255.f : 65535.f;
  CHX_CHECK(src_width > 0 && src_height > 0 && dst_width > 0 && dst_height > 0,
            "bad resize {}x{} -> {}x{}", src_width, src_height, dst_width, dst_height);
  const int k = src_width / dst_width;
  if (k >= 2 && k <= 16 && src_width == k * dst_width && src_height == k * dst_height) {
    shrink_by_integer_factor(src, src_width, dst, dst_width, dst_height, k);
    return;
  }
  const AxisTaps ht = make_taps(src_width, dst_width);
  const AxisTaps vt = make_taps(src_height, dst_height);
  std::vector<float> row(static_cast<size_t>(src_width));
  for (int y = 0; y < dst_height; ++y) {
    // Vertical: weighted sum of the input rows this output row covers.
    std::fill(row.begin(), row.end(), 0.f);
    for (int k = 0; k < vt.count; ++k) {
      const float w = vt.weights[static_cast<size_t>(y) * vt.count + k];
      const int sy = vt.start[y] + k;
      if (w == 0.f || sy >= src_height) continue;
      const T* in = src + static_cast<size_t>(sy) * src_width;
      for (int x = 0; x < src_width; ++x)
        row[x] += w * static_cast<float>(in[x]);
    }
    // Horizontal: weighted sum along the row.
    T* out = dst + static_cast<size_t>(y) * dst_width;
    for (int x = 0; x < dst_width; ++x) {
      const float* w = &ht.weights[static_cast<size_t>(x) * ht.count];
      const int sx = ht.start[x];
      const int n = std::min(ht.count, src_width - sx);
      float acc = 0.f;
      for (int k = 0; k < n; ++k)
        acc += w[k] * row[sx + k];
      out[x] = static_cast<T>(std::clamp(acc + 0.5f, 0.f, kMax));
    }
  }
}

}  // namespace

void resize_gray(const uint8_t* src, int src_width, int src_height, uint8_t* dst, int dst_width,
                 int dst_height) {
  resize_samples(src, src_width, src_height, dst, dst_width, dst_height);
}

void resize_gray(const uint16_t* src, int src_width, int src_height, uint16_t* dst, int dst_width,
                 int dst_height) {
  resize_samples(src, src_width, src_height, dst, dst_width, dst_height);
}

void resize_gray(const GrayImage& in, int width, int height, GrayImage& out) {
  out.width = width;
  out.height = height;
  out.bit_depth = in.bit_depth;
  const size_t n = static_cast<size_t>(width) * height;
  const bool same = width == in.width && height == in.height;
  if (in.wide()) {
    out.pixels.clear();
    out.pixels16.resize(n);
    if (same) {
      std::copy(in.pixels16.begin(), in.pixels16.end(), out.pixels16.begin());
    } else {
      resize_gray(in.pixels16.data(), in.width, in.height, out.pixels16.data(), width, height);
    }
    return;
  }
  out.pixels16.clear();
  out.pixels.resize(n);
  if (same) {
    std::memcpy(out.pixels.data(), in.pixels.data(), n);
  } else {
    resize_gray(in.pixels.data(), in.width, in.height, out.pixels.data(), width, height);
  }
}

}  // namespace chexscale::data
