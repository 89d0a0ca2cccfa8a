// Jobs started by OpenMPI's mpirun instead of `chexscale launch` (integration: the environment
// contract of src/distributed/env.cpp read by the test worker and by `chexscale env`), and
// `chexscale train` under it, checkpointed and resumed.
#include <gtest/gtest.h>
#include <unistd.h>

#include "distributed/rendezvous.h"
#include "e2e/launched_train.h"
#include "test_util/chexscale_cli.h"
#include "test_util/helper_programs.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

// mpirun on one host, kept on loopback; root needs explicit permission.
std::string mpirun(int np, int port) {
  return "mpirun -np " + std::to_string(np) + " --oversubscribe" +
         (::geteuid() == 0 ? " --allow-run-as-root" : "") +
         " --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x MASTER_PORT=" +
         std::to_string(port) + " ";
}

TEST(Mpirun, TwoRanksRunAShortJobToCompletion) {
  test_util::TempDir dir;
  const auto run =
      test_util::run_shell(mpirun(2, distributed::pick_free_port()) +
                           test_util::distributed_worker() + " loop " + dir.path() + " 3");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("OpenMPI convention"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank 0 finished 3 steps"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank 1 finished 3 steps"), std::string::npos) << run.output;
}

TEST(Mpirun, ChexscaleEnvDetectsOpenMpi) {
  const auto run = test_util::run_shell(mpirun(2, 29500) + test_util::chexscale_bin() + " env");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("rank              1                OMPI_COMM_WORLD_RANK"),
            std::string::npos)
      << run.output;
}

TEST(Mpirun, TrainsTwoWorkersWithACheckpointAndResumesFromIt) {
  test_util::expect_train_then_resume(
      [](const std::string& train_args) {
        return test_util::run_shell(mpirun(2, distributed::pick_free_port()) +
                                        "-x MASTER_ADDR=127.0.0.1 " + test_util::chexscale_bin() +
                                        " " + train_args,
                                    test_util::environment_with(), std::chrono::seconds(240));
      },
      "OpenMPI");
}

}  // namespace
}  // namespace chexscale
