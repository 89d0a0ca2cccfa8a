// DynamicLossScaler: scale and unscale arithmetic, backoff on overflow, growth after the interval
// (TrainStep with loss scaling: test_step.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/error.h"
#include "test_util/error_message.h"
#include "train/loss_scaler.h"
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

TEST(DynamicLossScaler, OptionsNameTheFieldOfABadValue) {
  EXPECT_NO_THROW(LossScalerOptions{}.validate());
  const std::pair<const char*, LossScalerOptions> cases[] = {
      {"init_scale", {std::nan(""), 2.0, 0.5, 1}},
      {"growth_factor", {1.0, 1.0, 0.5, 1}},
      {"backoff_factor", {1.0, 2.0, 1.0, 1}},
      {"growth_interval", {1.0, 2.0, 0.5, 0}},
  };
  for (const auto& [field, options] : cases) {
    const std::string message = test_util::message_of<UsageError>([&o = options] { o.validate(); });
    EXPECT_EQ(message.rfind(std::string(field) + " ", 0), 0u) << field << ": " << message;
  }
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

}  // namespace
}  // namespace chexscale::train
