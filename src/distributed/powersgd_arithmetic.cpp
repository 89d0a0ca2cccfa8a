// PowerSGD's arithmetic per matrix (see powersgd_arithmetic.h): the sweeps over raw CPU memory, or
// ATen tensor operations; the residuals for a checkpoint always with tensor operations.
#include "distributed/powersgd_arithmetic.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace chexscale::distributed {
namespace {

// A thread's share of a sweep is at least this many gradient elements.
constexpr int64_t kGrainElements = 1 << 16;
// Q^T = P^T M is shared out in column chunks this wide (a multiple of every vector width).
constexpr int64_t kColumnChunk = 64;

template <typename T>
const PowerSgdSweeps<T>& sweeps_of(const PowerSgdKernels& kernels) {
  if constexpr (std::is_same_v<T, float>) {
    return kernels.f32;
  } else {
    return kernels.f64;
  }
}

template <typename T>
SweepMatrix<T> sweep_matrix(const PowerSgdMatrix& m, FeedbackState feedback = {}) {
  return {m.gradient.data_ptr<T>(),
          m.accumulated.data_ptr<T>(),
          m.p_rows.data_ptr<T>(),
          m.q_rows.data_ptr<T>(),
          m.applied_p_rows.data_ptr<T>(),
          m.applied_q_rows.data_ptr<T>(),
          feedback.applied,
          static_cast<T>(feedback.scale),
          m.gradient.size(0),
          m.gradient.size(1),
          m.q_rows.size(0)};
}

// P Q^T for P^T and Q^T's rows, each element summed over the rank in order with products and sums
// rounded apart: the sweeps' bits.
torch::Tensor ordered_product(const torch::Tensor& p_rows, const torch::Tensor& q_rows) {
  torch::Tensor sum = p_rows[0].unsqueeze(1) * q_rows[0].unsqueeze(0);
  for (int64_t k = 1; k < p_rows.size(0); ++k)
    sum.add_(p_rows[k].unsqueeze(1) * q_rows[k].unsqueeze(0));
  return sum;
}

// Calls sweep(begin, end) over rows [0, rows) in shares of at least kGrainElements.
template <typename Sweep>
void over_rows(int64_t rows, int64_t cols, const Sweep& sweep) {
  at::parallel_for(0, rows, std::max<int64_t>(1, kGrainElements / cols), sweep);
}

// Modified Gram-Schmidt over the rows with tensor operations (DDP's epsilon: a zero row stays
// zero).
void orthonormalize_tensor_rows(const torch::Tensor& rows) {
  const int64_t count = rows.size(0);
  for (int64_t i = 0; i < count; ++i) {
    torch::Tensor row = rows.narrow(0, i, 1);
    row.div_(row.norm() + 1e-8);
    if (i + 1 < count) {
      torch::Tensor rest = rows.narrow(0, i + 1, count - i - 1);
      rest.sub_((row * rest).sum(1, /*keepdim=*/true) * row);
    }
  }
}

}  // namespace

void PowerSgdArithmetic::project(const PowerSgdMatrix& m, const torch::Tensor& gradient,
                                 FeedbackState feedback, double loss_scale) const {
  if (kernels_ == nullptr) {
    torch::Tensor accumulated = m.accumulated;
    residual(m, feedback, accumulated);
    torch::add_out(accumulated, gradient, accumulated, loss_scale);
    torch::Tensor p_rows = m.p_rows;
    torch::mm_out(p_rows, m.q_rows, accumulated.t());
    return;
  }
  AT_DISPATCH_FLOATING_TYPES(m.gradient.scalar_type(), "powersgd project", [&] {
    SweepMatrix<scalar_t> x = sweep_matrix<scalar_t>(m, feedback);
    x.gradient = gradient.data_ptr<scalar_t>();
    const auto& sweeps = sweeps_of<scalar_t>(*kernels_);
    over_rows(x.rows, x.cols, [&](int64_t begin, int64_t end) {
      sweeps.project(x, static_cast<scalar_t>(loss_scale), begin, end);
    });
  });
}

void PowerSgdArithmetic::project_back(const PowerSgdMatrix& m) const {
  if (kernels_ == nullptr) {
    torch::Tensor q_sum_rows = m.q_sum_rows;
    torch::mm_out(q_sum_rows, m.p_rows, m.accumulated);
    return;
  }
  AT_DISPATCH_FLOATING_TYPES(m.gradient.scalar_type(), "powersgd project back", [&] {
    const SweepMatrix<scalar_t> x = sweep_matrix<scalar_t>(m);
    const auto& sweeps = sweeps_of<scalar_t>(*kernels_);
    scalar_t* q_out = m.q_sum_rows.data_ptr<scalar_t>();
    const int64_t chunks = (x.cols + kColumnChunk - 1) / kColumnChunk;
    const int64_t grain = std::max<int64_t>(1, kGrainElements / (kColumnChunk * x.rows));
    at::parallel_for(0, chunks, grain, [&](int64_t begin, int64_t end) {
      sweeps.project_back(x, q_out, begin * kColumnChunk, std::min(end * kColumnChunk, x.cols));
    });
  });
}

void PowerSgdArithmetic::approximate(const PowerSgdMatrix& m) const {
  if (kernels_ == nullptr) {
    torch::Tensor gradient = m.gradient;
    torch::mm_out(gradient, m.applied_p_rows.t(), m.applied_q_rows);
    return;
  }
  AT_DISPATCH_FLOATING_TYPES(m.gradient.scalar_type(), "powersgd approximate", [&] {
    const SweepMatrix<scalar_t> x = sweep_matrix<scalar_t>(m);
    const auto& sweeps = sweeps_of<scalar_t>(*kernels_);
    over_rows(x.rows, x.cols,
              [&](int64_t begin, int64_t end) { sweeps.approximate(x, begin, end); });
  });
}

void PowerSgdArithmetic::residual(const PowerSgdMatrix& m, FeedbackState feedback,
                                  const torch::Tensor& out) const {
  torch::Tensor result = out;
  if (feedback.applied) {
    // The product as approximate() formed it: a matrix product for tensor operations.
    const torch::Tensor product = kernels_ == nullptr
                                      ? torch::mm(m.applied_p_rows.t(), m.applied_q_rows)
                                      : ordered_product(m.applied_p_rows, m.applied_q_rows);
    torch::sub_out(result, m.accumulated, product);
  } else if (!out.is_same(m.accumulated)) {
    result.copy_(m.accumulated);
  }
  if (feedback.scale != 1.0) result.div_(feedback.scale);
}

void PowerSgdArithmetic::orthonormalize(const torch::Tensor& factor_rows) const {
  if (kernels_ == nullptr) {
    orthonormalize_tensor_rows(factor_rows);
    return;
  }
  AT_DISPATCH_FLOATING_TYPES(factor_rows.scalar_type(), "powersgd orthonormalize", [&] {
    orthonormalize_rows(factor_rows.data_ptr<scalar_t>(), factor_rows.size(0), factor_rows.size(1));
  });
}

void PowerSgdArithmetic::pack(const std::vector<torch::Tensor>& gradients,
                              const torch::Tensor& payload) const {
  int64_t at = 0;
  for (const torch::Tensor& g : gradients) {
    if (kernels_ == nullptr) {
      payload.narrow(0, at, g.numel()).copy_(g);
    } else {
      std::memcpy(static_cast<char*>(payload.data_ptr()) + at * payload.element_size(),
                  g.data_ptr(), g.numel() * g.element_size());
    }
    at += g.numel();
  }
}

void PowerSgdArithmetic::unpack(const std::vector<torch::Tensor>& gradients,
                                const torch::Tensor& payload, int world_size) const {
  if (kernels_ == nullptr) {
    int64_t at = 0;
    for (const torch::Tensor& g : gradients) {
      g.copy_(payload.narrow(0, at, g.numel())).div_(world_size);
      at += g.numel();
    }
    return;
  }
  AT_DISPATCH_FLOATING_TYPES(payload.scalar_type(), "powersgd unpack", [&] {
    const scalar_t* from = payload.data_ptr<scalar_t>();
    const auto world = static_cast<scalar_t>(world_size);
    for (const torch::Tensor& g : gradients) {
      scalar_t* slot = g.data_ptr<scalar_t>();
      for (int64_t x = 0; x < g.numel(); ++x)
        slot[x] = from[x] / world;
      from += g.numel();
    }
  });
}

}  // namespace chexscale::distributed
