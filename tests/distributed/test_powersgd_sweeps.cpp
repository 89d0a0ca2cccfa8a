// PowerSGD's sweeps (powersgd_kernels.h) on every variant this CPU runs, and its tensor operations,
// against the algorithm computed the plain way with ATen in double precision (the oracle): one step
// from the same state gives the same gradients, residuals and Qs to within 1e-6 of each tensor's
// scale; and the parts every rank must compute alike give the same bits on every variant.
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
void check_one_step(const Case& c) {
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
  const torch::Tensor before = flat.clone();
  bucket.first_payload(c.loss_scale);
  ASSERT_TRUE(bucket.second_payload(c.world).defined());
  bucket.finish(c.world, c.loss_scale);

  const auto residuals = bucket.split_residuals(bucket.flat_residuals(), "r.");
  const auto qs = bucket.q_state();
  size_t compressed = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string what = c.name() + ", gradient " + std::to_string(i);
    const torch::Tensor memory = flat.narrow(0, offsets[i], slots[i].numel());
    if (!references[i].q.defined()) {  // sent as it is: averaged over the world
      EXPECT_TRUE(torch::equal(memory, before.narrow(0, offsets[i], memory.numel()) / c.world));
      continue;
    }
    Reference& r = references[i];
    reference_step(r, c.world, c.loss_scale);
    const double scale = r.accumulated.abs().max().item<double>();
    // A rank-full matrix (never compressed in training: its rate is below 1) comes back through
    // an ill-conditioned basis, where float's own error, ATen's included, reaches a few 1e-6.
    const bool rank_full = r.q.size(1) == std::min(r.gradient.size(0), r.gradient.size(1));
    const double tolerance = rank_full && c.type == torch::kFloat ? 1e-5 : 1e-6;
    expect_close(memory.view(r.gradient.sizes()), r.gradient, scale, what + " (approximation)",
                 tolerance);
    expect_close(residuals[compressed].second,
                 r.residual.flatten().as_strided(slots[i].sizes(), slots[i].strides()),
                 scale / c.loss_scale, what + " (residual)", tolerance);
    expect_close(qs[compressed].second, r.q, r.q.abs().max().item<double>(), what + " (Q)");
    ++compressed;
  }
  EXPECT_EQ(compressed, residuals.size());
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
      check_one_step({kernels, rank, 1, 1.0, torch::kFloat, false});
    check_one_step({kernels, 4, 2, 3.0, torch::kFloat, true});
    check_one_step({kernels, 5, 3, 1.0, torch::kDouble, false});
  }
}

// M' = P Q^T and the residual, from the same P and Q (sums every rank shares), give the same bits
// on every variant, so ranks on different CPUs apply the same gradient; and each variant's
// Q^T = P^T M is this product to float precision.
TEST(PowerSgdSweeps, WhatRanksApplyIsTheSameOnEveryVariant) {
  const int64_t rows = 37, cols = 211, rank = 4;
  torch::manual_seed(3);
  const torch::Tensor gradient = torch::randn({rows, cols}), p = torch::randn({rank, rows});
  const torch::Tensor q = torch::randn({rank, cols});
  torch::Tensor first_gradient, first_residual;
  for (const PowerSgdKernels* kernels : runnable_powersgd_kernels()) {
    torch::Tensor g = gradient.clone(), residual = torch::zeros({rows, cols});
    torch::Tensor q_out = torch::empty({rank, cols});
    const SweepMatrix<float> m{g.data_ptr<float>(),
                               residual.data_ptr<float>(),
                               p.data_ptr<float>(),
                               q.data_ptr<float>(),
                               rows,
                               cols,
                               rank};
    kernels->f32.project_back(m, q_out.data_ptr<float>(), 0, cols);
    EXPECT_TRUE(torch::allclose(q_out, torch::mm(p, gradient), 1e-5, 1e-5)) << kernels->name;
    kernels->f32.approximate(m, 1.0F, 0, rows);
    EXPECT_TRUE(torch::allclose(g, torch::mm(p.t(), q), 1e-5, 1e-5)) << kernels->name;
    EXPECT_TRUE(torch::allclose(residual, gradient - g, 1e-5, 1e-5)) << kernels->name;
    if (!first_gradient.defined()) {
      first_gradient = g, first_residual = residual;
      continue;
    }
    EXPECT_TRUE(torch::equal(g, first_gradient)) << kernels->name;
    EXPECT_TRUE(torch::equal(residual, first_residual)) << kernels->name;
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
