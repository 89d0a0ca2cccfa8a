// The local launcher with real worker processes (the dist tests' worker): a job runs to the end
// with prefixed output; a failing worker tears the group down and its status comes back; with
// --max-restarts 1 the job completes; topology comes from flags and the environment.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/timer.h"
#include "launch/local_launcher.h"
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
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  c.output = text.str();
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

}  // namespace
}  // namespace chexscale
