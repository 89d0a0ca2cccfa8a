// A short 2-worker `chexscale train` under an outside launcher (torchrun, mpirun) and its resume:
// tiny synthetic data; a first run that --max-steps ends at step 3 (mid epoch 0) with a checkpoint
// there; then `--resume auto` to the end of 2 epochs, which must start from that checkpoint and
// continue its metrics.jsonl where the first run left it.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>

#include "e2e/metrics_records.h"
#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale::test_util {

// Starts `chexscale <train arguments>` under the launcher with 2 workers; returns what it did.
using TwoWorkerLauncher = std::function<ProcessResult(const std::string& train_args)>;

inline constexpr int64_t kFirstRunSteps = 3;

// Trains to step 3 and resumes to the end under `launch`; `convention` is the launcher's name as
// the workers report it ("torchrun", "OpenMPI").
inline void expect_train_then_resume(const TwoWorkerLauncher& launch,
                                     const std::string& convention) {
  TempDir dir;
  const std::string data = dir.path() + "/data", out = dir.path() + "/run";
  // 64 images: 2 workers x batch 4 take more than 3 steps an epoch and no batch of one image.
  const auto synth = run_chexscale("synth --out " + data + " --images 64 --size 32 --seed 6");
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  const std::string args = fmt::format(
      "train --data {} --out {} --arch resnet18 --image-size 32 --crop-size 32 --batch-size 4 "
      "--epochs 2 --loader-threads 1 --val-threads 1 --intra-op-threads 1 --seed 3 --log-every 1 "
      "--collective-timeout 60",
      data, out);

  const auto first = launch(args + fmt::format(" --max-steps {}", kFirstRunSteps));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(
        first.output.find(fmt::format("joining as rank {} of 2 (local {} of 2, {} convention)",
                                      rank, rank, convention)),
        std::string::npos)
        << first.output;
  }
  const std::string checkpoint =
      fmt::format("{}/checkpoints/step-{:09d}.json", out, kFirstRunSteps);
  const auto state = nlohmann::json::parse(file_contents(checkpoint)).at("state");
  EXPECT_EQ(state.at("world_size"), 2);
  EXPECT_EQ(state.at("epoch"), 0);
  EXPECT_EQ(metrics_records(out + "/metrics.jsonl", "step").size(), kFirstRunSteps);

  const auto resumed = launch(args + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find(
                fmt::format("resumed from {} (epoch 0, step {})", checkpoint, kFirstRunSteps)),
            std::string::npos)
      << resumed.output;
  // One step record a step, 1, 2, 3 from the first run and 4... from the resumed one, and an
  // epoch record for each epoch: both epochs are as long, as one uninterrupted 2-worker run's.
  const auto steps = metrics_records(out + "/metrics.jsonl", "step");
  for (size_t i = 0; i < steps.size(); ++i)
    ASSERT_EQ(steps[i].at("step"), static_cast<int64_t>(i) + 1) << "record " << i;
  ASSERT_GT(steps.size(), 2 * static_cast<size_t>(kFirstRunSteps));
  EXPECT_EQ(steps[kFirstRunSteps].at("epoch"), 0);
  EXPECT_EQ(steps[kFirstRunSteps].at("batch"), kFirstRunSteps + 1);
  std::map<int64_t, int64_t> epoch_end;
  for (const auto& e : metrics_records(out + "/metrics.jsonl", "epoch"))
    epoch_end[e.at("epoch").get<int64_t>()] = e.at("step").get<int64_t>();
  ASSERT_EQ(epoch_end.size(), 2u);
  EXPECT_GT(epoch_end.at(0), kFirstRunSteps);
  EXPECT_EQ(epoch_end.at(1), 2 * epoch_end.at(0));
  EXPECT_EQ(steps.back().at("step"), epoch_end.at(1));
  const auto last = nlohmann::json::parse(
      file_contents(fmt::format("{}/checkpoints/step-{:09d}.json", out, epoch_end.at(1))));
  EXPECT_EQ(last.at("state").at("world_size"), 2);
  EXPECT_EQ(last.at("state").at("epoch"), 2);
}

}  // namespace chexscale::test_util
