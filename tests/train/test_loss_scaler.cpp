// DynamicLossScaler: scale and unscale arithmetic, backoff on overflow, growth after the interval;
// and TrainStep with loss scaling on CPU (fp32 autocast-free, so the arithmetic is checkable).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/error.h"
#include "train/loss_scaler.h"
#include "train/random_batch.h"
#include "train/step.h"
#include "train/tiny_classifier.h"

namespace chexscale::train {
namespace {

torch::Tensor param_with_grad(const torch::Tensor& grad) {
  auto p = torch::zeros_like(grad).requires_grad_(true);
  p.mutable_grad() = grad.clone();
  return p;
}

TEST(DynamicLossScaler, ScalesTheLossByTheCurrentScale) {
  DynamicLossScaler scaler(LossScalerOptions{1024.0});
  const auto loss = torch::tensor(0.75f);
  EXPECT_FLOAT_EQ(scaler.scale(loss).item<float>(), 768.0f);
  EXPECT_EQ(scaler.current_scale(), 1024.0);
}

TEST(DynamicLossScaler, UnscaleDividesEveryDefinedGradient) {
  DynamicLossScaler scaler(LossScalerOptions{256.0});
  const auto a = param_with_grad(torch::tensor({256.0f, -512.0f, 1.0f}));
  const auto b = param_with_grad(torch::tensor({{2560.0f}}));
  const auto no_grad = torch::zeros({2}).requires_grad_(true);
  scaler.unscale({a, b, no_grad});
  EXPECT_TRUE(torch::equal(a.grad(), torch::tensor({1.0f, -2.0f, 1.0f / 256.0f})));
  EXPECT_TRUE(torch::equal(b.grad(), torch::tensor({{10.0f}})));
  EXPECT_FALSE(no_grad.grad().defined());
}

TEST(DynamicLossScaler, OverflowStaysVisibleAfterUnscaling) {
  DynamicLossScaler scaler;
  const float inf = std::numeric_limits<float>::infinity();
  const auto p = param_with_grad(torch::tensor({1.0f, inf, std::nanf("")}));
  scaler.unscale({p});
  EXPECT_FALSE(p.grad().isfinite().all().item<bool>());
  EXPECT_TRUE(std::isinf(p.grad()[1].item<float>()));
  EXPECT_TRUE(std::isnan(p.grad()[2].item<float>()));
}

TEST(DynamicLossScaler, OverflowHalvesTheScaleAndRestartsTheGrowthCount) {
  DynamicLossScaler scaler(LossScalerOptions{65536.0, 2.0, 0.5, 4});
  scaler.update(true);
  scaler.update(true);
  scaler.update(true);
  EXPECT_EQ(scaler.state().good_steps, 3);
  scaler.update(false);
  EXPECT_EQ(scaler.current_scale(), 32768.0);
  EXPECT_EQ(scaler.state().good_steps, 0);
  scaler.update(false);
  EXPECT_EQ(scaler.current_scale(), 16384.0);
  // Three good steps after the backoff are not yet four in a row: no growth.
  for (int i = 0; i < 3; ++i)
    scaler.update(true);
  EXPECT_EQ(scaler.current_scale(), 16384.0);
}

TEST(DynamicLossScaler, DoublesAfterGrowthIntervalGoodStepsInARow) {
  DynamicLossScaler scaler(LossScalerOptions{8.0, 2.0, 0.5, 3});
  scaler.update(true);
  scaler.update(true);
  EXPECT_EQ(scaler.current_scale(), 8.0);
  scaler.update(true);
  EXPECT_EQ(scaler.current_scale(), 16.0);
  EXPECT_EQ(scaler.state().good_steps, 0);
  for (int i = 0; i < 3; ++i)
    scaler.update(true);
  EXPECT_EQ(scaler.current_scale(), 32.0);
}

TEST(DynamicLossScaler, DefaultsAreGradScalers) {
  const LossScalerOptions o;
  EXPECT_EQ(o.init_scale, 65536.0);
  EXPECT_EQ(o.growth_factor, 2.0);
  EXPECT_EQ(o.backoff_factor, 0.5);
  EXPECT_EQ(o.growth_interval, 2000);
}

TEST(DynamicLossScaler, RejectsBadOptionsAndState) {
  EXPECT_THROW(DynamicLossScaler(LossScalerOptions{0.0}), UsageError);
  EXPECT_THROW(DynamicLossScaler(LossScalerOptions{1.0, 1.0}), UsageError);
  EXPECT_THROW(DynamicLossScaler(LossScalerOptions{1.0, 2.0, 1.0}), UsageError);
  EXPECT_THROW(DynamicLossScaler(LossScalerOptions{1.0, 2.0, 0.5, 0}), UsageError);
  DynamicLossScaler scaler;
  EXPECT_THROW(scaler.set_state({-1.0, 0}), DataError);
  scaler.set_state({512.0, 7});
  EXPECT_EQ(scaler.current_scale(), 512.0);
  EXPECT_EQ(scaler.state().good_steps, 7);
}

data::Batch small_batch(uint64_t seed) {
  return test_util::random_batch(4, 16, seed);
}

// A power-of-two scale is exact in binary floating point: the scaled step must make the very
// same update as the unscaled one.
TEST(TrainStepLossScaling, PowerOfTwoScaleGivesTheUnscaledUpdate) {
  auto plain = test_util::make_tiny_classifier(5);
  auto scaled = test_util::make_tiny_classifier(5);
  torch::optim::SGD plain_opt(plain->parameters(), torch::optim::SGDOptions(0.1));
  torch::optim::SGD scaled_opt(scaled->parameters(), torch::optim::SGDOptions(0.1));
  TrainStep plain_step(plain, plain_opt, BceWithLogitsLoss(), nullptr);
  TrainStepOptions o;
  o.loss_scaling = true;
  o.loss_scaler.init_scale = 1024.0;
  TrainStep scaled_step(scaled, scaled_opt, BceWithLogitsLoss(), nullptr, o);
  for (int i = 0; i < 3; ++i) {
    const auto batch = small_batch(20 + i);
    const StepResult a = plain_step.run(batch, i);
    const StepResult b = scaled_step.run(batch, i);
    EXPECT_EQ(a.loss, b.loss);  // the reported loss is the unscaled one
    EXPECT_FALSE(b.skipped);
  }
  const auto p = plain->parameters();
  const auto q = scaled->parameters();
  for (size_t i = 0; i < p.size(); ++i)
    EXPECT_TRUE(torch::equal(p[i], q[i])) << "parameter " << i;
  EXPECT_EQ(scaled_step.loss_scaler()->current_scale(), 1024.0);
  EXPECT_EQ(scaled_step.loss_scaler()->state().good_steps, 3);
}

// A scale that overflows the (fp32) scaled loss: the step is skipped, not an error, even under
// the stop policy, and the scale backs off.
TEST(TrainStepLossScaling, OverflowSkipsTheStepAndBacksOff) {
  auto model = test_util::make_tiny_classifier(6);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1));
  TrainStepOptions o;
  o.non_finite = NonFinitePolicy::kStop;
  o.loss_scaling = true;
  o.loss_scaler.init_scale = 1e39;  // above float's max: loss * scale = inf
  TrainStep step(model, opt, BceWithLogitsLoss(), nullptr, o);
  std::vector<torch::Tensor> before;
  for (const auto& p : model->parameters())
    before.push_back(p.detach().clone());
  const StepResult r = step.run(small_batch(30), 0);
  EXPECT_TRUE(r.skipped);
  EXPECT_TRUE(std::isfinite(r.loss));
  EXPECT_EQ(step.loss_scaler()->current_scale(), 5e38);
  const auto after = model->parameters();
  for (size_t i = 0; i < after.size(); ++i)
    EXPECT_TRUE(torch::equal(before[i], after[i])) << "parameter " << i;
  // Each further overflow halves the scale again until the scaled gradients fit in fp32;
  // then the step updates the weights.
  int skipped = 1;
  StepResult later;
  for (int i = 1; i < 200; ++i) {
    later = step.run(small_batch(30), i);
    if (!later.skipped) break;
    ++skipped;
  }
  ASSERT_FALSE(later.skipped);
  EXPECT_DOUBLE_EQ(step.loss_scaler()->current_scale(), 1e39 * std::pow(0.5, skipped));
  EXPECT_FALSE(torch::equal(before[0], model->parameters()[0]));
}

}  // namespace
}  // namespace chexscale::train
