// PowerSGD's arithmetic on raw matrices: three row sweeps, compiled for AVX2 with FMA and for the
// build's baseline and chosen at run time, and the orthogonalisation. No LibTorch here. The
// sweeps are bound by memory bandwidth, not by their arithmetic.
//
// Layouts: a gradient M and its residual are (rows, cols) row-major; P and Q are stored transposed,
// as `rank` contiguous rows of length rows (P^T) and cols (Q^T), so each factor column is a vector.
//
// What a rank applies is the same on every path: M' = P Q^T sums over the rank in order, without
// fused multiply-adds, and the orthogonalisation is plain code compiled once; both start from
// sums every rank shares. P = M Q and Q = M^T P, this rank's share of those sums, use fused
// multiply-adds where the CPU has them and sum in vector lanes, so their last bits depend on the
// path. So ranks on different CPUs stay in step.
#pragma once

#include <cstdint>
#include <vector>

namespace chexscale::distributed {

template <typename T>
struct SweepMatrix {
  T* gradient;      // M, (rows, cols)
  T* residual;      // (rows, cols)
  T* p_rows;        // P^T, (rank, rows)
  const T* q_rows;  // Q^T, (rank, cols)
  int64_t rows, cols, rank;
};

template <typename T>
struct PowerSgdSweeps {
  // Rows [begin, end): M += scale * residual; P = M Q.
  void (*project)(const SweepMatrix<T>& m, T scale, int64_t begin, int64_t end);
  // Columns [begin, end) of q_out (rank, cols): Q^T = P^T M.
  void (*project_back)(const SweepMatrix<T>& m, T* q_out, int64_t begin, int64_t end);
  // Rows [begin, end): M' = P Q^T; residual = (M - M') / loss_scale; M = M'.
  void (*approximate)(const SweepMatrix<T>& m, T loss_scale, int64_t begin, int64_t end);
};

struct PowerSgdKernels {
  const char* name;      // "avx2" or "baseline"
  int64_t vector_bytes;  // of its vectors
  PowerSgdSweeps<float> f32;
  PowerSgdSweeps<double> f64;
};

// The fastest kernels this CPU runs.
const PowerSgdKernels& fastest_powersgd_kernels();
// Every variant this CPU runs, fastest first (the tests check each against a reference).
std::vector<const PowerSgdKernels*> runnable_powersgd_kernels();

// Orthonormalises `count` vectors of `length` stored back to back, in order (modified
// Gram-Schmidt; sums in double; a vector that vanishes stays near zero instead of dividing by
// zero, as DDP's epsilon of 1e-8 does).
void orthonormalize_rows(float* rows, int64_t count, int64_t length);
void orthonormalize_rows(double* rows, int64_t count, int64_t length);

// The variants, one per translation unit (powersgd_kernels_<isa>.cpp).
const PowerSgdKernels& baseline_powersgd_kernels();
#if defined(__x86_64__)
const PowerSgdKernels& avx2_powersgd_kernels();
#endif

}  // namespace chexscale::distributed
