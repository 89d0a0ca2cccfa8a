// Where a resumed run continues in its epoch when the job's layout (workers, batch size) changed.
#include <gtest/gtest.h>

#include "train/run_checkpoint.h"

namespace chexscale::train {
namespace {

// Resuming with another layout: the prefix of the epoch's permutation that the old layout
// consumed is skipped in whole global batches of the new one, rounded up so that no example
// comes twice in one epoch, and never past the epoch's end. Values worked out by hand.
TEST(Checkpoint, ResumePositionSkipsTheConsumedPrefixInNewGlobalBatches) {
  RunState saved;
  saved.world_size = 2;
  saved.batch_size = 3;
  saved.position.epoch = 4;
  saved.position.batches_done = 3;
  saved.position.samples_done = 18;  // 3 steps x 2 workers x 3
  saved.position.global_step = 40;
  auto expect_position = [&](int world, int64_t batch, int64_t batches_per_epoch,
                             int64_t batches_done, int64_t samples_done) {
    const RunPosition p = resume_position(saved, world, batch, batches_per_epoch);
    EXPECT_EQ(p.epoch, 4) << world << "x" << batch;
    EXPECT_EQ(p.global_step, 40) << world << "x" << batch;
    EXPECT_EQ(p.batches_done, batches_done) << world << "x" << batch;
    EXPECT_EQ(p.samples_done, samples_done) << world << "x" << batch;
  };
  expect_position(2, 3, 100, 3, 18);  // same layout: as saved
  expect_position(1, 4, 100, 5, 20);  // 18 / 4 = 4.5 global batches: continue after 5
  expect_position(3, 3, 100, 2, 18);  // 18 / 9 = 2 exactly
  expect_position(2, 4, 100, 3, 24);  // the batch size alone changed: 18 / 8 = 2.25 -> 3
  expect_position(1, 4, 4, 4, 16);    // an epoch of 4 batches: at its end, not past it
}

}  // namespace
}  // namespace chexscale::train
