// StepTimes: the phase table names each phase once and points at its own field; sums and scaling
// reach every field, total included.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/step_times.h"

namespace chexscale {
namespace {

// Each field a different value, so a swapped or missed field shows.
StepTimes distinct_times() {
  StepTimes t;
  t.data_wait = 1;
  t.forward = 2;
  t.backward = 4;
  t.comm_exposed = 8;
  t.optimizer = 16;
  t.total = 32;
  return t;
}

TEST(StepTimes, PhaseTableNamesEachPhaseInOrderWithItsField) {
  std::vector<std::string> names;
  for (const StepPhase& p : kStepPhases)
    names.emplace_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"data_wait", "forward", "backward", "comm_exposed",
                                             "optimizer"}));
  const StepTimes t = distinct_times();
  std::vector<double> values;
  for (const StepPhase& p : kStepPhases)
    values.push_back(t.*p.seconds);
  EXPECT_EQ(values, (std::vector<double>{1, 2, 4, 8, 16}));
  std::set<std::string> labels;
  for (const StepPhase& p : kStepPhases)
    labels.insert(p.label);
  EXPECT_EQ(labels.size(), kStepPhases.size());
  EXPECT_EQ(labels.count("exposed comm"), 1u);
}

TEST(StepTimes, SumAddsEveryFieldToItself) {
  StepTimes sum = distinct_times();
  StepTimes more = distinct_times().scaled(10);
  sum += more;
  EXPECT_DOUBLE_EQ(sum.data_wait, 11);
  EXPECT_DOUBLE_EQ(sum.forward, 22);
  EXPECT_DOUBLE_EQ(sum.backward, 44);
  EXPECT_DOUBLE_EQ(sum.comm_exposed, 88);
  EXPECT_DOUBLE_EQ(sum.optimizer, 176);
  EXPECT_DOUBLE_EQ(sum.total, 352);
}

TEST(StepTimes, ScaledMultipliesEveryFieldAndLeavesTheOriginal) {
  const StepTimes t = distinct_times();
  const StepTimes half = t.scaled(0.5);
  EXPECT_DOUBLE_EQ(half.data_wait, 0.5);
  EXPECT_DOUBLE_EQ(half.forward, 1);
  EXPECT_DOUBLE_EQ(half.backward, 2);
  EXPECT_DOUBLE_EQ(half.comm_exposed, 4);
  EXPECT_DOUBLE_EQ(half.optimizer, 8);
  EXPECT_DOUBLE_EQ(half.total, 16);
  EXPECT_DOUBLE_EQ(t.total, 32);
}

}  // namespace
}  // namespace chexscale
