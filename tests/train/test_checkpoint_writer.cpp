// The checkpoint writer: a save copies the tensors at once (later changes to them are not in the
// file), writes on its own thread in order and prunes as the store does, writes best.* when
// asked (a hard link to the step's tensors, which outlives the step's pruning), copies into a
// buffer mapped ahead on its thread, and a write that fails on its thread is rethrown by the
// next wait or save.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "test_util/temp_dir.h"
#include "train/checkpoint.h"
#include "train/checkpoint_writer.h"

namespace chexscale::train {
namespace {

namespace fs = std::filesystem;

float first_value(const Checkpoint& c) {
  return c.tensors.at(0).tensor[0][0].item<float>();
}

TEST(CheckpointWriter, ASaveHoldsTheTensorsAsTheyWereWhenItReturned) {
  test_util::TempDir dir;
  CheckpointStore store(dir.path(), 3);
  CheckpointWriter writer(store);
  torch::Tensor live = torch::full({256, 256}, 1.f);
  const std::string path = writer.save(5, false, {{"epoch", 1}}, {{"model.w", live}});
  live.fill_(2.f);  // the next steps train on while the file is written
  writer.wait();
  EXPECT_EQ(path, store.manifest_path(5));
  const Checkpoint c = read_checkpoint(path);
  EXPECT_EQ(first_value(c), 1.f);
  EXPECT_TRUE(torch::equal(c.tensors.at(0).tensor, torch::full({256, 256}, 1.f)));
  EXPECT_EQ(c.state.at("epoch").get<int>(), 1);
}

TEST(CheckpointWriter, SavesInOrderPruneAndWriteBestWhenAsked) {
  test_util::TempDir dir;
  CheckpointStore store(dir.path(), 2);
  CheckpointWriter writer(store);
  for (int step = 1; step <= 4; ++step) {
    writer.save(step, step == 2, {{"step", step}}, {{"model.w", torch::full({2, 2}, float(step))}});
  }
  writer.wait();
  EXPECT_EQ(store.list(),
            (std::vector<std::string>{store.manifest_path(4), store.manifest_path(3)}));
  EXPECT_EQ(first_value(read_checkpoint(store.manifest_path(4))), 4.f);
  // best.* outlives the step checkpoint it was linked to.
  const fs::path best_json = fs::path(dir.path()) / "best.json";
  const fs::path best_tensors = fs::path(dir.path()) / "best.safetensors";
  const Checkpoint best = read_checkpoint(best_json.string());
  EXPECT_EQ(best.state.at("step").get<int>(), 2);
  EXPECT_EQ(first_value(best), 2.f);
  EXPECT_EQ(fs::hard_link_count(best_tensors), 1u);
  // The next best is the step's own tensors file under a second name, not a second copy.
  writer.save(5, true, {{"step", 5}}, {{"model.w", torch::full({2, 2}, 5.f)}});
  writer.wait();
  EXPECT_TRUE(fs::equivalent(best_tensors, fs::path(dir.path()) / "step-000000005.safetensors"));
  EXPECT_EQ(fs::hard_link_count(best_tensors), 2u);
  EXPECT_EQ(first_value(read_checkpoint(best_json.string())), 5.f);
  EXPECT_FALSE(fs::exists(fs::path(dir.path()) / "best.safetensors.link"));
}

// A writer that has not written maps a buffer on its thread; the next save copies into it (the
// room stays), and one that has a large enough buffer maps none.
TEST(CheckpointWriter, AMappedBufferIsTheOneTheNextSaveCopiesInto) {
  test_util::TempDir dir;
  CheckpointStore store(dir.path(), 2);
  CheckpointWriter writer(store);
  constexpr size_t kRoom = size_t{4} << 20;
  writer.wait();
  EXPECT_LT(writer.buffer_capacity(), kRoom);
  writer.map_buffer(kRoom);
  writer.wait();
  EXPECT_GE(writer.buffer_capacity(), kRoom);
  writer.save(1, false, {{"step", 1}}, {{"model.w", torch::full({2, 2}, 1.f)}});
  writer.wait();
  EXPECT_GE(writer.buffer_capacity(), kRoom);
  EXPECT_EQ(first_value(read_checkpoint(store.manifest_path(1))), 1.f);
  writer.map_buffer(kRoom / 2);
  writer.wait();
  EXPECT_GE(writer.buffer_capacity(), kRoom);
}

// The step's manifest path is a non-empty folder: the write fails at its rename, on the
// writer's thread, after the save returned.
TEST(CheckpointWriter, AWriteThatFailsOnItsThreadIsRethrownByTheNextSaveAndWait) {
  test_util::TempDir dir;
  CheckpointStore store(dir.path(), 3);
  const std::string blocked = store.manifest_path(2);
  fs::create_directories(blocked);
  std::ofstream(fs::path(blocked) / "file") << "x";
  CheckpointWriter writer(store);
  writer.save(2, false, {}, {{"model.w", torch::ones({2})}});
  try {
    writer.save(3, false, {}, {{"model.w", torch::ones({2})}});
    FAIL() << "the failed write went unnoticed";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(blocked), std::string::npos) << e.what();
  }
  // Step 2 left no tensors without a manifest; step 3 was not started.
  EXPECT_FALSE(fs::exists(fs::path(dir.path()) / "step-000000002.safetensors"));
  EXPECT_FALSE(fs::exists(store.manifest_path(3)));
  // Once the folder is cleared, saves go on.
  fs::remove_all(blocked);
  writer.save(4, false, {}, {{"model.w", torch::ones({2})}});
  writer.wait();
  EXPECT_EQ(store.list(), (std::vector<std::string>{store.manifest_path(4)}));
}

}  // namespace
}  // namespace chexscale::train
