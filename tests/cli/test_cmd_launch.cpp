// `chexscale launch` as users run it: the environment contract reaches every worker, bad values
// are usage errors before any worker starts, and SIGTERM is forwarded to the workers.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "test_util/chexscale_cli.h"
#include "test_util/helper_programs.h"
#include "test_util/temp_dir.h"
#include "test_util/worker_group.h"

namespace chexscale {
namespace {

TEST(LaunchCli, EveryWorkerSeesTheEnvironmentContract) {
  const auto run = test_util::run_chexscale("launch --nproc-per-node 2 -- env");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[rank 0] convention        torchrun"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("[rank 1] rank              1                RANK"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("[rank 1] world size        2                WORLD_SIZE"),
            std::string::npos)
      << run.output;
}

TEST(LaunchCli, MissingCommandIsAUsageError) {
  const auto run = test_util::run_chexscale("launch --nproc-per-node 2");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("give the worker's command after --"), std::string::npos) << run.output;
}

// Values that would never kill a worker or fail only inside every worker are refused before
// anything starts, naming the flag (the --nproc-per-node cap: LocalLauncher.ImplausibleValues...).
TEST(LaunchCli, ImplausibleValuesAreUsageErrorsBeforeAnyWorkerStarts) {
  const std::vector<std::string> refused = {"--grace-period nan", "--grace-period -1",
                                            "--rdzv-timeout -1", "--program /nonexistent/worker"};
  for (const std::string& flags : refused) {
    const auto run = test_util::run_chexscale("launch " + flags + " -- env");
    EXPECT_EQ(run.exit_code, 2) << flags << "\n" << run.output;
    EXPECT_NE(run.output.find(flags.substr(0, flags.find(' '))), std::string::npos) << flags << "\n"
                                                                                    << run.output;
    EXPECT_EQ(run.output.find("[rank 0]"), std::string::npos) << flags << "\n" << run.output;
  }
}

TEST(LaunchCli, SigtermIsForwardedAndTheLauncherExitsWithIt) {
  test_util::TempDir dir;
  test_util::WorkerGroup launcher(
      test_util::chexscale_bin(),
      {"launch", "--nproc-per-node", "2", "--program", test_util::distributed_worker(), "--",
       "loop", dir.path(), "100000"},
      1, dir.path());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int steps = 0;
  while (steps < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    steps = test_util::worker_progress(dir.path());
  }
  ASSERT_GE(steps, 2) << "the job never got going";
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(launcher.pid(0), SIGTERM), 0);
  const auto exits = launcher.wait_all(std::chrono::seconds(120));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_EQ(exits[0].exit_code, 128 + SIGTERM) << exits[0].output;
  EXPECT_NE(exits[0].output.find("forwarding it to the workers"), std::string::npos)
      << exits[0].output;
  EXPECT_LT(seconds, 15);
}

}  // namespace
}  // namespace chexscale
