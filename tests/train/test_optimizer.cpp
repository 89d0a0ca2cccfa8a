// The optimizers: every kind's name parses back to it, a bad one is a usage error listing the
// valid ones, each kind builds its optimizer, and bad option values are refused naming the field.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "common/error.h"
#include "test_util/error_message.h"
#include "train/fused_adam.h"
#include "train/optimizer.h"

namespace chexscale::train {
namespace {

TEST(OptimizerKind, EveryNameRoundTripsAndABadOneListsTheValidOnes) {
  for (const OptimizerKind kind : {OptimizerKind::kAdam, OptimizerKind::kSgd}) {
    EXPECT_EQ(parse_optimizer_kind(to_string(kind)), kind) << to_string(kind);
  }
  EXPECT_STREQ(to_string(OptimizerKind::kSgd), "sgd");
  EXPECT_EQ(test_util::message_of<UsageError>([] { parse_optimizer_kind("adamw"); }),
            "optimizer 'adamw': choose adam or sgd");
}

TEST(OptimizerKind, EachKindBuildsItsOptimizer) {
  const std::vector<torch::Tensor> params{torch::zeros({2}, torch::requires_grad())};
  OptimizerOptions o;
  EXPECT_NE(dynamic_cast<FusedAdam*>(make_optimizer(params, o).get()), nullptr);
  o.kind = OptimizerKind::kSgd;
  EXPECT_NE(dynamic_cast<torch::optim::SGD*>(make_optimizer(params, o).get()), nullptr);
}

// NaN, infinity and out-of-range values are usage errors naming the field, before LibTorch sees
// them (--lr nan was a LibTorch error, exit 1).
TEST(OptionChecks, OptimizerRejectsNonFiniteAndOutOfRangeValues) {
  const std::vector<torch::Tensor> params{torch::zeros({2}, torch::requires_grad())};
  auto make = [&](OptimizerOptions o) { return [params, o] { make_optimizer(params, o); }; };
  for (double lr :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(), 0.0}) {
    test_util::expect_usage_error_naming(make({.lr = lr}), "lr");
  }
  test_util::expect_usage_error_naming(make({.beta1 = 1.5}), "beta1");
  test_util::expect_usage_error_naming(make({.beta2 = std::numeric_limits<double>::quiet_NaN()}),
                                       "beta2");
  test_util::expect_usage_error_naming(make({.weight_decay = -1}), "weight_decay");
  test_util::expect_usage_error_naming(
      make({.kind = OptimizerKind::kSgd, .momentum = std::numeric_limits<double>::quiet_NaN()}),
      "momentum");
  EXPECT_NE(make_optimizer(params, {}), nullptr);
}

}  // namespace
}  // namespace chexscale::train
