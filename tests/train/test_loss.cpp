// The CheXNet loss: unweighted BCE-with-logits and the paper's per-class weighting.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "train/loss.h"

namespace chexscale::train {
namespace {

double bce(double x, double y, double wp = 1, double wn = 1) {
  const double p = 1.0 / (1.0 + std::exp(-x));
  return -(wp * y * std::log(p) + wn * (1 - y) * std::log(1 - p));
}

TEST(Loss, ClassWeightsFollowThePaper) {
  // 10 examples; class 0 has 2 positives, class 1 has 5, class 2 none (neutral weights).
  const ClassWeights w = class_weights_from_counts({2, 5, 0}, {10, 10, 10});
  EXPECT_FLOAT_EQ(w.positive[0].item<float>(), 0.8f);
  EXPECT_FLOAT_EQ(w.negative[0].item<float>(), 0.2f);
  EXPECT_FLOAT_EQ(w.positive[1].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(w.negative[1].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(w.positive[2].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(w.negative[2].item<float>(), 1.0f);
  EXPECT_ANY_THROW(class_weights_from_counts({11}, {10}));
}

// A class whose every training example is positive has no negative frequency to weigh its
// positives by: neutral weights, not a zero positive term (the loss would ignore the class).
TEST(Loss, ClassWithOnlyPositivesGetsNeutralWeights) {
  const ClassWeights w = class_weights_from_counts({4, 1}, {4, 4});
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
  BceWithLogitsLoss loss(class_weights_from_counts({1, 3}, {4, 4}));  // w+ = .75/.25, w- = .25/.75
  const double expected = (bce(0.5, 1, 0.75, 0.25) + bce(-1.0, 0, 0.25, 0.75) +
                           bce(2.0, 0, 0.75, 0.25) + bce(0.0, 1, 0.25, 0.75)) /
                          4;
  EXPECT_NEAR(loss(logits, labels).item<double>(), expected, 1e-6);
}

TEST(Loss, StableForLargeLogits) {
  const auto logits = torch::tensor({{80.0, -80.0}});
  const auto labels = torch::tensor({{0.0, 1.0}});
  BceWithLogitsLoss loss(class_weights_from_counts({1, 1}, {2, 2}));
  const double v = loss(logits, labels).item<double>();
  EXPECT_TRUE(std::isfinite(v));
  EXPECT_NEAR(v, 0.5 * 80.0, 1e-3);  // each term 0.5 * 80, mean of two
}

// --uncertain ignore: NaN labels are masked out. By hand: the known entries are (0.5, y=1) and
// (2.0, y=0) of class 0 and (0.0, y=1) of class 1; the mean is over those three.
TEST(Loss, MaskedEntriesAreLeftOut) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto logits = torch::tensor({{0.5, -1.0}, {2.0, 0.0}});
  const auto labels = torch::tensor({{1.f, nan}, {0.f, 1.f}});
  const double unweighted = (bce(0.5, 1) + bce(2.0, 0) + bce(0.0, 1)) / 3;
  EXPECT_NEAR(BceWithLogitsLoss()(logits, labels).item<double>(), unweighted, 1e-6);
  // Weights over the known labels: class 0 has 1 positive of 2 known, class 1 has 1 of 1
  // (neutral weights, as a class with only positives).
  BceWithLogitsLoss weighted(class_weights_from_counts({1, 1}, {2, 1}));
  const double expected = (bce(0.5, 1, 0.5, 0.5) + bce(2.0, 0, 0.5, 0.5) + bce(0.0, 1)) / 3;
  EXPECT_NEAR(weighted(logits, labels).item<double>(), expected, 1e-6);
  // The masked entry gets no gradient.
  auto x = logits.clone().requires_grad_(true);
  weighted(x, labels).backward();
  EXPECT_EQ(x.grad()[0][1].item<float>(), 0.f);
  EXPECT_NE(x.grad()[0][0].item<float>(), 0.f);
  // Nothing known: 0, not NaN.
  EXPECT_EQ(BceWithLogitsLoss()(logits, torch::full({2, 2}, nan)).item<double>(), 0.0);
}

// The masked loss computed on the device (no read-back) equals, value and gradient, the mean of
// the known entries taken row by row in double precision, on a batch with a third of the labels
// unknown; a batch with nothing known gives 0 and a zero gradient.
TEST(Loss, MaskedLossEqualsTheMeanOverKnownEntries) {
  torch::manual_seed(7);
  const int64_t b = 16;
  const int64_t c = 5;
  const auto logits = torch::randn({b, c}) * 3;
  auto labels = (torch::rand({b, c}) < 0.3).to(torch::kFloat32);
  labels.masked_fill_(torch::rand({b, c}) < 0.33, std::numeric_limits<float>::quiet_NaN());
  const std::vector<int64_t> positives = {3, 2, 5, 1, 4};
  const std::vector<int64_t> known = {10, 11, 9, 12, 10};
  const ClassWeights w = class_weights_from_counts(positives, known);
  double sum = 0;
  int64_t count = 0;
  auto expected_grad = torch::zeros({b, c}, torch::kFloat64);
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      const float y = labels[i][j].item<float>();
      if (std::isnan(y)) continue;
      const double x = logits[i][j].item<double>();
      const double wp = w.positive[j].item<double>();
      const double wn = w.negative[j].item<double>();
      sum += bce(x, y, wp, wn);
      const double p = 1.0 / (1.0 + std::exp(-x));
      expected_grad[i][j] = wp * y * (p - 1) + wn * (1 - y) * p;  // d bce / dx
      ++count;
    }
  }
  ASSERT_GT(count, b * c / 2);
  ASSERT_LT(count, b * c);
  auto x = logits.clone().requires_grad_(true);
  const auto value = BceWithLogitsLoss(w)(x, labels);
  EXPECT_NEAR(value.item<double>(), sum / static_cast<double>(count), 1e-6);
  value.backward();
  EXPECT_TRUE(torch::allclose(x.grad().to(torch::kFloat64), expected_grad / count, 1e-5, 1e-7));

  auto none = logits.clone().requires_grad_(true);
  const auto zero = BceWithLogitsLoss(w)(none, torch::full({b, c}, NAN));
  EXPECT_EQ(zero.item<double>(), 0.0);
  zero.backward();
  EXPECT_EQ(none.grad().abs().sum().item<double>(), 0.0);
}

TEST(Loss, ShapeMismatchIsAnError) {
  EXPECT_ANY_THROW(BceWithLogitsLoss()(torch::zeros({2, 3}), torch::zeros({2, 4})));
}

}  // namespace
}  // namespace chexscale::train
