// The environment contract: each launcher convention is read correctly, with where each value
// came from; what a launcher leaves out is inferred and says how; flags override; what cannot be
// inferred and contradictions are rejected with a clear message; torchrun's agent store is used
// under the attempt's prefix.
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

TEST(Env, PytorchEnvMinimumWithLocalRankInfersOneProcessPerHost) {
  // A Kubeflow PyTorchJob v1 pod: one process, and MASTER_ADDR names another pod.
  const auto e = detect({{"RANK", "2"},
                         {"WORLD_SIZE", "4"},
                         {"LOCAL_RANK", "0"},
                         {"MASTER_ADDR", "job-master-0"},
                         {"MASTER_PORT", "23456"}});
  EXPECT_EQ(e.convention, "torchrun");
  EXPECT_EQ(e.local_rank.value, 0);
  EXPECT_EQ(e.local_rank.source, "LOCAL_RANK");
  EXPECT_EQ(e.local_world_size.value, 1);
  EXPECT_EQ(e.local_world_size.source,
            "inferred: LOCAL_RANK + 1, the fewest processes on this host (set LOCAL_WORLD_SIZE if "
            "it runs more)");
  EXPECT_EQ(e.node_rank.value, 2);
  EXPECT_FALSE(e.single_node());
  // A higher local rank means at least that many processes here.
  EXPECT_EQ(detect({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "3"}, {"MASTER_ADDR", "n0"}})
                .local_world_size.value,
            4);
}

TEST(Env, LoopbackMasterAddressPutsEveryRankOnThisHost) {
  // DeepSpeed's launcher on one node: LOCAL_RANK, no LOCAL_WORLD_SIZE.
  auto e = detect(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"}});
  EXPECT_EQ(e.local_world_size.value, 2);
  EXPECT_EQ(e.local_world_size.source,
            "inferred: MASTER_ADDR 127.0.0.1 is loopback, so every rank is on this host");
  EXPECT_TRUE(e.single_node());
  // Without LOCAL_RANK either, the local rank is the rank.
  e = detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "localhost"}});
  EXPECT_EQ(e.local_rank.value, 1);
  EXPECT_EQ(e.local_rank.source, "inferred: the rank, as every rank is here");
  EXPECT_EQ(e.local_world_size.value, 2);
}

TEST(Env, LocalWorldSizeWithoutLocalRankInfersTheLocalRank) {
  const auto e = detect(
      {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "n0"}});
  EXPECT_EQ(e.local_rank.value, 1);
  EXPECT_EQ(e.local_rank.source, "inferred: rank mod local world size (hosts in rank order)");
  EXPECT_EQ(e.node_rank.value, 1);
}

TEST(Env, AnotherConventionForTheSameProcessFillsTheGaps) {
  // RANK and LOCAL_RANK set by a launcher that mpirun started: OpenMPI names the same process.
  const auto e = detect({{"RANK", "3"},
                         {"WORLD_SIZE", "4"},
                         {"LOCAL_RANK", "1"},
                         {"MASTER_ADDR", "n0"},
                         {"OMPI_COMM_WORLD_RANK", "3"},
                         {"OMPI_COMM_WORLD_SIZE", "4"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(e.convention, "torchrun");
  EXPECT_EQ(e.local_world_size.value, 2);
  EXPECT_EQ(e.local_world_size.source,
            "OMPI_COMM_WORLD_LOCAL_SIZE (OpenMPI gives the same rank and world size)");
}

TEST(Env, AnOuterLaunchersConventionIsNotUsed) {
  // srun started one launcher per node: Slurm's rank and size are the launchers', not ours.
  const auto e = detect({{"RANK", "5"},
                         {"WORLD_SIZE", "8"},
                         {"LOCAL_RANK", "1"},
                         {"MASTER_ADDR", "n0"},
                         {"SLURM_PROCID", "1"},
                         {"SLURM_NTASKS", "2"},
                         {"SLURM_LOCALID", "0"},
                         {"SLURM_NTASKS_PER_NODE", "1"}});
  EXPECT_EQ(e.local_rank.value, 1);
  EXPECT_EQ(e.local_world_size.value, 2);
  EXPECT_NE(e.local_world_size.source.find("inferred: LOCAL_RANK + 1"), std::string::npos);
}

TEST(Env, ContradictionsAreRejected) {
  // Two conventions name the same rank of the same world but place it differently.
  EXPECT_EQ(rejection({{"RANK", "3"},
                       {"WORLD_SIZE", "4"},
                       {"LOCAL_RANK", "1"},
                       {"LOCAL_WORLD_SIZE", "2"},
                       {"OMPI_COMM_WORLD_RANK", "3"},
                       {"OMPI_COMM_WORLD_SIZE", "4"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}}),
            "LOCAL_RANK=1 but OMPI_COMM_WORLD_LOCAL_RANK=0: both name rank 3 of 4, so they "
            "contradict each other on the local rank");
  // A local rank that needs more processes than the world has.
  EXPECT_NE(
      rejection({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "3"}, {"MASTER_ADDR", "n0"}})
          .find("local world size 4 (from inferred: LOCAL_RANK + 1"),
      std::string::npos);
  EXPECT_NE(
      rejection(
          {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}})
          .find("local rank 2 (from LOCAL_RANK) must be in [0, local world size 2"),
      std::string::npos);
}

TEST(Env, TorchrunsAgentStoreIsUsedUnderTheAttemptsPrefix) {
  const Env torchrun = {{"RANK", "0"},
                        {"WORLD_SIZE", "2"},
                        {"LOCAL_RANK", "0"},
                        {"LOCAL_WORLD_SIZE", "2"},
                        {"MASTER_ADDR", "127.0.0.1"},
                        {"MASTER_PORT", "29500"}};
  auto with = [&](const Env& extra) {
    Env env = torchrun;
    env.insert(extra.begin(), extra.end());
    return detect(env);
  };
  auto e = with({{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "2"}});
  EXPECT_TRUE(e.agent_store.value);
  EXPECT_EQ(e.agent_store.source, "TORCHELASTIC_USE_AGENT_STORE");
  EXPECT_EQ(e.store_prefix.value, "/worker/attempt_2");
  EXPECT_EQ(e.store_prefix.source, "TORCHELASTIC_RESTART_COUNT");
  e = with({{"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_EQ(e.store_prefix.value, "/worker/attempt_0");
  // torch compares with "True" exactly; c10d rendezvous in torch 1.13 says False.
  for (const char* value : {"False", "true", "1"}) {
    e = with({{"TORCHELASTIC_USE_AGENT_STORE", value}, {"TORCHELASTIC_RESTART_COUNT", "1"}});
    EXPECT_FALSE(e.agent_store.value) << value;
    EXPECT_EQ(e.store_prefix.value, "") << value;
  }
  e = detect(torchrun);
  EXPECT_FALSE(e.agent_store.value);
  EXPECT_EQ(e.agent_store.source, "default: rank 0 serves it");
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
