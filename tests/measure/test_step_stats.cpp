// Step statistics: interpolated quantiles and the breakdown of the median step.
#include <gtest/gtest.h>

#include "common/error.h"
#include "measure/step_stats.h"

namespace chexscale::measure {
namespace {

TEST(StepStats, QuantilesInterpolateBetweenOrderStatistics) {
  // Sorted: 1 2 3 4 10; positions q*(n-1).
  const std::vector<double> v{4, 1, 10, 3, 2};
  EXPECT_DOUBLE_EQ(quantile(v, 0.5), 3.0);
  EXPECT_DOUBLE_EQ(quantile(v, 0.1), 1.4);  // 1 + 0.4 * (2 - 1)
  EXPECT_DOUBLE_EQ(quantile(v, 0.9), 7.6);  // 4 + 0.6 * (10 - 4)
  EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile(v, 1.0), 10.0);
  const report::TimeSummary s = summarise(v);
  EXPECT_DOUBLE_EQ(s.mean, 4.0);
  EXPECT_DOUBLE_EQ(s.median, 3.0);
  EXPECT_THROW(quantile({}, 0.5), Error);
}

StepTimes step(double fwd, double bwd, double total) {
  StepTimes t;
  t.forward = fwd;
  t.backward = bwd;
  t.total = total;
  return t;
}

TEST(StepStats, MedianStepIsTheStepOfMedianTotal) {
  const StepTimes m = median_step({step(1, 5, 9), step(2, 2, 5), step(3, 3, 7)});
  EXPECT_DOUBLE_EQ(m.total, 7);
  EXPECT_DOUBLE_EQ(m.forward, 3);
  EXPECT_DOUBLE_EQ(m.backward, 3);
}

TEST(StepStats, EvenCountAveragesTheTwoMiddleSteps) {
  const StepTimes m = median_step({step(1, 1, 2), step(2, 4, 8), step(1, 3, 6), step(9, 9, 20)});
  EXPECT_DOUBLE_EQ(m.total, 7);      // (6 + 8) / 2
  EXPECT_DOUBLE_EQ(m.forward, 1.5);  // (1 + 2) / 2
  EXPECT_DOUBLE_EQ(m.backward, 3.5);
  EXPECT_LE(m.forward + m.backward, m.total);
}

}  // namespace
}  // namespace chexscale::measure
