// PowerSGD's fused passes (see powersgd_passes.h): each walks M once, row by row, using GCC vector
// types of 64 bytes (16 floats, 8 doubles) along a row and scalars for the row's tail. Vector
// operations are elementwise, so the results do not depend on how the compiler splits them; the
// entry points are compiled for x86-64-v3 (AVX2) and for the baseline, and the loader picks one.
#include "distributed/powersgd_passes.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CHX_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CHX_SIMD_CLONES
#endif
#define CHX_INLINE inline __attribute__((always_inline))

// The vector types never cross a call (everything below is inlined), so the ABI note is moot.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace chexscale::distributed {
namespace {

constexpr int kRankBlock = 4;  // ranks one pass over a row of M computes at once
// Rows of M each pass reads at once, so that each load of a Q entry serves that many rows.
constexpr int kProjectRows = 2;      // feedback_and_project()
constexpr int kProjectBackRows = 8;  // project_back()
constexpr int kApproximateRows = 4;  // approximate()

template <typename T>
struct Simd {
  typedef T Vec __attribute__((vector_size(32)));
  static constexpr int64_t kLanes = 32 / sizeof(T);
};

template <typename T>
CHX_INLINE typename Simd<T>::Vec load(const T* at) {
  typename Simd<T>::Vec v;
  std::memcpy(&v, at, sizeof v);
  return v;
}

template <typename T>
CHX_INLINE void store(T* at, const typename Simd<T>::Vec& v) {
  std::memcpy(at, &v, sizeof v);
}

template <typename T>
CHX_INLINE T lane_sum(const typename Simd<T>::Vec& v) {
  T sum = v[0];
  for (int64_t l = 1; l < Simd<T>::kLanes; ++l)
    sum += v[l];
  return sum;
}

// row[j] += scale * residual[j].
template <typename T>
CHX_INLINE void add_scaled(T* row, const T* residual, T scale, int64_t cols) {
  int64_t j = 0;
  for (; j + Simd<T>::kLanes <= cols; j += Simd<T>::kLanes)
    store(row + j, load(row + j) + load(residual + j) * scale);
  for (; j < cols; ++j)
    row[j] += residual[j] * scale;
}

// out[b][k] = row b . qt[k] for the kRows rows at m and the kRanks rows of qt: each load of qt
// serves kRows rows.
template <typename T, int kRows, int kRanks>
CHX_INLINE void dots(const T* m, const T* qt, MatrixShape s, T* out) {
  typename Simd<T>::Vec acc[kRows][kRanks] = {};
  int64_t j = 0;
  for (; j + Simd<T>::kLanes <= s.cols; j += Simd<T>::kLanes) {
#pragma GCC unroll 8
    for (int k = 0; k < kRanks; ++k) {
      const typename Simd<T>::Vec q = load(qt + k * s.cols + j);
#pragma GCC unroll 8
      for (int b = 0; b < kRows; ++b)
        acc[b][k] += load(m + b * s.cols + j) * q;
    }
  }
  for (int b = 0; b < kRows; ++b) {
    for (int k = 0; k < kRanks; ++k) {
      T sum = lane_sum<T>(acc[b][k]);
      for (int64_t t = j; t < s.cols; ++t)
        sum += m[b * s.cols + t] * qt[k * s.cols + t];
      out[b * s.rank + k] = sum;
    }
  }
}

// P's entries for the kRows rows at m, kRankBlock ranks at a time.
template <typename T, int kRows>
CHX_INLINE void project_rows(const T* m, const T* qt, MatrixShape s, T* p) {
  for (int64_t k = 0; k < s.rank; k += kRankBlock) {
    const T* q = qt + k * s.cols;
    switch (std::min<int64_t>(kRankBlock, s.rank - k)) {
      case 1:
        dots<T, kRows, 1>(m, q, s, p + k);
        break;
      case 2:
        dots<T, kRows, 2>(m, q, s, p + k);
        break;
      case 3:
        dots<T, kRows, 3>(m, q, s, p + k);
        break;
      default:
        dots<T, kRows, 4>(m, q, s, p + k);
        break;
    }
  }
}

template <typename T>
CHX_INLINE void feedback_and_project_impl(T* m, const T* residual, T scale, const T* qt, T* p,
                                          MatrixShape s) {
  int64_t i = 0;
  for (; i + kProjectRows <= s.rows; i += kProjectRows) {
    for (int b = 0; b < kProjectRows; ++b)
      add_scaled(m + (i + b) * s.cols, residual + (i + b) * s.cols, scale, s.cols);
    project_rows<T, kProjectRows>(m + i * s.cols, qt, s, p + i * s.rank);
  }
  for (; i < s.rows; ++i) {
    add_scaled(m + i * s.cols, residual + i * s.cols, scale, s.cols);
    project_rows<T, 1>(m + i * s.cols, qt, s, p + i * s.rank);
  }
}

// qt[k][j] += sum over the kRows rows b at m of m[b][j] p[b][k], adding row after row.
template <typename T, int kRows>
CHX_INLINE void accumulate_rows(const T* m, const T* p, T* qt, MatrixShape s) {
  int64_t j = 0;
  for (; j + Simd<T>::kLanes <= s.cols; j += Simd<T>::kLanes) {
    typename Simd<T>::Vec x[kRows];
#pragma GCC unroll 8
    for (int b = 0; b < kRows; ++b)
      x[b] = load(m + b * s.cols + j);
    for (int64_t k = 0; k < s.rank; ++k) {
      typename Simd<T>::Vec sum = load(qt + k * s.cols + j);
#pragma GCC unroll 8
      for (int b = 0; b < kRows; ++b)
        sum += x[b] * p[b * s.rank + k];
      store(qt + k * s.cols + j, sum);
    }
  }
  for (; j < s.cols; ++j) {
    for (int64_t k = 0; k < s.rank; ++k) {
      T sum = qt[k * s.cols + j];
      for (int b = 0; b < kRows; ++b)
        sum += m[b * s.cols + j] * p[b * s.rank + k];
      qt[k * s.cols + j] = sum;
    }
  }
}

template <typename T>
CHX_INLINE void project_back_impl(const T* m, const T* p, T* qt, MatrixShape s) {
  std::fill(qt, qt + s.rank * s.cols, T(0));
  int64_t i = 0;
  for (; i + kProjectBackRows <= s.rows; i += kProjectBackRows)
    accumulate_rows<T, kProjectBackRows>(m + i * s.cols, p + i * s.rank, qt, s);
  for (; i < s.rows; ++i)
    accumulate_rows<T, 1>(m + i * s.cols, p + i * s.rank, qt, s);
}

// The kRows rows at m: a = p q^T (ranks added in order); residual = (m - a) [/ scale]; m = a.
// Each load of qt serves kRows rows.
template <typename T, int kRows, bool kScaled>
CHX_INLINE void approximate_rows(T* m, T* residual, T scale, const T* p, const T* qt,
                                 MatrixShape s) {
  int64_t j = 0;
  for (; j + Simd<T>::kLanes <= s.cols; j += Simd<T>::kLanes) {
    typename Simd<T>::Vec a[kRows];
    const typename Simd<T>::Vec q0 = load(qt + j);
#pragma GCC unroll 8
    for (int b = 0; b < kRows; ++b)
      a[b] = q0 * p[b * s.rank];
    for (int64_t k = 1; k < s.rank; ++k) {
      const typename Simd<T>::Vec q = load(qt + k * s.cols + j);
#pragma GCC unroll 8
      for (int b = 0; b < kRows; ++b)
        a[b] += q * p[b * s.rank + k];
    }
#pragma GCC unroll 8
    for (int b = 0; b < kRows; ++b) {
      typename Simd<T>::Vec r = load(m + b * s.cols + j) - a[b];
      if (kScaled) r /= scale;
      store(residual + b * s.cols + j, r);
      store(m + b * s.cols + j, a[b]);
    }
  }
  for (; j < s.cols; ++j) {
    for (int b = 0; b < kRows; ++b) {
      T a = qt[j] * p[b * s.rank];
      for (int64_t k = 1; k < s.rank; ++k)
        a += qt[k * s.cols + j] * p[b * s.rank + k];
      T* at = m + b * s.cols + j;
      residual[b * s.cols + j] = kScaled ? (*at - a) / scale : *at - a;
      *at = a;
    }
  }
}

template <typename T, bool kScaled>
CHX_INLINE void approximate_all(T* m, T* residual, T scale, const T* p, const T* qt,
                                MatrixShape s) {
  int64_t i = 0;
  for (; i + kApproximateRows <= s.rows; i += kApproximateRows) {
    approximate_rows<T, kApproximateRows, kScaled>(m + i * s.cols, residual + i * s.cols, scale,
                                                   p + i * s.rank, qt, s);
  }
  for (; i < s.rows; ++i)
    approximate_rows<T, 1, kScaled>(m + i * s.cols, residual + i * s.cols, scale, p + i * s.rank,
                                    qt, s);
}

template <typename T>
CHX_INLINE void approximate_impl(T* m, T* residual, T scale, const T* p, const T* qt,
                                 MatrixShape s) {
  if (scale == T(1)) {
    approximate_all<T, false>(m, residual, scale, p, qt, s);
  } else {
    approximate_all<T, true>(m, residual, scale, p, qt, s);
  }
}

template <typename T>
void orthogonalize_impl(T* x, int64_t rows, int64_t cols) {
  constexpr double kEpsilon = 1e-8;  // DDP's: a zero column stays zero
  for (int64_t c = 0; c < cols; ++c) {
    double squares = 0;
    for (int64_t n = 0; n < rows; ++n)
      squares += static_cast<double>(x[n * cols + c]) * x[n * cols + c];
    const T divisor = static_cast<T>(std::sqrt(squares)) + static_cast<T>(kEpsilon);
    for (int64_t n = 0; n < rows; ++n)
      x[n * cols + c] /= divisor;
    for (int64_t d = c + 1; d < cols; ++d) {
      double dot = 0;
      for (int64_t n = 0; n < rows; ++n)
        dot += static_cast<double>(x[n * cols + c]) * x[n * cols + d];
      const T along = static_cast<T>(dot);
      for (int64_t n = 0; n < rows; ++n)
        x[n * cols + d] -= along * x[n * cols + c];
    }
  }
}

template <typename T>
void transpose_impl(const T* in, T* out, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[j * rows + i] = in[i * cols + j];
}

}  // namespace

CHX_SIMD_CLONES void feedback_and_project(float* m, const float* residual, float scale,
                                          const float* qt, float* p, MatrixShape shape) {
  feedback_and_project_impl(m, residual, scale, qt, p, shape);
}
CHX_SIMD_CLONES void feedback_and_project(double* m, const double* residual, double scale,
                                          const double* qt, double* p, MatrixShape shape) {
  feedback_and_project_impl(m, residual, scale, qt, p, shape);
}
CHX_SIMD_CLONES void project_back(const float* m, const float* p, float* qt, MatrixShape shape) {
  project_back_impl(m, p, qt, shape);
}
CHX_SIMD_CLONES void project_back(const double* m, const double* p, double* qt, MatrixShape shape) {
  project_back_impl(m, p, qt, shape);
}
CHX_SIMD_CLONES void approximate(float* m, float* residual, float scale, const float* p,
                                 const float* qt, MatrixShape shape) {
  approximate_impl(m, residual, scale, p, qt, shape);
}
CHX_SIMD_CLONES void approximate(double* m, double* residual, double scale, const double* p,
                                 const double* qt, MatrixShape shape) {
  approximate_impl(m, residual, scale, p, qt, shape);
}
void orthogonalize(float* x, int64_t rows, int64_t cols) {
  orthogonalize_impl(x, rows, cols);
}
void orthogonalize(double* x, int64_t rows, int64_t cols) {
  orthogonalize_impl(x, rows, cols);
}
void transpose(const float* in, float* out, int64_t rows, int64_t cols) {
  transpose_impl(in, out, rows, cols);
}
void transpose(const double* in, double* out, int64_t rows, int64_t cols) {
  transpose_impl(in, out, rows, cols);
}

}  // namespace chexscale::distributed
