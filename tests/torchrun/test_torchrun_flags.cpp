// torchrun's flags as PET_* variables (what a Kubeflow PyTorchJob sets for torchrun), read by
// `chexscale launch` for the flags it is not given.
#include <gtest/gtest.h>

#include "common/error.h"
#include "launch/local_launcher.h"
#include "test_util/chexscale_cli.h"

namespace chexscale {
namespace {

std::string refusal(const std::map<std::string, std::string>& env) {
  try {
    launch::read_torchrun_flags(env);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(TorchrunFlags, PetVariablesNameTheLaunchOptions) {
  // An elastic PyTorchJob's worker pod.
  const launch::TorchrunFlags f =
      launch::read_torchrun_flags({{"PET_NNODES", "2:2"},
                                   {"PET_NPROC_PER_NODE", "4"},
                                   {"PET_NODE_RANK", "1"},
                                   {"PET_MAX_RESTARTS", "3"},
                                   {"PET_RDZV_BACKEND", "c10d"},
                                   {"PET_MASTER_ADDR", "other"},
                                   {"PET_MASTER_PORT", "1234"},
                                   {"PET_RDZV_ENDPOINT", "job-worker-0:23456"}});
  EXPECT_EQ(f.nnodes, 2);
  EXPECT_EQ(f.nproc_per_node, 4);
  EXPECT_EQ(f.node_rank, 1);
  EXPECT_EQ(f.max_restarts, 3);
  EXPECT_EQ(f.master_addr, "job-worker-0");  // the endpoint wins, as in torchrun
  EXPECT_EQ(f.master_port, 23456);
  const launch::TorchrunFlags v6 =
      launch::read_torchrun_flags({{"PET_RDZV_ENDPOINT", "[fd00::1]:29400"}});
  EXPECT_EQ(v6.master_addr, "fd00::1");
  EXPECT_EQ(v6.master_port, 29400);
  const launch::TorchrunFlags host = launch::read_torchrun_flags(
      {{"PET_RDZV_ENDPOINT", "node0"}, {"PET_MASTER_PORT", "1234"}, {"PET_NNODES", "3"}});
  EXPECT_EQ(host.master_addr, "node0");
  EXPECT_EQ(host.master_port, 1234);
  EXPECT_EQ(host.nnodes, 3);
  const launch::TorchrunFlags none = launch::read_torchrun_flags({{"NNODES", "2"}});
  EXPECT_FALSE(none.nnodes || none.nproc_per_node || none.node_rank || none.max_restarts ||
               none.master_addr || none.master_port);
}

TEST(TorchrunFlags, ElasticRangesAndBadValuesAreRefused) {
  EXPECT_NE(refusal({{"PET_NNODES", "1:4"}}).find("PET_NNODES='1:4' is an elastic range"),
            std::string::npos);
  EXPECT_EQ(refusal({{"PET_NPROC_PER_NODE", "gpu"}}), "PET_NPROC_PER_NODE='gpu' is not an integer");
  EXPECT_EQ(refusal({{"PET_RDZV_ENDPOINT", "node0:http"}}),
            "PET_RDZV_ENDPOINT='node0:http': the port 'http' is not an integer");
}

TEST(TorchrunFlags, LaunchTakesThemWhereNoFlagIsGiven) {
  auto run = test_util::run_chexscale("launch -- env", {"PET_NPROC_PER_NODE=2"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[rank 1] world size        2                WORLD_SIZE"),
            std::string::npos)
      << run.output;
  // A flag wins over the variable.
  run = test_util::run_chexscale("launch --nproc-per-node 1 -- env", {"PET_NPROC_PER_NODE=2"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("[rank 1]"), std::string::npos) << run.output;
  // PET_MAX_RESTARTS restarts a failing group.
  run = test_util::run_chexscale("launch --program /bin/false -- x", {"PET_MAX_RESTARTS=1"});
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("(attempt 2 of 2)"), std::string::npos) << run.output;
  run = test_util::run_chexscale("launch -- env", {"PET_NNODES=1:2"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("is an elastic range"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace chexscale
