// PowerSGD's arithmetic on raw matrices: three row sweeps, compiled for AVX2 with FMA and for the
// build's baseline and chosen at run time, and the orthogonalisation. No LibTorch here. On
// gradients that come from memory the sweeps are bound by its bandwidth; on gradients that stay in
// cache, by their arithmetic.
//
// Layouts: a gradient M and its error feedback are (rows, cols) row-major; P and Q are stored
// transposed, as `rank` contiguous rows of length rows (P^T) and cols (Q^T), so each factor column
// is a vector.
//
// What a rank applies is the same on every path: M' = P Q^T sums over the rank in order, without
// fused multiply-adds, and the orthogonalisation is plain code compiled once; both start from
// sums every rank shares. P = E Q and Q = E^T P, this rank's share of those sums, use fused
// multiply-adds where the CPU has them and sum in vector lanes, so their last bits depend on the
// path. So ranks on different CPUs stay in step.
#pragma once

#include <cstdint>
#include <vector>

namespace chexscale::distributed {

template <typename T>
struct SweepMatrix {
  T* gradient;         // M, (rows, cols)
  T* accumulated;      // the error feedback, (rows, cols): see PowerSgdSweeps
  T* p_rows;           // P^T, (rank, rows): this step's
  const T* q_rows;     // Q^T, (rank, cols): the warm start that P = E Q multiplies by
  const T* applied_p;  // P^T and Q^T, (rank, rows) and (rank, cols), of the approximation
  const T* applied_q;  //   approximate() writes (and of the residual that it leaves)
  bool applied;        // whether `accumulated` holds a matrix that the applied factors approximated
  T scale;             // the loss scale `accumulated` is in
  int64_t rows, cols, rank;
};

// The error feedback stays in `accumulated`: before a step its residual is
// (accumulated - applied_p^T applied_q) / scale, or accumulated / scale where nothing was applied
// (the residual itself, at scale 1, as a fresh or restored one is); project() replaces it with the
// step's matrix E. So the residual of a step is formed only when the next step reads it, and the
// last sweep need not read or write it: five passes over the matrix's memory a step, not seven.
template <typename T>
struct PowerSgdSweeps {
  // Rows [begin, end): E = M + scale * residual, stored in `accumulated`; P = E Q.
  void (*project)(const SweepMatrix<T>& m, T scale, int64_t begin, int64_t end);
  // Columns [begin, end) of q_out (rank, cols): Q^T = P^T E.
  void (*project_back)(const SweepMatrix<T>& m, T* q_out, int64_t begin, int64_t end);
  // Rows [begin, end): M = applied_p applied_q^T.
  void (*approximate)(const SweepMatrix<T>& m, int64_t begin, int64_t end);
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
