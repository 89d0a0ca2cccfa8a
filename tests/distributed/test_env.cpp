// The environment contract: each launcher convention is read correctly, with where each value
// came from; flags override; partial or inconsistent settings are rejected with a clear message.
#include <gtest/gtest.h>

#include "common/error.h"
#include "distributed/context.h"
#include "distributed/env.h"

namespace chexscale {
namespace {

using Env = std::map<std::string, std::string>;

distributed::RendezvousEnv detect(const Env& env, const distributed::DistOptions& flags = {}) {
  return distributed::detect_environment(env, flags);
}

std::string rejection(const Env& env, const distributed::DistOptions& flags = {}) {
  try {
    detect(env, flags);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(Env, NothingSetIsASingleProcess) {
  const auto e = detect({});
  EXPECT_EQ(e.convention, "none");
  EXPECT_EQ(e.rank.value, 0);
  EXPECT_EQ(e.world_size.value, 1);
  EXPECT_EQ(e.master_addr.value, "127.0.0.1");
  EXPECT_EQ(e.master_port.value, distributed::kDefaultMasterPort);
}

TEST(Env, Torchrun) {
  const auto e = detect({{"RANK", "5"},
                         {"WORLD_SIZE", "8"},
                         {"LOCAL_RANK", "1"},
                         {"LOCAL_WORLD_SIZE", "4"},
                         {"MASTER_ADDR", "node0"},
                         {"MASTER_PORT", "1234"},
                         {"GROUP_RANK", "1"}});
  EXPECT_EQ(e.convention, "torchrun");
  EXPECT_EQ(e.rank.value, 5);
  EXPECT_EQ(e.rank.source, "RANK");
  EXPECT_EQ(e.world_size.value, 8);
  EXPECT_EQ(e.local_rank.value, 1);
  EXPECT_EQ(e.local_world_size.value, 4);
  EXPECT_EQ(e.node_rank.value, 1);
  EXPECT_EQ(e.master_addr.value, "node0");
  EXPECT_EQ(e.master_port.value, 1234);
  EXPECT_FALSE(e.single_node());
}

TEST(Env, OpenMpiSingleNodeDefaultsToLoopback) {
  const auto e = detect({{"OMPI_COMM_WORLD_RANK", "1"},
                         {"OMPI_COMM_WORLD_SIZE", "2"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(e.convention, "OpenMPI");
  EXPECT_EQ(e.rank.value, 1);
  EXPECT_EQ(e.rank.source, "OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(e.local_world_size.value, 2);
  EXPECT_EQ(e.master_addr.value, "127.0.0.1");
  EXPECT_EQ(e.master_addr.source, "default: single-node job");
}

TEST(Env, MpichPmi) {
  const auto e = detect({{"PMI_RANK", "3"},
                         {"PMI_SIZE", "4"},
                         {"MPI_LOCALRANKID", "1"},
                         {"MPI_LOCALNRANKS", "2"},
                         {"MASTER_ADDR", "10.0.0.1"}});
  EXPECT_EQ(e.convention, "MPICH/PMI");
  EXPECT_EQ(e.rank.value, 3);
  EXPECT_EQ(e.world_size.value, 4);
  EXPECT_EQ(e.local_rank.value, 1);
  EXPECT_EQ(e.node_rank.value, 1);
}

TEST(Env, SlurmTakesMasterFromTheNodeListAndTasksPerNode) {
  const auto e = detect({{"SLURM_PROCID", "6"},
                         {"SLURM_NTASKS", "8"},
                         {"SLURM_LOCALID", "2"},
                         {"SLURM_NODEID", "1"},
                         {"SLURM_TASKS_PER_NODE", "4(x2)"},
                         {"SLURM_STEP_NODELIST", "gpu[07-08]"}});
  EXPECT_EQ(e.convention, "Slurm");
  EXPECT_EQ(e.rank.value, 6);
  EXPECT_EQ(e.local_rank.value, 2);
  EXPECT_EQ(e.local_world_size.value, 4);
  EXPECT_EQ(e.node_rank.value, 1);
  EXPECT_EQ(e.master_addr.value, "gpu07");
  EXPECT_EQ(e.master_addr.source, "first host of SLURM_STEP_NODELIST");
}

TEST(Env, KubernetesIndexedJobComputesRankFromTheIndex) {
  const auto e = detect({{"JOB_COMPLETION_INDEX", "2"},
                         {"NNODES", "3"},
                         {"LOCAL_RANK", "1"},
                         {"LOCAL_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "job-0.svc"}});
  EXPECT_EQ(e.convention, "Kubernetes Indexed Job");
  EXPECT_EQ(e.node_rank.value, 2);
  EXPECT_EQ(e.world_size.value, 6);
  EXPECT_EQ(e.rank.value, 5);
}

TEST(Env, TorchrunNamesWinOverOtherConventions) {
  // chexscale launch under srun: workers see both the launcher's and Slurm's variables.
  const auto e = detect({{"RANK", "3"},
                         {"WORLD_SIZE", "4"},
                         {"LOCAL_RANK", "1"},
                         {"LOCAL_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "n1"},
                         {"SLURM_PROCID", "1"},
                         {"SLURM_NTASKS", "2"},
                         {"JOB_COMPLETION_INDEX", "1"}});
  EXPECT_EQ(e.convention, "torchrun");
  EXPECT_EQ(e.rank.value, 3);
}

TEST(Env, FlagsOverrideTheEnvironment) {
  distributed::DistOptions flags;
  flags.rank = 0;
  flags.master_port = 4000;
  const auto e = detect(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}}, flags);
  EXPECT_EQ(e.rank.value, 0);
  EXPECT_EQ(e.rank.source, "`rank`");
  EXPECT_EQ(e.master_port.value, 4000);
}

TEST(Env, PartialSettingsAreRejected) {
  EXPECT_EQ(rejection({{"RANK", "1"}}),
            "RANK is set but WORLD_SIZE is not: the torchrun convention needs both");
  EXPECT_NE(rejection({{"OMPI_COMM_WORLD_SIZE", "2"}}).find("OMPI_COMM_WORLD_RANK"),
            std::string::npos);
  EXPECT_NE(
      rejection({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}).find("LOCAL_WORLD_SIZE"),
      std::string::npos);
  EXPECT_NE(rejection({{"JOB_COMPLETION_INDEX", "0"}}).find("WORLD_SIZE nor NNODES"),
            std::string::npos);
}

TEST(Env, InconsistentSettingsAreRejected) {
  EXPECT_NE(rejection({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("rank 2 (from RANK) must be in"),
            std::string::npos);
  EXPECT_NE(rejection({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK='x' is not an integer"),
            std::string::npos);
  EXPECT_NE(
      rejection({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}).find("master port"),
      std::string::npos);
  distributed::DistOptions flags;
  flags.rank = 3;
  flags.world_size = 2;
  EXPECT_NE(rejection({}, flags).find("(from `rank`)"), std::string::npos);
}

TEST(Env, MultiNodeWithoutMasterAddressIsRejected) {
  EXPECT_NE(
      rejection(
          {{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}})
          .find("set MASTER_ADDR"),
      std::string::npos);
}

TEST(Env, SlurmHostListsAndTaskCounts) {
  EXPECT_EQ(distributed::first_host_of_nodelist("node[03-05,9],gpu1"), "node03");
  EXPECT_EQ(distributed::first_host_of_nodelist("login1,login2"), "login1");
  EXPECT_EQ(distributed::first_host_of_nodelist("rack[2]-n[1-4]"), "rack2-n[1-4]");
  EXPECT_EQ(distributed::tasks_on_node("2(x3),1", 0), 2);
  EXPECT_EQ(distributed::tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(distributed::tasks_on_node("2(x3),1", 4), -1);
}

}  // namespace
}  // namespace chexscale
