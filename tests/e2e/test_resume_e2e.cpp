// Exact resume through the CLI: a run killed with SIGKILL mid-training, whose newest checkpoint
// is then damaged, resumes (--resume auto) from the last good one with a warning and ends with
// checkpoints byte-identical to an uninterrupted run's (CPU, one intra-op thread, same seed).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

namespace fs = std::filesystem;
using test_util::run_chexscale;

std::string flags(const std::string& data, const std::string& out) {
  return fmt::format(
      "train --data {} --out {} --arch resnet18 --image-size 32 --crop-size 32 --batch-size 8 "
      "--epochs 2 --checkpoint-every 2 --keep-checkpoints 3 --loader-threads 1 --val-threads 1 "
      "--intra-op-threads 1 --seed 5",
      data, out);
}

std::vector<std::string> step_checkpoints(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0 && e.path().extension() == ".json") names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(ResumeE2E, KilledAndDamagedRunResumesToTheSameBytes) {
  test_util::TempDir dir;
  const std::string data = dir.path() + "/data";
  ASSERT_EQ(run_chexscale("synth --out " + data + " --images 160 --size 32 --seed 4").exit_code, 0);
  const std::string a = dir.path() + "/a";
  const auto full = run_chexscale(flags(data, a));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const auto final_names = step_checkpoints(a + "/checkpoints");
  ASSERT_FALSE(final_names.empty());
  const std::string last = final_names.back();

  // Run B: killed once its third checkpoint exists (step 6), well before the end.
  const std::string b = dir.path() + "/b";
  test_util::Process run_b(test_util::chexscale_command(flags(data, b)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
  while (!fs::exists(b + "/checkpoints/step-000000006.json") &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  run_b.send_signal(SIGKILL);
  run_b.wait();
  auto killed = step_checkpoints(b + "/checkpoints");
  ASSERT_GE(killed.size(), 2u);
  ASSERT_LT(killed.back(), last) << "run B finished before it was killed";

  // Damage the newest checkpoint: one flipped byte in its tensors.
  const std::string newest = b + "/checkpoints/" + killed.back();
  const std::string tensors = fs::path(newest).replace_extension(".safetensors").string();
  std::string bytes = test_util::file_contents(tensors);
  bytes[bytes.size() / 2] ^= 0x01;
  std::ofstream(tensors, std::ios::binary | std::ios::trunc) << bytes;

  const auto resumed = run_chexscale(flags(data, b) + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("skipping damaged checkpoint"), std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;

  for (const std::string& file : {last, fs::path(last).replace_extension(".safetensors").string(),
                                  std::string("best.safetensors")}) {
    const std::string ta = test_util::file_contents(a + "/checkpoints/" + file);
    const std::string tb = test_util::file_contents(b + "/checkpoints/" + file);
    ASSERT_FALSE(ta.empty()) << file;
    EXPECT_TRUE(ta == tb) << file << " differs between the uninterrupted and resumed runs";
  }
}

// A run that --max-steps ends inside its first epoch names its last checkpoint (there is no best
// one yet); resumed at its --max-steps it trains no further step: no newer checkpoint, the stop
// checkpoint's bytes unchanged.
TEST(ResumeE2E, ResumedAtMaxStepsTrainsNoMore) {
  test_util::TempDir dir;
  const std::string data = dir.path() + "/data";
  ASSERT_EQ(run_chexscale("synth --out " + data + " --images 160 --size 32 --seed 4").exit_code, 0);
  const std::string out = dir.path() + "/run";
  const auto first = run_chexscale(flags(data, out) + " --max-steps 3");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_EQ(step_checkpoints(out + "/checkpoints").back(), "step-000000003.json");
  // No epoch ended, so there is no best checkpoint yet: the run names the one it left.
  EXPECT_NE(first.output.find("no epoch finished, so no validation yet: the last checkpoint is " +
                              out + "/checkpoints/step-000000003.json"),
            std::string::npos)
      << first.output;
  const std::string tensors = out + "/checkpoints/step-000000003.safetensors";
  const std::string before = test_util::file_contents(tensors);

  const auto again = run_chexscale(flags(data, out) + " --max-steps 3 --resume auto");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing to train"), std::string::npos) << again.output;
  EXPECT_EQ(step_checkpoints(out + "/checkpoints").back(), "step-000000003.json");
  EXPECT_TRUE(test_util::file_contents(tensors) == before);
}

}  // namespace
}  // namespace chexscale
