// FusedAdam against LibTorch's own torch::optim::Adam: the same parameters and gradients through
// both, step after step, must give the same weights and moments (to float rounding), including
// weight decay, a channels-last parameter, a parameter without gradient and a non-float one;
// parameters outside the fused CPU loop (other dtypes, GPUs) take the _foreach_ path.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "train/fused_adam.h"
#include "train/optimizer.h"

namespace chexscale::train {
namespace {

std::vector<torch::Tensor> make_params(uint64_t seed) {
  torch::manual_seed(seed);
  return {
      torch::randn({64, 3, 7, 7}).requires_grad_(),
      torch::randn({64, 3, 7, 7}).contiguous(torch::MemoryFormat::ChannelsLast).requires_grad_(),
      torch::randn({100003}).requires_grad_(),  // odd length: the loop's scalar tail
      torch::randn({17}, torch::kDouble).requires_grad_(),
      torch::randn({5}).requires_grad_()};  // never gets a gradient
}

void set_gradients(std::vector<torch::Tensor>& params, int step) {
  torch::manual_seed(1000 + step);
  for (size_t i = 0; i + 1 < params.size(); ++i) {
    params[i].mutable_grad() = torch::randn_like(params[i]) * (step + 1);
  }
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double tol = want.scalar_type() == torch::kDouble ? 1e-12 : 2e-6;
  const double err = (got - want).abs().max().item<double>();
  const double scale = want.abs().max().item<double>() + 1e-12;  // also for int64 step counts
  EXPECT_LE(err / scale, tol) << what;
}

void compare_with_reference(double weight_decay) {
  auto fused_params = make_params(7);
  auto reference_params = make_params(7);
  const auto options =
      torch::optim::AdamOptions(3e-3).betas({0.9, 0.999}).weight_decay(weight_decay);
  FusedAdam fused(fused_params, options);
  torch::optim::Adam reference(reference_params, options);
  for (int step = 0; step < 5; ++step) {
    set_gradients(fused_params, step);
    set_gradients(reference_params, step);
    fused.step();
    reference.step();
  }
  for (size_t i = 0; i < fused_params.size(); ++i) {
    expect_close(fused_params[i], reference_params[i], "parameter " + std::to_string(i));
  }
  EXPECT_TRUE(fused_params[1].is_contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(torch::equal(fused_params[4], make_params(7)[4])) << "no gradient, no update";
  // The moments too: a checkpoint written from either must restore the other.
  const auto fused_state = optimizer_state(fused, fused_params);
  const auto reference_state = optimizer_state(reference, reference_params);
  ASSERT_EQ(fused_state.size(), reference_state.size());
  for (size_t i = 0; i < fused_state.size(); ++i) {
    EXPECT_EQ(fused_state[i].name, reference_state[i].name);
    expect_close(fused_state[i].tensor, reference_state[i].tensor, fused_state[i].name);
  }
}

TEST(FusedAdam, MatchesTorchAdam) {
  compare_with_reference(0.0);
}

TEST(FusedAdam, MatchesTorchAdamWithWeightDecay) {
  compare_with_reference(1e-2);
}

TEST(FusedAdam, ResumesFromTorchAdamState) {
  auto a = make_params(3);
  auto b = make_params(3);
  torch::optim::Adam reference(a, torch::optim::AdamOptions(1e-3));
  set_gradients(a, 0);
  reference.step();
  FusedAdam fused(b, torch::optim::AdamOptions(1e-3));
  for (size_t i = 0; i < a.size(); ++i)
    b[i].detach().copy_(a[i].detach());
  load_optimizer_state(fused, b, optimizer_state(reference, a));
  set_gradients(a, 1);
  set_gradients(b, 1);
  reference.step();
  fused.step();
  for (size_t i = 0; i < a.size(); ++i)
    expect_close(b[i], a[i], "parameter " + std::to_string(i));
}

// Runs `steps` Adam steps through FusedAdam and torch::optim::Adam on copies of `params` (with
// the same gradients) and returns both parameter lists and both optimizer states.
struct TwoRuns {
  std::vector<torch::Tensor> fused, reference;
  std::vector<models::NamedTensor> fused_state, reference_state;
};
TwoRuns run_both(const std::vector<torch::Tensor>& params, torch::optim::AdamOptions options,
                 int steps) {
  TwoRuns r;
  for (const auto& p : params) {
    r.fused.push_back(p.detach().clone(torch::MemoryFormat::Preserve).requires_grad_());
    r.reference.push_back(p.detach().clone(torch::MemoryFormat::Preserve).requires_grad_());
  }
  FusedAdam fused(r.fused, options);
  torch::optim::Adam reference(r.reference, options);
  for (int step = 0; step < steps; ++step) {
    torch::manual_seed(2000 + step);
    for (size_t i = 0; i < params.size(); ++i) {
      const auto g = torch::randn_like(params[i]);
      r.fused[i].mutable_grad() = g.clone(torch::MemoryFormat::Preserve);
      r.reference[i].mutable_grad() = g.clone(torch::MemoryFormat::Preserve);
    }
    fused.step();
    reference.step();
  }
  r.fused_state = optimizer_state(fused, r.fused);
  r.reference_state = optimizer_state(reference, r.reference);
  return r;
}

// Parameters the fused CPU loop does not take (here: double) go through _foreach_ operations,
// which on the CPU are LibTorch Adam's own per-tensor arithmetic: equal bit for bit.
TEST(FusedAdam, ForeachPathEqualsTorchAdamBitForBit) {
  torch::manual_seed(5);
  const std::vector<torch::Tensor> params = {
      torch::randn({32, 3, 5, 5}, torch::kDouble),
      torch::randn({32, 3, 5, 5}, torch::kDouble).contiguous(torch::MemoryFormat::ChannelsLast),
      torch::randn({1001}, torch::kDouble), torch::randn({7}, torch::kDouble)};
  const auto r = run_both(params, torch::optim::AdamOptions(2e-3).weight_decay(1e-2), 5);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::equal(r.fused[i], r.reference[i])) << "parameter " << i;
    EXPECT_FALSE(torch::equal(r.fused[i], params[i])) << "parameter " << i << " was not updated";
  }
  EXPECT_TRUE(r.fused[1].is_contiguous(torch::MemoryFormat::ChannelsLast));
  ASSERT_EQ(r.fused_state.size(), r.reference_state.size());
  for (size_t i = 0; i < r.fused_state.size(); ++i)
    EXPECT_TRUE(torch::equal(r.fused_state[i].tensor, r.reference_state[i].tensor))
        << r.fused_state[i].name;
}

#ifdef CHEXSCALE_WITH_CUDA
// On a GPU every parameter takes the _foreach_ path (multi-tensor kernels).
TEST(FusedAdam, MatchesTorchAdamOnTheGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "CUDA build without a GPU";
  torch::manual_seed(6);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const std::vector<torch::Tensor> params = {
      torch::randn({64, 3, 7, 7}, cuda),
      torch::randn({64, 3, 7, 7}, cuda).contiguous(torch::MemoryFormat::ChannelsLast),
      torch::randn({100003}, cuda), torch::randn({17}, cuda)};
  const auto r = run_both(params, torch::optim::AdamOptions(3e-3).weight_decay(1e-2), 5);
  for (size_t i = 0; i < params.size(); ++i)
    expect_close(r.fused[i].cpu(), r.reference[i].cpu(), "parameter " + std::to_string(i));
  for (size_t i = 0; i < r.fused_state.size(); ++i)
    expect_close(r.fused_state[i].tensor.cpu(), r.reference_state[i].tensor.cpu(),
                 r.fused_state[i].name);
}
#endif

TEST(FusedAdam, IsWhatTheRecipeBuilds) {
  auto params = make_params(1);
  const auto optimizer = make_optimizer(params, OptimizerOptions{});
  EXPECT_NE(dynamic_cast<FusedAdam*>(optimizer.get()), nullptr);
}

}  // namespace
}  // namespace chexscale::train
