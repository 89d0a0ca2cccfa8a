// The CheXNet loss: unweighted BCE-with-logits and the paper's per-class weighting.
#include <gtest/gtest.h>

#include <cmath>

#include "train/loss.h"

namespace chexscale::train {
namespace {

double bce(double x, double y, double wp = 1, double wn = 1) {
  const double p = 1.0 / (1.0 + std::exp(-x));
  return -(wp * y * std::log(p) + wn * (1 - y) * std::log(1 - p));
}

TEST(Loss, ClassWeightsFollowThePaper) {
  // 10 examples; class 0 has 2 positives, class 1 has 5, class 2 none (neutral weights).
  const ClassWeights w = class_weights_from_counts({2, 5, 0}, 10);
  EXPECT_FLOAT_EQ(w.positive[0].item<float>(), 0.8f);
  EXPECT_FLOAT_EQ(w.negative[0].item<float>(), 0.2f);
  EXPECT_FLOAT_EQ(w.positive[1].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(w.negative[1].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(w.positive[2].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(w.negative[2].item<float>(), 1.0f);
  EXPECT_ANY_THROW(class_weights_from_counts({11}, 10));
}

// A class whose every training example is positive has no negative frequency to weigh its
// positives by: neutral weights, not a zero positive term (the loss would ignore the class).
TEST(Loss, ClassWithOnlyPositivesGetsNeutralWeights) {
  const ClassWeights w = class_weights_from_counts({4, 1}, 4);
  EXPECT_FLOAT_EQ(w.positive[0].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(w.negative[0].item<float>(), 1.0f);
  BceWithLogitsLoss loss(w);  // class 1: w+ = 3/4, w- = 1/4
  const auto logits = torch::tensor({{-1.0, 0.5}});
  const auto labels = torch::tensor({{1.0, 0.0}});
  const double expected = (bce(-1.0, 1) + bce(0.5, 0, 0.75, 0.25)) / 2;
  EXPECT_NEAR(loss(logits, labels).item<double>(), expected, 1e-6);
}

TEST(Loss, UnweightedMatchesTheFormula) {
  const auto logits = torch::tensor({{0.5, -1.0}, {2.0, 0.0}});
  const auto labels = torch::tensor({{1.0, 0.0}, {0.0, 1.0}});
  const double expected = (bce(0.5, 1) + bce(-1.0, 0) + bce(2.0, 0) + bce(0.0, 1)) / 4;
  EXPECT_NEAR(BceWithLogitsLoss()(logits, labels).item<double>(), expected, 1e-6);
}

TEST(Loss, WeightedMatchesTheFormula) {
  const auto logits = torch::tensor({{0.5, -1.0}, {2.0, 0.0}});
  const auto labels = torch::tensor({{1.0, 0.0}, {0.0, 1.0}});
  BceWithLogitsLoss loss(class_weights_from_counts({1, 3}, 4));  // w+ = .75/.25, w- = .25/.75
  const double expected = (bce(0.5, 1, 0.75, 0.25) + bce(-1.0, 0, 0.25, 0.75) +
                           bce(2.0, 0, 0.75, 0.25) + bce(0.0, 1, 0.25, 0.75)) /
                          4;
  EXPECT_NEAR(loss(logits, labels).item<double>(), expected, 1e-6);
}

TEST(Loss, StableForLargeLogits) {
  const auto logits = torch::tensor({{80.0, -80.0}});
  const auto labels = torch::tensor({{0.0, 1.0}});
  BceWithLogitsLoss loss(class_weights_from_counts({1, 1}, 2));
  const double v = loss(logits, labels).item<double>();
  EXPECT_TRUE(std::isfinite(v));
  EXPECT_NEAR(v, 0.5 * 80.0, 1e-3);  // each term 0.5 * 80, mean of two
}

TEST(Loss, ShapeMismatchIsAnError) {
  EXPECT_ANY_THROW(BceWithLogitsLoss()(torch::zeros({2, 3}), torch::zeros({2, 4})));
}

}  // namespace
}  // namespace chexscale::train
