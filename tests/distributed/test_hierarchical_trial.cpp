// --hierarchical=auto's trial (hierarchical_trial.h): the path of each of its steps, the times it
// keeps, and the choice from the sums over the ranks.
#include <gtest/gtest.h>

#include <vector>

#include "common/error.h"
#include "distributed/hierarchical_trial.h"

namespace chexscale::distributed {
namespace {

// Runs the trial's steps with `seconds[i]` for step i; the path each step took.
std::vector<bool> run_steps(HierarchicalTrial& trial, const std::vector<double>& seconds) {
  std::vector<bool> paths;
  for (size_t i = 0; i < seconds.size(); ++i) {
    paths.push_back(trial.next_hierarchical());
    EXPECT_EQ(trial.record(seconds[i]), i + 1 == HierarchicalTrial::kSteps) << "step " << i;
  }
  return paths;
}

TEST(HierarchicalTrial, WarmsBothPathsThenTimesFlatHierarchicalHierarchicalFlat) {
  HierarchicalTrial trial;
  EXPECT_EQ(run_steps(trial, {100.0, 50.0, 1.0, 2.0, 4.0, 8.0}),
            (std::vector<bool>{false, true, false, true, true, false}));
  // The untimed warm-up steps (100 s flat, 50 s hierarchical) count for neither.
  EXPECT_EQ(trial.totals()[0], 1.0 + 8.0);
  EXPECT_EQ(trial.totals()[1], 2.0 + 4.0);
  EXPECT_EQ(HierarchicalTrial::kTimedStepsEach, 2);
  EXPECT_FALSE(trial.choice().has_value());
}

TEST(HierarchicalTrial, KeepsHierarchicalOnlyWhenItsSumIsTenPercentBelowFlat) {
  for (const auto& [flat, hierarchical, want] : {std::tuple{9.0, 6.0, true},
                                                 {6.0, 9.0, false},
                                                 {5.0, 5.0, false},
                                                 {10.0, 9.5, false},
                                                 {10.0, 8.9, true}}) {
    HierarchicalTrial trial;
    run_steps(trial, {1, 1, 1, 1, 1, 1});
    trial.decide(flat, hierarchical);
    ASSERT_TRUE(trial.choice().has_value());
    EXPECT_EQ(*trial.choice(), want) << flat << " " << hierarchical;
    // After the choice every step takes it, and nothing more is recorded.
    for (int step = 0; step < 3; ++step) {
      EXPECT_EQ(trial.next_hierarchical(), want);
      EXPECT_FALSE(trial.record(100.0));
    }
  }
}

TEST(HierarchicalTrial, DecidingBeforeTheLastStepIsAnError) {
  HierarchicalTrial trial;
  run_steps(trial, {1, 1, 1});
  EXPECT_THROW(trial.decide(1.0, 2.0), Error);
  EXPECT_FALSE(trial.choice().has_value());
}

}  // namespace
}  // namespace chexscale::distributed
