// Jobs started by PyTorch's own torchrun (python3 -m torch.distributed.run, Debian's python3-torch)
// instead of `chexscale launch`: its agent serves the store (TORCHELASTIC_USE_AGENT_STORE=True),
// its c10d rendezvous joins separate "nodes", and it restarts a failed group, whose new attempt
// must not read the last attempt's keys; and `train` under it, checkpointed and resumed.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "distributed/rendezvous.h"
#include "e2e/launched_train.h"
#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

using nlohmann::json;

const std::string kTinyBench =
    " bench --arch resnet18 --image-size 32 --batch-size 2 --steps 3 --warmup-steps 1 --threads 1";

// torchrun with Debian's torch 1.13 on Python 3.11: --redirects and --tee must be 1 or 2 (its Std
// IntFlag lookup finds no member for 0 or 3 and fails), so stdout is teed with a rank prefix.
std::string torchrun(const std::string& flags) {
  return "/usr/bin/python3 -m torch.distributed.run --redirects 1 --tee 1 --no_python " + flags +
         " ";
}

test_util::ProcessSpec shell(const std::string& command) {
  return {{"/bin/sh", "-c", command}, test_util::environment_with(), ""};
}

json bench_json(const std::string& path) {
  return json::parse(test_util::file_contents(path));
}

TEST(Torchrun, TwoLocalRanksUseTheAgentsStore) {
  test_util::TempDir dir;
  const std::string out = dir.path() + "/bench.json";
  const auto run =
      test_util::run_process(shell(torchrun("--nproc_per_node 2 --master_port " +
                                            std::to_string(distributed::pick_free_port())) +
                                   test_util::chexscale_bin() + kTinyBench + " --json " + out),
                             std::chrono::seconds(120));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("Address already in use"), std::string::npos) << run.output;
  const json doc = bench_json(out);
  EXPECT_EQ(doc["world_size"], 2);
  EXPECT_EQ(doc["nnodes"], 1);
}

TEST(Torchrun, TwoNodesJoinThroughC10dRendezvous) {
  test_util::TempDir dir;
  const std::string endpoint = "127.0.0.1:" + std::to_string(distributed::pick_free_port());
  std::vector<test_util::ProcessSpec> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(shell(torchrun("--nnodes 2 --nproc_per_node 1 --rdzv_backend c10d "
                                   "--rdzv_endpoint " +
                                   endpoint + " --rdzv_id chexscale-test") +
                          test_util::chexscale_bin() + kTinyBench + " --json " + dir.path() +
                          "/node" + std::to_string(node) + ".json"));
  }
  const auto runs = test_util::run_processes(std::move(nodes), std::chrono::seconds(150));
  for (const auto& run : runs)
    ASSERT_EQ(run.exit_code, 0) << run.output;
  // Only rank 0 writes bench.json; the c10d rendezvous decides which node holds it.
  const bool first = std::filesystem::exists(dir.path() + "/node0.json");
  const json doc = bench_json(dir.path() + (first ? "/node0.json" : "/node1.json"));
  EXPECT_EQ(doc["world_size"], 2);
  EXPECT_EQ(doc["nnodes"], 2);
}

TEST(Torchrun, TrainsTwoWorkersWithACheckpointAndResumesFromIt) {
  test_util::expect_train_then_resume(
      [](const std::string& train_args) {
        return test_util::run_process(
            shell(torchrun("--nproc_per_node 2 --master_port " +
                           std::to_string(distributed::pick_free_port())) +
                  test_util::chexscale_bin() + " " + train_args),
            std::chrono::seconds(240));
      },
      "torchrun");
}

// A worker that kills itself once: rank 1 of the first attempt, once its process group is ready
// (so both ranks have checked in to the agent's store). `attempt` overrides what the worker reads
// as TORCHELASTIC_RESTART_COUNT (empty: torchrun's own).
std::string self_killing_worker(const test_util::TempDir& dir, const std::string& attempt) {
  const std::string script = dir.write(
      "worker.sh",
      fmt::format(
          R"(#!/bin/sh
echo "worker rank $RANK attempt $TORCHELASTIC_RESTART_COUNT"
{export}
if [ "$RANK" = 1 ] && [ ! -e '{dir}/killed' ]; then
  touch '{dir}/killed'
  '{bin}' --log-level debug "$@" > '{dir}/rank1.log' 2>&1 &
  i=0
  until grep -q 'process group ready' '{dir}/rank1.log' || [ $i -ge 1200 ]; do
    sleep 0.1; i=$((i + 1))
  done
  kill -9 $! $$
fi
exec '{bin}' "$@"
)",
          fmt::arg("export", attempt.empty() ? "" : "export TORCHELASTIC_RESTART_COUNT=" + attempt),
          fmt::arg("dir", dir.path()), fmt::arg("bin", test_util::chexscale_bin())));
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  return script;
}

test_util::ProcessResult run_with_one_restart(const test_util::TempDir& dir,
                                              const std::string& worker) {
  return test_util::run_process(
      shell(torchrun("--nproc_per_node 2 --max_restarts 1 --master_port " +
                     std::to_string(distributed::pick_free_port())) +
            worker + kTinyBench + " --json " + dir.path() + "/bench.json"),
      std::chrono::seconds(150));
}

TEST(Torchrun, KilledWorkerIsRestartedAndTheJobCompletes) {
  test_util::TempDir dir;
  const auto run = run_with_one_restart(dir, self_killing_worker(dir, ""));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("worker rank 1 attempt 0"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("worker rank 0 attempt 1"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("worker rank 1 attempt 1"), std::string::npos) << run.output;
  EXPECT_EQ(bench_json(dir.path() + "/bench.json")["world_size"], 2);
}

TEST(Torchrun, ARestartedAttemptOnTheLastAttemptsKeysFails) {
  // The same run with every attempt under attempt 0's prefix: the agent's store still holds rank
  // 0's check-in from the killed attempt, so the prefix is what lets the restart succeed.
  test_util::TempDir dir;
  const auto run = run_with_one_restart(dir, self_killing_worker(dir, "0"));
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("two processes claim rank"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace chexscale
