// The choice of PowerSGD's sweeps for this CPU, and the orthogonalisation (powersgd_kernels.h).
#include "distributed/powersgd_kernels.h"

#include <cmath>

#include "common/cpu_vector_sets.h"

namespace chexscale::distributed {
namespace {

typedef double Pair __attribute__((vector_size(16)));  // two lanes of double: SSE2, NEON

template <typename T>
inline Pair pair_product(const T* a, const T* b) {
  const Pair left = {static_cast<double>(a[0]), static_cast<double>(a[1])};
  const Pair right = {static_cast<double>(b[0]), static_cast<double>(b[1])};
  return left * right;
}

// a . b summed in double, in eight partial sums added in a fixed order.
template <typename T>
double dot(const T* a, const T* b, int64_t n) {
  Pair s0 = {}, s1 = {}, s2 = {}, s3 = {};
  int64_t x = 0;
  for (; x + 8 <= n; x += 8) {
    s0 += pair_product(a + x, b + x);
    s1 += pair_product(a + x + 2, b + x + 2);
    s2 += pair_product(a + x + 4, b + x + 4);
    s3 += pair_product(a + x + 6, b + x + 6);
  }
  const Pair total = (s0 + s1) + (s2 + s3);
  double sum = total[0] + total[1];
  for (; x < n; ++x)
    sum += static_cast<double>(a[x]) * b[x];
  return sum;
}

template <typename T>
struct Quad {  // 16 bytes of T
  typedef T type __attribute__((vector_size(16)));
};

// v /= divisor and w -= along * v, element by element (16 bytes at a time; exact either way).
template <typename T>
void divide(T* v, T divisor, int64_t n) {
  using V = typename Quad<T>::type;
  constexpr int64_t kStep = 16 / sizeof(T);
  int64_t x = 0;
  for (; x + kStep <= n; x += kStep) {
    V a;
    __builtin_memcpy(&a, v + x, sizeof a);
    a = a / divisor;
    __builtin_memcpy(v + x, &a, sizeof a);
  }
  for (; x < n; ++x)
    v[x] = v[x] / divisor;
}

template <typename T>
void subtract_multiple(T* w, T along, const T* v, int64_t n) {
  using V = typename Quad<T>::type;
  constexpr int64_t kStep = 16 / sizeof(T);
  int64_t x = 0;
  for (; x + kStep <= n; x += kStep) {
    V a, b;
    __builtin_memcpy(&a, w + x, sizeof a);
    __builtin_memcpy(&b, v + x, sizeof b);
    a = a - along * b;
    __builtin_memcpy(w + x, &a, sizeof a);
  }
  for (; x < n; ++x)
    w[x] = w[x] - along * v[x];
}

// Modified Gram-Schmidt: each vector in turn is normalised, then taken out of every later one.
template <typename T>
void orthonormalize(T* rows, int64_t count, int64_t length) {
  constexpr T kEpsilon = static_cast<T>(1e-8);  // DDP's: a zero vector stays zero
  for (int64_t i = 0; i < count; ++i) {
    T* v = rows + i * length;
    divide(v, static_cast<T>(std::sqrt(dot(v, v, length))) + kEpsilon, length);
    for (int64_t j = i + 1; j < count; ++j) {
      T* w = rows + j * length;
      subtract_multiple(w, static_cast<T>(dot(v, w, length)), v, length);
    }
  }
}

}  // namespace

void orthonormalize_rows(float* rows, int64_t count, int64_t length) {
  orthonormalize(rows, count, length);
}

void orthonormalize_rows(double* rows, int64_t count, int64_t length) {
  orthonormalize(rows, count, length);
}

std::vector<const PowerSgdKernels*> runnable_powersgd_kernels() {
  std::vector<const PowerSgdKernels*> kernels;
#if defined(__x86_64__)
  if (const CpuVectorSets cpu = cpu_vector_sets(); cpu.avx2 && cpu.fma) {
    kernels.push_back(&avx2_powersgd_kernels());
  }
#endif
  kernels.push_back(&baseline_powersgd_kernels());
  return kernels;
}

const PowerSgdKernels& fastest_powersgd_kernels() {
  static const PowerSgdKernels& fastest = *runnable_powersgd_kernels().front();
  return fastest;
}

}  // namespace chexscale::distributed
