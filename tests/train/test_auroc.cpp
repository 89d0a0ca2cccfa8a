// AUROC against brute-force pair counting on fixed vectors, with ties and undefined classes.
#include <gtest/gtest.h>

#include <limits>

#include "train/auroc.h"

namespace chexscale::train {
namespace {

// Reference: over every (positive, negative) pair, 1 if the positive scores higher, 0.5 on a tie.
double pair_count_auroc(const std::vector<double>& s, const std::vector<int>& y) {
  double wins = 0;
  double pairs = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    for (size_t j = 0; j < s.size(); ++j) {
      if (y[i] != 1 || y[j] != 0) continue;
      pairs += 1;
      wins += s[i] > s[j] ? 1.0 : (s[i] == s[j] ? 0.5 : 0.0);
    }
  }
  return wins / pairs;
}

TEST(Auroc, PerfectInvertedAndHandValues) {
  EXPECT_DOUBLE_EQ(*auroc({0.1, 0.2, 0.8, 0.9}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(*auroc({0.9, 0.8, 0.2, 0.1}, {0, 0, 1, 1}), 0.0);
  // Pairs (pos, neg): (0.35,0.1) win, (0.35,0.4) loss, (0.8,0.1) win, (0.8,0.4) win: 3/4.
  EXPECT_DOUBLE_EQ(*auroc({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1}), 0.75);
}

TEST(Auroc, TiesCountHalf) {
  // Every score equal: every pair is a tie.
  EXPECT_DOUBLE_EQ(*auroc({0.5, 0.5, 0.5, 0.5, 0.5}, {1, 0, 1, 0, 0}), 0.5);
  // One tied pair among 4: (0.3 vs 0.3) = 0.5, the other three wins: 3.5 / 4.
  EXPECT_DOUBLE_EQ(*auroc({0.3, 0.3, 0.9, 0.1}, {1, 0, 1, 0}), 0.875);
}

TEST(Auroc, MatchesPairCountingOnFixedVectorsWithManyTies) {
  std::vector<double> s;
  std::vector<int> y;
  for (int i = 0; i < 97; ++i) {
    s.push_back(static_cast<double>((i * 37) % 11) / 10.0);  // 11 distinct values: heavy ties
    y.push_back((i * 13) % 7 < 3 ? 1 : 0);
  }
  EXPECT_NEAR(*auroc(s, y), pair_count_auroc(s, y), 1e-12);
}

TEST(Auroc, UndefinedWithoutPositivesOrNegatives) {
  EXPECT_FALSE(auroc({0.1, 0.2, 0.3}, {0, 0, 0}).has_value());
  EXPECT_FALSE(auroc({0.1, 0.2, 0.3}, {1, 1, 1}).has_value());
  EXPECT_FALSE(auroc({}, {}).has_value());
}

TEST(Auroc, UndefinedWithANaNScore) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(auroc({0.1, nan, 0.8, 0.9}, {0, 0, 1, 1}).has_value());
  EXPECT_FALSE(auroc({nan, nan, nan, nan}, {0, 1, 0, 1}).has_value());
  // Infinite scores are still ordered.
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_DOUBLE_EQ(*auroc({-inf, 0.2, inf, 0.9}, {0, 0, 1, 1}), 1.0);
}

TEST(Auroc, PerClassNaNScoresMakeOnlyTheirClassUndefined) {
  // Class 0 perfect, class 1 inverted with a NaN score, class 2 inverted.
  const auto labels = torch::tensor({0, 0, 1, 1}).reshape({4, 1}).repeat({1, 3});
  auto scores = torch::tensor({{0.1, 0.9, 0.9}, {0.2, 0.8, 0.8}, {0.8, 0.2, 0.2}, {0.9, 0.1, 0.1}},
                              torch::kFloat64);
  scores[2][1] = std::numeric_limits<double>::quiet_NaN();
  const AurocReport r = per_class_auroc(scores, labels, {"a", "b", "c"});
  ASSERT_EQ(r.per_class.size(), 3u);
  EXPECT_DOUBLE_EQ(*r.per_class[0], 1.0);
  EXPECT_FALSE(r.per_class[1].has_value());
  EXPECT_DOUBLE_EQ(*r.per_class[2], 0.0);
  EXPECT_DOUBLE_EQ(*r.mean, 0.5);  // over the two defined classes
}

TEST(Auroc, RejectsNonBinaryLabels) {
  EXPECT_ANY_THROW(auroc({0.1, 0.2}, {0, 2}));
}

TEST(Auroc, PerClassSkipsUndefinedClassesInTheMean) {
  // Class 0: perfect; class 1: all negative (undefined); class 2: inverted.
  const auto scores =
      torch::tensor({{0.9, 0.1, 0.2}, {0.8, 0.2, 0.1}, {0.1, 0.3, 0.9}}, torch::kFloat64);
  const auto labels = torch::tensor({{1, 0, 1}, {1, 0, 1}, {0, 0, 0}}, torch::kFloat32);
  const AurocReport r = per_class_auroc(scores, labels, {"a", "b", "c"});
  ASSERT_EQ(r.per_class.size(), 3u);
  EXPECT_DOUBLE_EQ(*r.per_class[0], 1.0);
  EXPECT_FALSE(r.per_class[1].has_value());
  EXPECT_DOUBLE_EQ(*r.per_class[2], 0.0);
  ASSERT_TRUE(r.mean.has_value());
  EXPECT_DOUBLE_EQ(*r.mean, 0.5);
  EXPECT_EQ(r.positives, (std::vector<int64_t>{2, 0, 2}));
  EXPECT_EQ(r.negatives, (std::vector<int64_t>{1, 3, 1}));
}

TEST(Auroc, PerClassMeanUndefinedWhenNoClassIs) {
  const auto r = per_class_auroc(torch::rand({4, 2}), torch::zeros({4, 2}), {"a", "b"});
  EXPECT_FALSE(r.mean.has_value());
}

// A NaN label is not known: that example is left out of its class's AUROC and counts.
TEST(Auroc, PerClassLeavesUnknownLabelsOut) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Class 0: with the NaN row (score 0.95, would be a negative above both positives) left out,
  // the positives 0.9 and 0.8 outrank the negatives 0.1 and 0.2: AUROC 1.
  const auto scores = torch::tensor({{0.9}, {0.8}, {0.95}, {0.1}, {0.2}}, torch::kFloat64);
  const auto labels = torch::tensor({{1.f}, {1.f}, {nan}, {0.f}, {0.f}});
  const AurocReport r = per_class_auroc(scores, labels, {"Edema"});
  ASSERT_TRUE(r.per_class[0].has_value());
  EXPECT_DOUBLE_EQ(*r.per_class[0], 1.0);
  EXPECT_EQ(r.positives, (std::vector<int64_t>{2}));
  EXPECT_EQ(r.negatives, (std::vector<int64_t>{2}));
  EXPECT_EQ(r.labels, (std::vector<std::string>{"Edema"}));
}

}  // namespace
}  // namespace chexscale::train
