// PowerSGD's three row sweeps (powersgd_kernels.h), written once over GCC vector types; each
// powersgd_kernels_<isa>.cpp includes this after defining CHX_SWEEP_BYTES (vector width),
// CHX_SWEEP_ROWS (rows per block) and CHX_SWEEP_TABLE / CHX_SWEEP_NAME (its kernel table).
// Everything here has internal linkage, so no function compiled for one instruction set can stand
// in for another's at link time.
//
// Each sweep reads (and writes) each row once, from memory, a block of rows at a time: the block
// shares the loads of Q from cache and its accumulators stay in registers, and the next block,
// which follows in memory, is prefetched in order while this one is computed. The approximation,
// which the last sweep only writes, goes past the cache. P = E Q and Q = E^T P multiply-add in one
// rounding where the instruction set has it; P Q^T (the approximation, and the residual formed from
// it) multiplies and adds apart on every path, so every path gives its bits.
#pragma once

#include <cstdint>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "distributed/powersgd_kernels.h"

namespace chexscale::distributed {
namespace {

template <typename T, int64_t N>
struct Lanes {
  typedef T type __attribute__((vector_size(N * sizeof(T))));
};
template <typename T>
constexpr int64_t kLanes = CHX_SWEEP_BYTES / sizeof(T);
template <typename T>
using Vec = typename Lanes<T, kLanes<T>>::type;
constexpr int kRowBlock = CHX_SWEEP_ROWS;     // rows of a block of P = M Q and of M' = P Q^T
constexpr int kBackRowBlock = 2 * kRowBlock;  // rows of a block of Q = M^T P
constexpr int64_t kGroup = 4;                 // factor columns a block computes at once

template <typename T>
inline Vec<T> load(const T* at) {
  Vec<T> v;
  __builtin_memcpy(&v, at, sizeof v);
  return v;
}

template <typename T>
inline void store(T* at, Vec<T> v) {
  __builtin_memcpy(at, &v, sizeof v);
}

// a * b + c, in one rounding where the instruction set has a fused multiply-add.
template <typename T>
inline Vec<T> multiply_add(Vec<T> a, Vec<T> b, Vec<T> c) {
#if defined(__FMA__) && CHX_SWEEP_BYTES == 32
  if constexpr (sizeof(T) == 4) {
    return reinterpret_cast<Vec<T>>(_mm256_fmadd_ps(
        reinterpret_cast<__m256>(a), reinterpret_cast<__m256>(b), reinterpret_cast<__m256>(c)));
  } else {
    return reinterpret_cast<Vec<T>>(_mm256_fmadd_pd(
        reinterpret_cast<__m256d>(a), reinterpret_cast<__m256d>(b), reinterpret_cast<__m256d>(c)));
  }
#else
  return a * b + c;
#endif
}

template <typename T>
inline Vec<T> multiply_add(T a, Vec<T> b, Vec<T> c) {
  return multiply_add<T>(Vec<T>{} + a, b, c);
}

// The sum of a vector's lanes, by halving it (a fixed order for each vector width).
template <typename T, int64_t N>
inline T lane_sum(typename Lanes<T, N>::type v) {
  if constexpr (N == 1) {
    return v[0];
  } else {
    typename Lanes<T, N / 2>::type low, high;
    __builtin_memcpy(&low, &v, sizeof low);
    __builtin_memcpy(&high, reinterpret_cast<const char*>(&v) + sizeof low, sizeof high);
    return lane_sum<T, N / 2>(low + high);
  }
}

// Prefetches the elements [at, at + count) into the cache: a sweep over a block of rows fetches
// the next block (contiguous with it) in order, a vector's worth for each vector of a row it
// reads. A prefetch never faults, so past the matrix's end it is harmless.
template <typename T>
inline void prefetch(const T* at, int64_t count) {
  for (int64_t x = 0; x < count; x += 64 / sizeof(T))
    __builtin_prefetch(at + x);
}

// Whether a vector may be streamed to `at` (stream() needs an address aligned to its size).
template <typename T>
inline bool aligned(const T* at) {
  return reinterpret_cast<uintptr_t>(at) % sizeof(Vec<T>) == 0;
}

// Stores a vector without reading its line into the cache first (the residual is read again only
// in the next step), where the instruction set has such a store.
template <typename T>
inline void stream(T* at, Vec<T> v) {
#if defined(__AVX__) && CHX_SWEEP_BYTES == 32
  if constexpr (sizeof(T) == 4) _mm256_stream_ps(at, reinterpret_cast<__m256>(v));
  if constexpr (sizeof(T) == 8) _mm256_stream_pd(at, reinterpret_cast<__m256d>(v));
#elif defined(__SSE2__) && CHX_SWEEP_BYTES == 16
  if constexpr (sizeof(T) == 4) _mm_stream_ps(at, reinterpret_cast<__m128>(v));
  if constexpr (sizeof(T) == 8) _mm_stream_pd(at, reinterpret_cast<__m128d>(v));
#else
  store(at, v);
#endif
}

// Orders the streamed stores before whatever reads them next.
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// Rows [i, i + B) of P Q^T, for P^T = p (rank, rows) and Q^T = q (rank, cols): each element sums
// P[i + b][k] Q^T[k][j] over k in order, products and sums rounded apart, so that every path
// gives the same bits. R: the rank, fixed (P's coefficients are then held in registers), or 0:
// `rank`, read at run time.
template <typename T, int B, int R>
class RowProduct {
 public:
  RowProduct(const T* p, const T* q, int64_t rows, int64_t cols, int64_t rank, int64_t i)
      : p_(p + i), q_(q), rows_(rows), cols_(cols), rank_(rank) {
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < R; ++k)
        held_[b][k] = p_[k * rows + b];
  }

  Vec<T> vector(int b, int64_t j) const {
    const int64_t rank = R > 0 ? R : rank_;
    Vec<T> a = coefficient(b, 0) * load(q_ + j);
    for (int64_t k = 1; k < rank; ++k)
      a = a + coefficient(b, k) * load(q_ + k * cols_ + j);
    return a;
  }

  T scalar(int b, int64_t j) const {
    const int64_t rank = R > 0 ? R : rank_;
    T a = coefficient(b, 0) * q_[j];
    for (int64_t k = 1; k < rank; ++k)
      a = a + coefficient(b, k) * q_[k * cols_ + j];
    return a;
  }

 private:
  T coefficient(int b, int64_t k) const { return R > 0 ? held_[b][k] : p_[k * rows_ + b]; }

  const T* p_;
  const T* q_;
  int64_t rows_, cols_, rank_;
  T held_[B][R > 0 ? R : 1] = {};
};

// Rows [i, i + B), factor columns [k, k + G): P^T[k + g][i + b] = E[i + b] . Q^T[k + g], E being
// the accumulated matrix. With Update (the first group's pass) E is formed first and stored:
// E = M + scale * residual, the residual read from `accumulated` as PowerSgdSweeps says, with A
// applied factors (0: m.rank, read at run time) or, for A < 0, none.
template <typename T, int B, int G, bool Update, int A>
void project_block(const SweepMatrix<T>& m, T scale, int64_t i, int64_t k) {
  const int64_t cols = m.cols;
  T* row = m.accumulated + i * cols;
  const T* gradient = m.gradient + i * cols;
  const T* q = m.q_rows + k * cols;
  const RowProduct<T, B, (A > 0 ? A : 0)> applied(m.applied_p, m.applied_q, m.rows, cols, m.rank,
                                                  i);
  const bool divided = m.scale != 1;
  const auto residual = [&](int b, int64_t j, auto stored) {
    decltype(stored) rest = stored;
    if constexpr (A >= 0) {
      if constexpr (sizeof(stored) == sizeof(T)) {
        rest = stored - applied.scalar(b, j);
      } else {
        rest = stored - applied.vector(b, j);
      }
    }
    return divided ? rest / m.scale : rest;
  };
  Vec<T> acc[B][G] = {};
  int64_t j = 0;
  for (; j + kLanes<T> <= cols; j += kLanes<T>) {
    if (Update) {
      prefetch(row + B * cols + j * B, B * kLanes<T>);
      prefetch(gradient + B * cols + j * B, B * kLanes<T>);
    }
    Vec<T> qv[G];
    for (int g = 0; g < G; ++g)
      qv[g] = load(q + g * cols + j);
    for (int b = 0; b < B; ++b) {
      Vec<T> x = load(row + b * cols + j);
      if (Update) {
        x = multiply_add<T>(scale, residual(b, j, x), load(gradient + b * cols + j));
        store(row + b * cols + j, x);
      }
      for (int g = 0; g < G; ++g)
        acc[b][g] = multiply_add<T>(x, qv[g], acc[b][g]);
    }
  }
  T sum[B][G];
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < G; ++g)
      sum[b][g] = lane_sum<T, kLanes<T>>(acc[b][g]);
  for (; j < cols; ++j) {
    for (int b = 0; b < B; ++b) {
      T x = row[b * cols + j];
      if (Update) {
        x = gradient[b * cols + j] + scale * residual(b, j, x);
        row[b * cols + j] = x;
      }
      for (int g = 0; g < G; ++g)
        sum[b][g] += x * q[g * cols + j];
    }
  }
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < G; ++g)
      m.p_rows[(k + g) * m.rows + i + b] = sum[b][g];
}

template <typename T, int B, int G>
void project_group(const SweepMatrix<T>& m, T scale, int64_t i, int64_t k) {
  if (k > 0) {
    project_block<T, B, G, false, -1>(m, scale, i, k);
  } else if (!m.applied) {
    project_block<T, B, G, true, -1>(m, scale, i, k);
  } else if (m.rank == G) {
    project_block<T, B, G, true, G>(m, scale, i, k);
  } else {
    project_block<T, B, G, true, 0>(m, scale, i, k);
  }
}

template <typename T, int B>
void project_rows(const SweepMatrix<T>& m, T scale, int64_t i) {
  for (int64_t k = 0; k < m.rank; k += kGroup) {
    const int64_t group = m.rank - k < kGroup ? m.rank - k : kGroup;
    if (group == 4) project_group<T, B, 4>(m, scale, i, k);
    if (group == 3) project_group<T, B, 3>(m, scale, i, k);
    if (group == 2) project_group<T, B, 2>(m, scale, i, k);
    if (group == 1) project_group<T, B, 1>(m, scale, i, k);
  }
}

template <typename T>
void project(const SweepMatrix<T>& m, T scale, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + kRowBlock <= end; i += kRowBlock)
    project_rows<T, kRowBlock>(m, scale, i);
  for (; i < end; ++i)
    project_rows<T, 1>(m, scale, i);
}

// Rows [i, i + B) into columns [begin, end) of Q^T's rows [k, k + G): each element adds
// P[i + b][k + g] * M[i + b][j] row after row, so its sum runs over the rows in order.
template <typename T, int B, int G>
void project_back_block(const SweepMatrix<T>& m, T* q_out, int64_t i, int64_t k, int64_t begin,
                        int64_t end) {
  const int64_t cols = m.cols;
  const T* row = m.accumulated + i * cols;
  T* q = q_out + k * cols;
  T p[B][G];
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < G; ++g)
      p[b][g] = m.p_rows[(k + g) * m.rows + i + b];
  const bool whole_rows = k == 0 && begin == 0 && end == cols;  // then prefetch the next block
  int64_t j = begin;
  for (; j + kLanes<T> <= end; j += kLanes<T>) {
    if (whole_rows) prefetch(row + B * cols + j * B, B * kLanes<T>);
    Vec<T> x[B];
    for (int b = 0; b < B; ++b)
      x[b] = load(row + b * cols + j);
    for (int g = 0; g < G; ++g) {
      Vec<T> acc = load(q + g * cols + j);
      for (int b = 0; b < B; ++b)
        acc = multiply_add<T>(p[b][g], x[b], acc);
      store(q + g * cols + j, acc);
    }
  }
  for (; j < end; ++j) {
    for (int g = 0; g < G; ++g) {
      T acc = q[g * cols + j];
      for (int b = 0; b < B; ++b)
        acc = acc + p[b][g] * row[b * cols + j];
      q[g * cols + j] = acc;
    }
  }
}

template <typename T, int B>
void project_back_rows(const SweepMatrix<T>& m, T* q_out, int64_t i, int64_t begin, int64_t end) {
  for (int64_t k = 0; k < m.rank; k += kGroup) {
    const int64_t group = m.rank - k < kGroup ? m.rank - k : kGroup;
    if (group == 4) project_back_block<T, B, 4>(m, q_out, i, k, begin, end);
    if (group == 3) project_back_block<T, B, 3>(m, q_out, i, k, begin, end);
    if (group == 2) project_back_block<T, B, 2>(m, q_out, i, k, begin, end);
    if (group == 1) project_back_block<T, B, 1>(m, q_out, i, k, begin, end);
  }
}

template <typename T>
void project_back(const SweepMatrix<T>& m, T* q_out, int64_t begin, int64_t end) {
  for (int64_t k = 0; k < m.rank; ++k)
    for (int64_t j = begin; j < end; ++j)
      q_out[k * m.cols + j] = 0;
  int64_t i = 0;
  for (; i + kBackRowBlock <= m.rows; i += kBackRowBlock)
    project_back_rows<T, kBackRowBlock>(m, q_out, i, begin, end);
  for (; i < m.rows; ++i)
    project_back_rows<T, 1>(m, q_out, i, begin, end);
}

// Rows [i, i + B): M = P Q^T of the applied factors (RowProduct's sums; R of them, 0: m.rank).
// With Stream the rows go past the cache, and must be aligned alike (a whole number of vectors per
// row; else the partly written lines at the rows' ends cost more than streaming saves).
template <typename T, int B, int R, bool Stream>
void approximate_block(const SweepMatrix<T>& m, int64_t i) {
  const int64_t cols = m.cols;
  T* row = m.gradient + i * cols;
  const RowProduct<T, B, R> product(m.applied_p, m.applied_q, m.rows, cols, m.rank, i);
  int64_t lead = 0;
  while (Stream && lead < cols && !aligned(row + lead))
    ++lead;
  for (int b = 0; b < B; ++b)
    for (int64_t j = 0; j < lead; ++j)
      row[b * cols + j] = product.scalar(b, j);
  int64_t j = lead;
  for (; j + kLanes<T> <= cols; j += kLanes<T>) {
    for (int b = 0; b < B; ++b) {
      if (Stream) {
        stream(row + b * cols + j, product.vector(b, j));
      } else {
        store(row + b * cols + j, product.vector(b, j));
      }
    }
  }
  for (int b = 0; b < B; ++b)
    for (int64_t k = j; k < cols; ++k)
      row[b * cols + k] = product.scalar(b, k);
}

template <typename T, int B, bool Stream>
void approximate_rows(const SweepMatrix<T>& m, int64_t i) {
  if (m.rank == 1) approximate_block<T, B, 1, Stream>(m, i);
  if (m.rank == 2) approximate_block<T, B, 2, Stream>(m, i);
  if (m.rank == 3) approximate_block<T, B, 3, Stream>(m, i);
  if (m.rank == 4) approximate_block<T, B, 4, Stream>(m, i);
  if (m.rank > 4) approximate_block<T, B, 0, Stream>(m, i);
}

template <typename T>
void approximate(const SweepMatrix<T>& m, int64_t begin, int64_t end) {
  int64_t i = begin;
  if (m.cols % kLanes<T> == 0) {  // every row starts at the same offset from a vector boundary
    for (; i + kRowBlock <= end; i += kRowBlock)
      approximate_rows<T, kRowBlock, true>(m, i);
    for (; i < end; ++i)
      approximate_rows<T, 1, true>(m, i);
    stream_fence();
  }
  for (; i < end; ++i)
    approximate_rows<T, 1, false>(m, i);
}

template <typename T>
constexpr PowerSgdSweeps<T> sweeps() {
  return {&project<T>, &project_back<T>, &approximate<T>};
}

}  // namespace

const PowerSgdKernels& CHX_SWEEP_TABLE() {
  static constexpr PowerSgdKernels kKernels{CHX_SWEEP_NAME, CHX_SWEEP_BYTES, sweeps<float>(),
                                            sweeps<double>()};
  return kKernels;
}

}  // namespace chexscale::distributed
