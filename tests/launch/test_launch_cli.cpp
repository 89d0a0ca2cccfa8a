// `chexscale launch` and `chexscale env` as users run them, and the same worker under OpenMPI's
// mpirun: the environment contract reaches every worker, signals are forwarded, jobs complete.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "distributed/rendezvous.h"
#include "distributed/worker_processes.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

struct ShellRun {
  int status = -1;
  std::string output;
};

ShellRun shell(const std::string& command) {
  ShellRun run;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    run.output.append(buffer, n);
  const int raw = ::pclose(pipe);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return run;
}

std::string bin() {
  return std::getenv("CHEXSCALE_BIN");
}

// mpirun on one host, kept on loopback; root needs explicit permission.
std::string mpirun(int np, int port) {
  return "mpirun -np " + std::to_string(np) + " --oversubscribe" +
         (::geteuid() == 0 ? " --allow-run-as-root" : "") +
         " --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x MASTER_PORT=" +
         std::to_string(port) + " ";
}

TEST(LaunchCli, EveryWorkerSeesTheEnvironmentContract) {
  const ShellRun run = shell(bin() + " launch --nproc-per-node 2 -- env");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("[rank 0] convention        torchrun"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("[rank 1] rank              1                RANK"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("[rank 1] world size        2                WORLD_SIZE"),
            std::string::npos)
      << run.output;
}

TEST(LaunchCli, MissingCommandIsAUsageError) {
  const ShellRun run = shell(bin() + " launch --nproc-per-node 2");
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_NE(run.output.find("give the worker's command after --"), std::string::npos) << run.output;
}

// Values that would never kill a worker or fail only inside every worker are refused before
// anything starts, naming the flag (the --nproc-per-node cap: LocalLauncher.ImplausibleValues...).
TEST(LaunchCli, ImplausibleValuesAreUsageErrorsBeforeAnyWorkerStarts) {
  const std::vector<std::string> refused = {"--grace-period nan", "--grace-period -1",
                                            "--rdzv-timeout -1", "--program /nonexistent/worker"};
  for (const std::string& flags : refused) {
    const ShellRun run = shell(bin() + " launch " + flags + " -- env");
    EXPECT_EQ(run.status, 2) << flags << "\n" << run.output;
    EXPECT_NE(run.output.find(flags.substr(0, flags.find(' '))), std::string::npos) << flags << "\n"
                                                                                    << run.output;
    EXPECT_EQ(run.output.find("[rank 0]"), std::string::npos) << flags << "\n" << run.output;
  }
}

TEST(LaunchCli, SigtermIsForwardedAndTheLauncherExitsWithIt) {
  test_util::TempDir dir;
  test_util::WorkerGroup launcher(
      bin(),
      {"launch", "--nproc-per-node", "2", "--program", CHEXSCALE_DISTRIBUTED_WORKER, "--", "loop",
       dir.path(), "100000"},
      1, dir.path());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int steps = 0;
  while (steps < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream(dir.path() + "/progress") >> steps;
  }
  ASSERT_GE(steps, 2) << "the job never got going";
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(launcher.pid(0), SIGTERM), 0);
  const auto exits = launcher.wait_all(std::chrono::seconds(120));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_EQ(exits[0].status, 128 + SIGTERM) << exits[0].output;
  EXPECT_NE(exits[0].output.find("forwarding it to the workers"), std::string::npos)
      << exits[0].output;
  EXPECT_LT(seconds, 15);
}

TEST(Mpirun, TwoRanksRunAShortJobToCompletion) {
  test_util::TempDir dir;
  const ShellRun run = shell(mpirun(2, distributed::pick_free_port()) +
                             CHEXSCALE_DISTRIBUTED_WORKER + " loop " + dir.path() + " 3");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("OpenMPI convention"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank 0 finished 3 steps"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank 1 finished 3 steps"), std::string::npos) << run.output;
}

TEST(Mpirun, ChexscaleEnvDetectsOpenMpi) {
  const ShellRun run = shell(mpirun(2, 29500) + bin() + " env");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("rank              1                OMPI_COMM_WORLD_RANK"),
            std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace chexscale
