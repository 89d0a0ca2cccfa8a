// The optimizer's and the schedule's options are checked before LibTorch sees them: NaN, infinity
// and out-of-range values are usage errors naming the flag (--lr nan was a LibTorch error, exit
// 1; --plateau-factor nan and --warmup-epochs nan were accepted).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/error.h"
#include "train/optimizer.h"
#include "train/schedule.h"

namespace chexscale::train {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

void expect_usage_error_naming(const std::function<void()>& make, const std::string& flag) {
  try {
    make();
    ADD_FAILURE() << "accepted: " << flag;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
  }
}

TEST(OptionChecks, OptimizerRejectsNonFiniteAndOutOfRangeValues) {
  const std::vector<torch::Tensor> params{torch::zeros({2}, torch::requires_grad())};
  auto make = [&](OptimizerOptions o) { return [params, o] { make_optimizer(params, o); }; };
  for (double lr : {kNaN, kInf, 0.0}) {
    expect_usage_error_naming(make({.lr = lr}), "--lr");
  }
  expect_usage_error_naming(make({.beta1 = 1.5}), "--beta1");
  expect_usage_error_naming(make({.beta2 = kNaN}), "--beta2");
  expect_usage_error_naming(make({.weight_decay = -1}), "--weight-decay");
  expect_usage_error_naming(make({.name = "sgd", .momentum = kNaN}), "--momentum");
  EXPECT_NE(make_optimizer(params, {}), nullptr);
}

TEST(OptionChecks, ScheduleRejectsNaN) {
  auto make = [](ScheduleOptions o) { return [o] { LrSchedule s(o); }; };
  expect_usage_error_naming(make({.base_lr = kNaN}), "--lr");
  expect_usage_error_naming(make({.warmup_epochs = kNaN}), "--warmup-epochs");
  expect_usage_error_naming(make({.plateau_factor = kNaN}), "plateau factor");
}

}  // namespace
}  // namespace chexscale::train
