// A run's checkpointed state through JSON: the position within a pass over an epoch (the offset
// the pass began at) round-trips, an older state without it reads as a whole pass, a bad one is
// a DataError naming its source.
#include <gtest/gtest.h>

#include "common/error.h"
#include "train/run_state.h"

namespace chexscale::train {
namespace {

RunState resumed_mid_pass() {
  RunState s;
  s.position = {
      .epoch = 2, .epoch_offset = 24, .batches_done = 3, .samples_done = 36, .global_step = 17};
  s.world_size = 4;
  s.batch_size = 1;
  s.label_names = {"a", "b"};
  return s;
}

TEST(RunState, ThePassOffsetRoundTrips) {
  const RunState s = parse_run_state(run_state_json(resumed_mid_pass()), "m.json");
  EXPECT_EQ(s.position.epoch, 2);
  EXPECT_EQ(s.position.epoch_offset, 24);
  EXPECT_EQ(s.position.batches_done, 3);
  EXPECT_EQ(s.position.samples_done, 36);
  EXPECT_EQ(s.position.global_step, 17);
  EXPECT_EQ(s.world_size, 4);
}

TEST(RunState, AnOlderStateWithoutAnOffsetIsAWholePass) {
  nlohmann::json j = run_state_json(resumed_mid_pass());
  j.erase("epoch_offset");
  EXPECT_EQ(parse_run_state(j, "old.json").position.epoch_offset, 0);
  j["epoch_offset"] = -8;
  try {
    parse_run_state(j, "bad.json");
    FAIL() << "a negative offset was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("epoch_offset"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace chexscale::train
