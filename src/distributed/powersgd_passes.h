// PowerSGD's passes over one gradient matrix (the algorithm: powersgd.h), each fused so that it
// streams the gradient from memory once: the error-feedback add with P = M Q; Q = M^T P; and the
// approximation P Q^T with the new residual. Plain loops on CPU memory, for float and double.
// Layouts, all dense and row-major: M and the residual (rows, cols), P (rows, rank), and Q
// transposed, qt (rank, cols), so that the inner loops run along M's rows. A sum over the rank
// is taken in the same order whatever the vector width, so P Q^T is the same on every CPU.
#pragma once

#include <cstdint>

namespace chexscale::distributed {

struct MatrixShape {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t rank = 0;
};

// m += scale * residual; then p = m q.
void feedback_and_project(float* m, const float* residual, float scale, const float* qt, float* p,
                          MatrixShape shape);
void feedback_and_project(double* m, const double* residual, double scale, const double* qt,
                          double* p, MatrixShape shape);

// qt = (m^T p)^T: qt[k][j] = sum over i of m[i][j] p[i][k].
void project_back(const float* m, const float* p, float* qt, MatrixShape shape);
void project_back(const double* m, const double* p, double* qt, MatrixShape shape);

// a = p q^T; residual = (m - a) / scale; m = a.
void approximate(float* m, float* residual, float scale, const float* p, const float* qt,
                 MatrixShape shape);
void approximate(double* m, double* residual, double scale, const double* p, const double* qt,
                 MatrixShape shape);

// Orthonormalises the columns of a dense row-major (rows, cols) matrix in place: modified
// Gram-Schmidt with sums in double; a column that vanishes stays near zero instead of dividing by
// zero.
void orthogonalize(float* x, int64_t rows, int64_t cols);
void orthogonalize(double* x, int64_t rows, int64_t cols);

// out (cols, rows) = in (rows, cols) transposed.
void transpose(const float* in, float* out, int64_t rows, int64_t cols);
void transpose(const double* in, double* out, int64_t rows, int64_t cols);

}  // namespace chexscale::distributed
