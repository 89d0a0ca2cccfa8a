// Where a resumed run continues in its epoch when the job's layout (workers, batch size) changed:
// at the exact sample offset the old layout had consumed, through one or two changes in an epoch.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "train/run_checkpoint.h"

namespace chexscale::train {
namespace {

constexpr int64_t kEpochSamples = 46;

RunState saved_state(int world, int64_t batch, RunPosition position) {
  RunState saved;
  saved.world_size = world;
  saved.batch_size = batch;
  saved.position = position;
  return saved;
}

// What a layout's pass from `offset` has consumed after `batches` of its `pass_batches` batches
// (the trainer's rule: the whole epoch once the pass is done).
int64_t consumed(int64_t offset, int64_t batches, int64_t pass_batches, int world, int64_t batch) {
  return batches == pass_batches ? kEpochSamples : offset + batches * batch * world;
}

// The same layout resumes where it was, inside its own pass (bit-exact resume).
TEST(RunCheckpoint, TheSameLayoutResumesItsOwnPassAsSaved) {
  const RunState saved = saved_state(2, 3,
                                     {.epoch = 4,
                                      .epoch_offset = 12,
                                      .batches_done = 3,
                                      .samples_done = 30,
                                      .global_step = 40,
                                      .epoch_loss_sum = 1.5,
                                      .epoch_loss_steps = 3});
  const RunPosition p = resume_position(saved, 2, 3, kEpochSamples);
  EXPECT_EQ(p.epoch, 4);
  EXPECT_EQ(p.epoch_offset, 12);
  EXPECT_EQ(p.batches_done, 3);
  EXPECT_EQ(p.samples_done, 30);
  EXPECT_EQ(p.global_step, 40);
  EXPECT_EQ(p.epoch_loss_steps, 3);
}

// Growing, shrinking or changing the batch size: a new pass from exactly the samples consumed,
// with the epoch's loss, its step counts and the global step kept.
TEST(RunCheckpoint, AnotherLayoutStartsANewPassAtTheSamplesConsumed) {
  const RunPosition at{.epoch = 4, .batches_done = 3, .samples_done = 18, .global_step = 40};
  for (const auto& [world, batch] : std::vector<std::pair<int, int64_t>>{{4, 3}, {1, 3}, {2, 4}}) {
    SCOPED_TRACE(::testing::Message() << world << " x " << batch);
    const RunPosition p = resume_position(saved_state(2, 3, at), world, batch, kEpochSamples);
    EXPECT_EQ(p.epoch, 4);
    EXPECT_EQ(p.epoch_offset, 18);  // 3 steps x 2 workers x 3: not rounded to a new batch
    EXPECT_EQ(p.batches_done, 0);
    EXPECT_EQ(p.samples_done, 18);
    EXPECT_EQ(p.global_step, 40);
  }
  // A checkpoint at the epoch's last batch counts it consumed (an older one may count the
  // padding, past the epoch): the new pass is empty.
  const RunPosition end{.epoch = 4, .batches_done = 8, .samples_done = 48, .global_step = 45};
  EXPECT_EQ(resume_position(saved_state(2, 3, end), 1, 3, kEpochSamples).epoch_offset,
            kEpochSamples);
}

// Two changes in one epoch, 2 -> 1 -> 4 workers of batch 3: the second pass's checkpoint counts
// from the offset its pass began at, so the third starts exactly where the second stopped; the
// three passes consume the epoch's positions 0..45 once each.
TEST(RunCheckpoint, TwoChangesInOneEpochChainTheirOffsets) {
  const RunPosition first{
      .epoch = 1, .batches_done = 2, .samples_done = consumed(0, 2, 8, 2, 3), .global_step = 10};
  RunPosition second = resume_position(saved_state(2, 3, first), 1, 3, kEpochSamples);
  ASSERT_EQ(second.epoch_offset, 12);
  second.batches_done = 5;  // 5 steps of 1 x 3
  second.samples_done = consumed(second.epoch_offset, 5, 12, 1, 3);
  second.global_step += 5;
  const RunPosition same = resume_position(saved_state(1, 3, second), 1, 3, kEpochSamples);
  EXPECT_EQ(same.epoch_offset, 12);
  EXPECT_EQ(same.batches_done, 5);
  const RunPosition third = resume_position(saved_state(1, 3, second), 4, 3, kEpochSamples);
  EXPECT_EQ(third.epoch, 1);
  EXPECT_EQ(third.epoch_offset, 27);  // 12 by the first pass, 15 by the second
  EXPECT_EQ(third.batches_done, 0);
  EXPECT_EQ(third.global_step, 15);
}

}  // namespace
}  // namespace chexscale::train
