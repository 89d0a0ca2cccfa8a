// PowerSGD's sweeps (powersgd_kernels.h) on every variant this CPU runs, and its tensor operations,
// against the algorithm computed the plain way with ATen in double precision (the oracle): two
// steps from the same state (the second forms the first's residual from its factors) give the same
// gradients, residuals and Qs to within 1e-6 of each tensor's scale; and the parts every rank must
// compute alike, and the residual a checkpoint keeps, give the same bits on every variant.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "distributed/powersgd.h"
#include "distributed/powersgd_kernels.h"

namespace chexscale::distributed {
namespace {

// The oracle: modified Gram-Schmidt over the columns, as DDP's powerSGD_hook does it.
void reference_orthogonalize(torch::Tensor matrix) {
  const int64_t cols = matrix.size(1);
  for (int64_t i = 0; i < cols; ++i) {
    torch::Tensor column = matrix.narrow(1, i, 1);
    column.div_(column.norm() + 1e-8);
    if (i + 1 < cols) {
      torch::Tensor rest = matrix.narrow(1, i + 1, cols - i - 1);
      rest.sub_((column * rest).sum(0, /*keepdim=*/true) * column);
    }
  }
}

// One compressed matrix of the oracle: M (rows, cols) in the slot's memory order, its residual in
// the same order, and Q (cols, rank).
struct Reference {
  torch::Tensor gradient, residual, q;
  torch::Tensor accumulated;  // M + loss_scale * residual, the matrix the step approximates
};

// The oracle's step in a world of `world` whose sums are this rank's payloads.
void reference_step(Reference& m, int world, double loss_scale) {
  m.gradient.add_(m.residual, loss_scale);
  m.accumulated = m.gradient.clone();
  torch::Tensor p = torch::mm(m.gradient, m.q);
  reference_orthogonalize(p);
  m.q = torch::mm(m.gradient.t(), p).div_(world);
  const torch::Tensor approximation = torch::mm(p, m.q.t());
  torch::sub_out(m.residual, m.gradient, approximation);
  if (loss_scale != 1.0) m.residual.div_(loss_scale);
  m.gradient.copy_(approximation);
  reference_orthogonalize(m.q);
}

// |got - want| <= tolerance * scale everywhere.
void expect_close(const torch::Tensor& got, const torch::Tensor& want, double scale,
                  const std::string& what, double tolerance = 1e-6) {
  const double error =
      (got.to(torch::kDouble) - want.to(torch::kDouble)).abs().max().item<double>();
  EXPECT_LE(error, tolerance * scale) << what << ": error " << error / scale << " of its scale";
}

struct Case {
  const PowerSgdKernels* kernels;  // null: tensor operations
  int rank;
  int world;
  double loss_scale;
  torch::ScalarType type;
  bool channels_last;
  std::string name() const {
    return std::string(kernels != nullptr ? kernels->name : "tensor operations") + " rank " +
           std::to_string(rank) + " world " + std::to_string(world) + " loss scale " +
           std::to_string(loss_scale) + (type == torch::kDouble ? " double" : " float") +
           (channels_last ? " channels-last" : "");
  }
};

// Gradients back to back in one buffer as the reducer's slots are (rows and columns that are not
// multiples of the vector widths and row blocks, a bias, a matrix large enough to be shared among
// threads); the state restored into the bucket is random, so every sweep starts from the same
// numbers as the oracle.
void check_two_steps(const Case& c) {
  const std::vector<std::vector<int64_t>> shapes = {
      {64, 64, 3, 3}, {10}, {67, 3, 7, 7}, {130, 40, 1, 1}, {14, 200}, {5, 3}, {160, 520}};
  int64_t numel = 0;
  for (const auto& shape : shapes)
    numel += c10::multiply_integers(shape);
  torch::manual_seed(11);
  const torch::Tensor flat = torch::randn({numel}, c.type);
  std::vector<torch::Tensor> slots;
  std::vector<size_t> ids;
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    torch::Tensor like = torch::empty(shapes[i], c.type);
    if (c.channels_last && shapes[i].size() == 4)
      like = like.contiguous(at::MemoryFormat::ChannelsLast);
    torch::Tensor slot = torch::empty({0}, c.type);
    slot.set_(flat.storage(), at, like.sizes(), like.strides());
    slots.push_back(slot);
    ids.push_back(i);
    offsets.push_back(at);
    at += like.numel();
  }
  PowerSgdOptions options;
  options.rank = c.rank;
  options.min_rate = 0;
  options.kernels = c.kernels;
  options.tensor_operations = c.kernels == nullptr;
  PowerSgdBucket bucket(slots, ids, options);
  std::vector<std::pair<std::string, torch::Tensor>> state;
  std::vector<Reference> references(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const int64_t rank = powersgd_matrix_rank(shapes[i], options);
    if (rank == 0) continue;
    const int64_t rows = shapes[i][0], cols = slots[i].numel() / rows;
    Reference& r = references[i];
    r.gradient = flat.narrow(0, offsets[i], rows * cols).view({rows, cols}).clone();
    r.residual = torch::randn({rows, cols}, c.type);
    r.q = torch::randn({cols, rank}, c.type);
    state.emplace_back("q." + std::to_string(i), r.q.clone());
    state.emplace_back("residual.0." + std::to_string(i),
                       r.residual.flatten().as_strided(slots[i].sizes(), slots[i].strides()));
    // The oracle computes in double from the same numbers: the exact step, to float's precision.
    r.gradient = r.gradient.to(torch::kDouble);
    r.residual = r.residual.to(torch::kDouble);
    r.q = r.q.to(torch::kDouble);
  }
  ASSERT_TRUE(bucket.restore(state, "residual.0."));
  // The second step has new gradients and twice the loss scale, and the oracle starts it from the
  // bucket's Qs and residuals (as a checkpoint keeps them), so that each step is compared from the
  // same state.
  for (int step = 0; step < 2; ++step) {
    const double loss_scale = c.loss_scale * (step + 1);
    if (step == 1) {
      flat.copy_(torch::randn({numel}, c.type));
      const auto residuals = bucket.split_residuals(bucket.residuals(), "r.");
      const auto qs = bucket.q_state();
      size_t compressed = 0;
      for (size_t i = 0; i < shapes.size(); ++i) {
        Reference& r = references[i];
        if (!r.q.defined()) continue;
        r.gradient = flat.narrow(0, offsets[i], r.gradient.numel())
                         .view(r.gradient.sizes())
                         .to(torch::kDouble, /*non_blocking=*/false, /*copy=*/true);
        torch::Tensor memory = torch::empty({r.gradient.numel()}, c.type);
        memory.as_strided(slots[i].sizes(), slots[i].strides()).copy_(residuals[compressed].second);
        r.residual = memory.view(r.gradient.sizes()).to(torch::kDouble);
        r.q = qs[compressed].second.to(torch::kDouble, /*non_blocking=*/false, /*copy=*/true);
        ++compressed;
      }
    }
    const torch::Tensor before = flat.clone();
    bucket.first_payload(loss_scale);
    ASSERT_TRUE(bucket.second_payload(c.world).defined());
    bucket.finish(c.world, loss_scale);

    const auto residuals = bucket.split_residuals(bucket.residuals(), "r.");
    const auto qs = bucket.q_state();
    size_t compressed = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const std::string what =
          c.name() + ", step " + std::to_string(step + 1) + ", gradient " + std::to_string(i);
      const torch::Tensor memory = flat.narrow(0, offsets[i], slots[i].numel());
      if (!references[i].q.defined()) {  // sent as it is: averaged over the world
        EXPECT_TRUE(torch::equal(memory, before.narrow(0, offsets[i], memory.numel()) / c.world));
        continue;
      }
      Reference& r = references[i];
      reference_step(r, c.world, loss_scale);
      const double scale = r.accumulated.abs().max().item<double>();
      // A rank-full matrix (never compressed in training: its rate is below 1) comes back through
      // an ill-conditioned basis, where float's own error, ATen's included, reaches a few 1e-6.
      const bool rank_full = r.q.size(1) == std::min(r.gradient.size(0), r.gradient.size(1));
      const double tolerance = rank_full && c.type == torch::kFloat ? 1e-5 : 1e-6;
      expect_close(memory.view(r.gradient.sizes()), r.gradient, scale, what + " (approximation)",
                   tolerance);
      expect_close(residuals[compressed].second,
                   r.residual.flatten().as_strided(slots[i].sizes(), slots[i].strides()),
                   scale / loss_scale, what + " (residual)", tolerance);
      expect_close(qs[compressed].second, r.q, r.q.abs().max().item<double>(), what + " (Q)");
      ++compressed;
    }
    EXPECT_EQ(compressed, residuals.size());
  }
}

// Every sweep variant this CPU runs, and the tensor operations that gradients off the CPU use.
TEST(PowerSgdSweeps, EveryVariantStepsAsTheOracleDoes) {
  auto variants = runnable_powersgd_kernels();
  ASSERT_FALSE(variants.empty());
  EXPECT_STREQ(variants.back()->name, "baseline");
  EXPECT_EQ(&fastest_powersgd_kernels(), variants.front());
  variants.push_back(nullptr);
  for (const PowerSgdKernels* kernels : variants) {
    for (int rank : {1, 3, 4, 8})
      check_two_steps({kernels, rank, 1, 1.0, torch::kFloat, false});
    check_two_steps({kernels, 4, 2, 3.0, torch::kFloat, true});
    check_two_steps({kernels, 5, 3, 1.0, torch::kDouble, false});
  }
}

// The product of P^T and Q^T's rows summed over the rank in order, products and sums rounded apart:
// what the sweeps must compute, bit for bit.
torch::Tensor ordered_product(const torch::Tensor& p, const torch::Tensor& q) {
  torch::Tensor sum = torch::zeros({p.size(1), q.size(1)});
  for (int64_t k = 0; k < p.size(0); ++k) {
    const torch::Tensor term = torch::outer(p[k], q[k]);
    sum = k == 0 ? term : sum + term;
  }
  return sum;
}

// M' = P Q^T, and the residual the next step forms from it, give the same bits on every variant
// from the same factors (sums every rank shares), so ranks on different CPUs apply the same
// gradient; the residual a checkpoint keeps has the bits the next step uses; and each variant's
// P^T = Q^T E^T and Q^T = P^T E are these products to float precision.
TEST(PowerSgdSweeps, WhatRanksApplyIsTheSameOnEveryVariant) {
  const int64_t rows = 37, cols = 211, rank = 4;
  const float applied_scale = 3;
  torch::manual_seed(3);
  const torch::Tensor gradient = torch::randn({rows, cols}), last = torch::randn({rows, cols});
  const torch::Tensor applied_p = torch::randn({rank, rows}),
                      applied_q = torch::randn({rank, cols});
  const torch::Tensor q = torch::randn({rank, cols});
  const torch::Tensor product = ordered_product(applied_p, applied_q);
  const torch::Tensor residual = (last - product) / applied_scale;
  for (const PowerSgdKernels* kernels : runnable_powersgd_kernels()) {
    torch::Tensor g = gradient.clone(), accumulated = last.clone();
    torch::Tensor p_out = torch::empty({rank, rows}), q_out = torch::empty({rank, cols});
    const SweepMatrix<float> m{g.data_ptr<float>(),
                               accumulated.data_ptr<float>(),
                               p_out.data_ptr<float>(),
                               q.data_ptr<float>(),
                               applied_p.data_ptr<float>(),
                               applied_q.data_ptr<float>(),
                               /*applied=*/true,
                               applied_scale,
                               rows,
                               cols,
                               rank};
    // At a loss scale of 1, E = M + residual in one rounding on every path.
    kernels->f32.project(m, 1.0F, 0, rows);
    EXPECT_TRUE(torch::equal(accumulated, gradient + residual)) << kernels->name;
    EXPECT_TRUE(torch::allclose(p_out, torch::mm(q, accumulated.t()), 1e-5, 1e-5)) << kernels->name;
    kernels->f32.project_back(m, q_out.data_ptr<float>(), 0, cols);
    EXPECT_TRUE(torch::allclose(q_out, torch::mm(p_out, accumulated), 1e-5, 1e-5)) << kernels->name;
    kernels->f32.approximate(m, 0, rows);
    EXPECT_TRUE(torch::equal(g, product)) << kernels->name;

    // The residual a checkpoint keeps, from the same state.
    PowerSgdMatrix views;
    views.accumulated = last;
    views.applied_p_rows = applied_p;
    views.applied_q_rows = applied_q;
    torch::Tensor kept = torch::empty({rows, cols});
    PowerSgdArithmetic(kernels).residual(views, {true, applied_scale}, kept);
    EXPECT_TRUE(torch::equal(kept, residual)) << kernels->name;
  }
}

TEST(PowerSgdSweeps, OrthonormalisedRowsAreOrthonormal) {
  torch::manual_seed(1);
  torch::Tensor rows = torch::randn({6, 50});
  orthonormalize_rows(rows.data_ptr<float>(), 6, 50);
  EXPECT_TRUE(torch::allclose(rows.mm(rows.t()), torch::eye(6), 1e-5, 1e-5));
  torch::Tensor oracle = torch::randn({50, 6});
  torch::Tensor ours = oracle.t().contiguous();
  reference_orthogonalize(oracle);
  orthonormalize_rows(ours.data_ptr<float>(), 6, 50);
  EXPECT_TRUE(torch::allclose(ours.t(), oracle, 1e-6, 1e-6));
  torch::Tensor zero = torch::zeros({2, 10});
  orthonormalize_rows(zero.data_ptr<float>(), 2, 10);
  EXPECT_TRUE(torch::isfinite(zero).all().item<bool>());
}

}  // namespace
}  // namespace chexscale::distributed
