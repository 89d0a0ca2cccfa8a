// The local launcher with real worker processes (the dist tests' worker): a job runs to the end
// with prefixed output; a failing worker tears the group down and its status comes back; with
// --max-restarts 1 the job completes; topology comes from flags and the environment.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cmath>

#include "common/error.h"
#include "common/timer.h"
#include "launch/local_launcher.h"
#include "test_util/error_message.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

struct Captured {
  launch::LaunchResult result;
  std::string output;
  double seconds = 0;
};

Captured run_workers(const std::vector<std::string>& args, int nproc, int max_restarts,
                     const test_util::TempDir& dir) {
  launch::LaunchOptions o;
  o.nproc_per_node = nproc;
  o.max_restarts = max_restarts;
  o.program = CHEXSCALE_DISTRIBUTED_WORKER;
  o.args = args;
  o.grace_period = std::chrono::milliseconds(2000);
  const std::string log = dir.path() + "/launch.log";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  o.output_fd = fd;
  o.error_fd = fd;
  Stopwatch watch;
  Captured c;
  c.result = launch::run_local_group(launch::resolve_topology(o, {}));
  c.seconds = watch.seconds();
  ::close(fd);
  c.output = test_util::file_contents(log);
  return c;
}

TEST(LocalLauncher, RunsTheGroupToTheEndWithRankPrefixedOutput) {
  test_util::TempDir dir;
  const Captured c = run_workers({"loop", dir.path(), "3"}, 2, 0, dir);
  EXPECT_EQ(c.result.exit_code, 0) << c.output;
  EXPECT_EQ(c.result.attempts, 1);
  EXPECT_NE(c.output.find("[rank 0] rank 0 finished 3 steps\n"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("[rank 1] rank 1 finished 3 steps\n"), std::string::npos) << c.output;
}

TEST(LocalLauncher, FailingWorkerTearsTheGroupDownAndItsStatusComesBack) {
  test_util::TempDir dir;
  // Rank 1 exits 3 before joining; rank 0 would wait 60 s in the rendezvous if not torn down.
  const Captured c = run_workers({"fail-once", dir.path()}, 2, 0, dir);
  EXPECT_EQ(c.result.exit_code, 3) << c.output;
  EXPECT_EQ(c.result.failed_rank, 1);
  EXPECT_NE(c.result.summary.find("rank 1 failed with exit status 3"), std::string::npos)
      << c.result.summary;
  EXPECT_NE(c.output.find("[rank 1] rank 1 fails on purpose"), std::string::npos) << c.output;
  EXPECT_LT(c.seconds, 30) << "the waiting rank was not torn down";
}

TEST(LocalLauncher, MaxRestartsOneCompletesAfterAFailure) {
  test_util::TempDir dir;
  const Captured c = run_workers({"fail-once", dir.path()}, 2, 1, dir);
  EXPECT_EQ(c.result.exit_code, 0) << c.output;
  EXPECT_EQ(c.result.attempts, 2);
  EXPECT_NE(c.output.find("[rank 1] rank 1 finished 3 steps"), std::string::npos) << c.output;
}

TEST(LocalLauncher, TopologyFromTheEnvironment) {
  launch::LaunchOptions o;
  o.nproc_per_node = 4;
  o.args = {"train"};
  const auto slurm = launch::resolve_topology(
      o, {{"SLURM_NNODES", "2"}, {"SLURM_NODEID", "1"}, {"SLURM_JOB_NODELIST", "gpu[3-4]"}});
  EXPECT_EQ(slurm.nnodes, 2);
  EXPECT_EQ(slurm.node_rank, 1);
  EXPECT_EQ(slurm.master_addr, "gpu3");
  EXPECT_EQ(slurm.master_port, 29500);
  const auto k8s = launch::resolve_topology(
      o, {{"NNODES", "3"}, {"JOB_COMPLETION_INDEX", "2"}, {"MASTER_ADDR", "job-0.svc"}});
  EXPECT_EQ(k8s.node_rank, 2);
  EXPECT_EQ(k8s.master_addr, "job-0.svc");
  const auto single = launch::resolve_topology(o, {});
  EXPECT_EQ(single.nnodes, 1);
  EXPECT_EQ(single.master_addr, "127.0.0.1");
  EXPECT_EQ(single.master_port, 0);  // a free port per attempt
}

TEST(LocalLauncher, InconsistentTopologyIsRejected) {
  launch::LaunchOptions o;
  o.args = {"train"};
  o.nnodes = 2;
  EXPECT_THROW(launch::resolve_topology(o, {}), UsageError);  // no master address
  o.master_addr = "h";
  o.node_rank = 2;
  EXPECT_THROW(launch::resolve_topology(o, {}), UsageError);
  o.node_rank = 0;
  o.args.clear();
  EXPECT_THROW(launch::resolve_topology(o, {}), UsageError);
}

// A worker count that would flood the node (each worker is a LibTorch process) and a program that
// cannot run are usage errors before any process starts.
TEST(LocalLauncher, ImplausibleValuesAreRejected) {
  launch::LaunchOptions o;
  o.args = {"train"};
  o.nproc_per_node = 100000;
  EXPECT_THROW(launch::resolve_topology(o, {}), UsageError);
  o.nproc_per_node = 2;
  o.program = "/nonexistent/worker";
  EXPECT_THROW(launch::resolve_topology(o, {}), UsageError);
  o.program = CHEXSCALE_DISTRIBUTED_WORKER;
  EXPECT_EQ(launch::resolve_topology(o, {}).nproc_per_node, 2);
}

// Each refused value of LaunchOptions names its field (the CLI maps it to the flag).
TEST(LaunchOptionsValidate, RefusesEachBadValueNamingItsField) {
  const auto message = [](auto change) {
    launch::LaunchOptions o;
    change(o);
    return test_util::message_of<UsageError>([&] { o.validate(); });
  };
  EXPECT_EQ(message([](auto&) {}), "(no expected exception)");
  EXPECT_EQ(message([](auto& o) { o.nproc_per_node = 0; }), "nproc_per_node 0 must be at least 1");
  EXPECT_EQ(message([](auto& o) { o.nproc_per_node = launch::kMaxProcPerNode + 1; }),
            "nproc_per_node 1025 is more than 1024 workers on one node");
  EXPECT_EQ(message([](auto& o) { o.master_port = 65536; }),
            "master_port 65536 must be in [0, 65535]");
  EXPECT_EQ(message([](auto& o) { o.max_restarts = -1; }), "max_restarts -1 must be at least 0");
  EXPECT_EQ(message([](auto& o) { o.grace_period = std::chrono::duration<double>(-1); }),
            "grace_period -1 s must be in [0, 3600] seconds");
  EXPECT_EQ(message([](auto& o) { o.grace_period = std::chrono::duration<double>(std::nan("")); }),
            "grace_period nan s must be in [0, 3600] seconds");
  EXPECT_EQ(message([](auto& o) { o.worker_rdzv_timeout = std::chrono::seconds(0); }),
            "worker_rdzv_timeout 0 s must be at least 1 s");
}

// A port taken from the environment is checked like one given as an option.
TEST(LaunchOptionsValidate, ValuesFromTheEnvironmentAreCheckedToo) {
  launch::LaunchOptions o;
  o.args = {"train"};
  o.nnodes = 2;
  o.master_addr = "h";
  EXPECT_EQ(test_util::message_of<UsageError>([&] {
              launch::resolve_topology(o, {{"MASTER_PORT", "70000"}});
            }),
            "master_port 70000 must be in [0, 65535]");
}

TEST(LocalLauncher, WorkersGetTheRendezvousTimeoutWhenGiven) {
  test_util::TempDir dir;
  launch::LaunchOptions o;
  o.program = "/bin/sh";
  o.args = {"-c", "echo timeout=${CHEXSCALE_RDZV_TIMEOUT-unset}"};
  const std::string log = dir.path() + "/launch.log";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  o.output_fd = fd;
  o.error_fd = fd;
  EXPECT_EQ(launch::run_local_group(launch::resolve_topology(o, {})).exit_code, 0);
  o.worker_rdzv_timeout = std::chrono::seconds(42);
  EXPECT_EQ(launch::run_local_group(launch::resolve_topology(o, {})).exit_code, 0);
  ::close(fd);
  EXPECT_EQ(test_util::file_contents(log), "[rank 0] timeout=unset\n[rank 0] timeout=42\n");
}

}  // namespace
}  // namespace chexscale
