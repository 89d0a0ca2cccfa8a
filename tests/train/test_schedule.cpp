// The LR schedule: linear scaling, Horovod warm-up, ReduceLROnPlateau (factor, patience).
#include <gtest/gtest.h>

#include <limits>
#include <utility>

#include "common/error.h"
#include "test_util/error_message.h"
#include "train/schedule.h"

namespace chexscale::train {
namespace {

TEST(Schedule, ConstantWithoutWarmupOrScaling) {
  LrSchedule s({.base_lr = 1e-3});
  EXPECT_DOUBLE_EQ(s.lr_at(0.1), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr_at(7.5), 1e-3);
}

TEST(Schedule, LinearScalingWithWorldSize) {
  LrSchedule s({.base_lr = 1e-3, .scale_lr = true, .world_size = 4});
  EXPECT_DOUBLE_EQ(s.target_lr(), 4e-3);
  EXPECT_DOUBLE_EQ(s.lr_at(0.5), 4e-3);
}

TEST(Schedule, HorovodWarmupRampsFromTheUnscaledLr) {
  LrSchedule s({.base_lr = 1e-3, .scale_lr = true, .world_size = 8, .warmup_epochs = 5});
  EXPECT_DOUBLE_EQ(s.lr_at(0), 1e-3);
  EXPECT_NEAR(s.lr_at(2.5), 1e-3 + (8e-3 - 1e-3) * 0.5, 1e-15);
  EXPECT_DOUBLE_EQ(s.lr_at(5), 8e-3);
  EXPECT_DOUBLE_EQ(s.lr_at(9), 8e-3);
}

TEST(Schedule, WarmupWithoutScalingRampsFromZero) {
  LrSchedule s({.base_lr = 2e-3, .warmup_epochs = 2});
  EXPECT_DOUBLE_EQ(s.lr_at(0.5), 0.5e-3);
  EXPECT_DOUBLE_EQ(s.lr_at(2), 2e-3);
}

TEST(Schedule, PlateauReducesAfterPatienceEpochsWithoutImprovement) {
  LrSchedule s({.base_lr = 1e-3, .plateau_factor = 0.1, .plateau_patience = 1});
  EXPECT_FALSE(s.observe_val_loss(0.50));  // first: best
  EXPECT_FALSE(s.observe_val_loss(0.40));  // improved
  EXPECT_FALSE(s.observe_val_loss(0.41));  // 1 bad epoch: within patience
  EXPECT_TRUE(s.observe_val_loss(0.40));   // 2nd bad epoch (not better than 0.40): reduce
  EXPECT_NEAR(s.lr_at(10), 1e-4, 1e-18);
  EXPECT_FALSE(s.observe_val_loss(0.30));  // improved again
  EXPECT_NEAR(s.lr_at(10), 1e-4, 1e-18);
  EXPECT_EQ(s.state().bad_epochs, 0);
  EXPECT_DOUBLE_EQ(*s.state().best_loss, 0.30);
}

// The expected sequences are those of PyTorch 1.13's ReduceLROnPlateau (mode min, threshold
// 1e-4 relative) on the same losses, run once with python3 and written here: lr 1e-3, 1e-3,
// 1e-4 (reduced), 1e-4, 1e-5 (reduced); and with patience 0, min_lr 2e-5: 1e-3, 1e-4, 2e-5, 2e-5.
TEST(Schedule, PlateauCountsAfreshAfterAReductionAndIgnoresTinyImprovements) {
  LrSchedule s({.base_lr = 1e-3, .plateau_factor = 0.1, .plateau_patience = 1});
  EXPECT_FALSE(s.observe_val_loss(1.0));
  EXPECT_FALSE(s.observe_val_loss(0.99995));  // 0.005% better: under the threshold, a bad epoch
  EXPECT_TRUE(s.observe_val_loss(0.99995));   // 2nd bad epoch: reduce
  EXPECT_NEAR(s.lr_at(10), 1e-4, 1e-18);
  EXPECT_FALSE(s.observe_val_loss(0.99995));  // counting starts again: 1 bad epoch
  EXPECT_TRUE(s.observe_val_loss(0.99995));
  EXPECT_NEAR(s.lr_at(10), 1e-5, 1e-18);
}

TEST(Schedule, PlateauNeverGoesBelowMinLr) {
  LrSchedule s({.base_lr = 1e-3, .plateau_factor = 0.1, .plateau_patience = 0, .min_lr = 2e-5});
  s.observe_val_loss(1.0);
  EXPECT_TRUE(s.observe_val_loss(1.0));
  EXPECT_NEAR(s.lr_at(10), 1e-4, 1e-18);
  EXPECT_TRUE(s.observe_val_loss(1.0));
  EXPECT_DOUBLE_EQ(s.lr_at(10), 2e-5);
  s.observe_val_loss(1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(10), 2e-5);
}

TEST(Schedule, ResumesFromSavedPlateauState) {
  LrSchedule s({.base_lr = 1e-3}, PlateauState{0.2, 1, 0.1});
  EXPECT_NEAR(s.lr_at(3), 1e-4, 1e-18);
  EXPECT_TRUE(s.observe_val_loss(0.25));  // second bad epoch in a row
  EXPECT_NEAR(s.lr_at(3), 1e-5, 1e-18);
}

TEST(Schedule, RejectsBadOptions) {
  EXPECT_THROW(LrSchedule({.base_lr = 0}), UsageError);
  EXPECT_THROW(LrSchedule({.base_lr = 1e-3, .plateau_factor = 1.5}), UsageError);
  EXPECT_THROW(LrSchedule({.base_lr = 1e-3, .warmup_epochs = -1}), UsageError);
}

// NaN is a usage error naming the field (--plateau-factor nan and --warmup-epochs nan were
// accepted).
TEST(OptionChecks, ScheduleRejectsNaN) {
  auto make = [](ScheduleOptions o) { return [o] { LrSchedule s(o); }; };
  test_util::expect_usage_error_naming(make({.base_lr = std::numeric_limits<double>::quiet_NaN()}),
                                       "base_lr");
  test_util::expect_usage_error_naming(
      make({.warmup_epochs = std::numeric_limits<double>::quiet_NaN()}), "warmup_epochs");
  test_util::expect_usage_error_naming(
      make({.plateau_factor = std::numeric_limits<double>::quiet_NaN()}), "plateau_factor");
}

TEST(ScheduleOptions, EachBadValueIsRefusedNamingItsField) {
  EXPECT_NO_THROW(ScheduleOptions{}.validate());
  const std::pair<const char*, ScheduleOptions> cases[] = {
      {"base_lr", {.base_lr = std::numeric_limits<double>::infinity()}},
      {"world_size", {.world_size = 0}},
      {"warmup_epochs", {.warmup_epochs = -1}},
      {"plateau_factor", {.plateau_factor = 0}},
      {"plateau_patience", {.plateau_patience = -1}},
  };
  for (const auto& [field, options] : cases) {
    test_util::expect_usage_error_naming([&o = options] { o.validate(); }, field);
  }
}

}  // namespace
}  // namespace chexscale::train
