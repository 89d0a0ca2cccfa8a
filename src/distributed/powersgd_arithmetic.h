// The arithmetic of a PowerSGD bucket's calls (powersgd.h), one matrix at a time: on CPU
// gradients powersgd_kernels.h's sweeps, each matrix's rows (or columns) shared among ATen's
// intra-op threads; on gradients of another device, the same steps as ATen tensor operations.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <vector>

#include "distributed/powersgd_kernels.h"

namespace chexscale::distributed {

// One compressed matrix, as views into its bucket's buffers. P and Q are kept transposed
// (powersgd_kernels.h): each factor column is a contiguous row.
struct PowerSgdMatrix {
  size_t id;                     // the reducer's index of the parameter
  torch::Tensor gradient;        // M, (rows, cols): the gradient's memory in the bucket buffer
  torch::Tensor logical;         // the gradient slot itself (parameter shape and strides)
  torch::Tensor accumulated;     // the error feedback, (rows, cols), in M's memory order
  torch::Tensor q_rows;          // Q^T, (rank, cols): the warm start
  torch::Tensor p_rows;          // P^T, (rank, rows), in the first payload
  torch::Tensor q_sum_rows;      // the summed Q^T, (rank, cols), in the second payload
  torch::Tensor applied_p_rows;  // the P^T and averaged Q^T of the last approximation
  torch::Tensor applied_q_rows;
};

// What every matrix's `accumulated` of a bucket holds (powersgd_kernels.h): whether the applied
// factors approximated it, and the loss scale it is in. A fresh or restored residual is {false, 1}.
struct FeedbackState {
  bool applied = false;
  double scale = 1;
};

class PowerSgdArithmetic {
 public:
  // `kernels`: the sweeps, for CPU gradients of float or double; null: tensor operations.
  explicit PowerSgdArithmetic(const PowerSgdKernels* kernels) : kernels_(kernels) {}

  // E = M + loss_scale * residual (the residual as `feedback` says), into `accumulated`; P = E Q.
  // M is read from `gradient`: m.gradient, or the same gradient elsewhere in the same memory
  // order (rows, cols), as autograd's own tensor before it reaches the bucket.
  void project(const PowerSgdMatrix& m, const torch::Tensor& gradient, FeedbackState feedback,
               double loss_scale) const;
  // The Q^T to sum: P^T E.
  void project_back(const PowerSgdMatrix& m) const;
  // M = the applied P Q^T.
  void approximate(const PowerSgdMatrix& m) const;
  // The residual `accumulated` stands for, into `out` (rows, cols), with the bits project() uses.
  void residual(const PowerSgdMatrix& m, FeedbackState feedback, const torch::Tensor& out) const;
  // Orthonormalises the rows of P^T or Q^T in order (modified Gram-Schmidt).
  void orthonormalize(const torch::Tensor& factor_rows) const;
  // The uncompressed gradients (each dense and 1-D) into the front of `payload`, back to back;
  // and back from it, divided by the world size.
  void pack(const std::vector<torch::Tensor>& gradients, const torch::Tensor& payload) const;
  void unpack(const std::vector<torch::Tensor>& gradients, const torch::Tensor& payload,
              int world_size) const;

 private:
  const PowerSgdKernels* kernels_;
};

}  // namespace chexscale::distributed
