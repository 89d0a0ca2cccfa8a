// `chexscale launch --worker-cgroup`: each worker process is in its own cgroup from its first
// instruction (real cgroups of this machine: v2 where /sys/fs/cgroup is unified, else the v1
// cpu hierarchy; needs root, as the lab does); a group that vanishes after the check stops the
// worker with exit 127 instead of running it outside; bad templates are usage errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "launch/local_launcher.h"
#include "launch/worker_cgroup.h"
#include "test_util/chexscale_cli.h"
#include "test_util/error_message.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

// A hierarchy this process may make groups in: v2's root, or v1's cpu controller.
std::string cgroup_root() {
  if (::access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) return "/sys/fs/cgroup";
  return "/sys/fs/cgroup/cpu";
}

// Two groups <root>/chxtest-<pid>-w0 and -w1, removed (once empty) at the end.
struct TwoGroups {
  std::string base = fmt::format("{}/chxtest-{}-w", cgroup_root(), ::getpid());
  TwoGroups() {
    for (int i = 0; i < 2; ++i) {
      const std::string dir = base + std::to_string(i);
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        ADD_FAILURE() << "cannot make the cgroup " << dir << " (" << std::strerror(errno)
                      << "): this test needs root and a writable cgroup hierarchy";
      }
    }
  }
  ~TwoGroups() {
    for (int i = 0; i < 2; ++i)
      ::rmdir((base + std::to_string(i)).c_str());
  }
};

// Runs two /bin/sh workers with `script` under `o`; returns their prefixed output.
std::string run_two(launch::LaunchOptions o, const std::string& script, int* exit_code) {
  test_util::TempDir dir;
  o.nproc_per_node = 2;
  o.program = "/bin/sh";
  o.args = {"-c", script};
  const std::string log = dir.path() + "/launch.log";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  o.output_fd = fd;
  o.error_fd = fd;
  *exit_code = launch::run_local_group(launch::resolve_topology(o, {})).exit_code;
  ::close(fd);
  return test_util::file_contents(log);
}

TEST(WorkerCgroup, EachWorkerRunsInTheGroupOfItsLocalRank) {
  TwoGroups groups;
  launch::LaunchOptions o;
  o.worker_cgroups = {groups.base + launch::kLocalRankPlaceholder};
  int rc = -1;
  const std::string out = run_two(o, "cat /proc/self/cgroup", &rc);
  EXPECT_EQ(rc, 0) << out;
  const std::string leaf = groups.base.substr(cgroup_root().size());
  for (int rank = 0; rank < 2; ++rank) {
    // The line of this hierarchy ends in the worker's own group, not the other's.
    EXPECT_NE(out.find(fmt::format("[rank {}] ", rank)), std::string::npos) << out;
    bool found = false;
    for (size_t at = out.find(fmt::format("[rank {}] ", rank)); at != std::string::npos;
         at = out.find(fmt::format("[rank {}] ", rank), at + 1)) {
      const std::string line = out.substr(at, out.find('\n', at) - at);
      if (line.size() >= leaf.size() + 1 &&
          line.compare(line.size() - leaf.size() - 1, std::string::npos,
                       leaf + std::to_string(rank)) == 0) {
        found = true;
      }
    }
    EXPECT_TRUE(found) << "rank " << rank << " is not in " << groups.base << rank << ":\n" << out;
  }
}

TEST(WorkerCgroup, AGroupGoneAfterTheCheckStopsTheWorkerInsteadOfRunningItOutside) {
  TwoGroups groups;
  launch::LaunchOptions o;
  o.nproc_per_node = 2;
  o.program = "/bin/sh";
  o.args = {"-c", "echo ran outside"};
  o.worker_cgroups = {groups.base + launch::kLocalRankPlaceholder};
  test_util::TempDir dir;
  const std::string log = dir.path() + "/launch.log";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  o.output_fd = fd;
  o.error_fd = fd;
  const launch::LaunchOptions resolved = launch::resolve_topology(o, {});
  ASSERT_EQ(::rmdir((groups.base + "1").c_str()), 0) << std::strerror(errno);
  const int rc = launch::run_local_group(resolved).exit_code;
  ::close(fd);
  const std::string out = test_util::file_contents(log);
  EXPECT_EQ(rc, 127) << out;
  EXPECT_NE(out.find("[rank 1] chexscale launch: the worker cannot join its --worker-cgroup"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("[rank 1] ran outside"), std::string::npos) << out;
}

// `chexscale launch` as a user runs it: the flag (last before "--") and its environment variable
// CHEXSCALE_WORKER_CGROUP (how the lab's pods get it) both leave the worker's options after "--"
// to the worker, and both place it.
TEST(WorkerCgroup, TheFlagAndItsVariableLeaveTheWorkersOptionsAfterDashDashAlone) {
  TwoGroups groups;
  const std::string group = groups.base + "0";
  const std::string leaf = group.substr(cgroup_root().size());
  const auto flag =
      test_util::run_chexscale("launch --program /bin/sh --worker-cgroup '" + groups.base +
                               "{local_rank}' -- -c 'cat /proc/self/cgroup'");
  EXPECT_EQ(flag.exit_code, 0) << flag.output;
  EXPECT_NE(flag.output.find(leaf + "\n"), std::string::npos) << flag.output;
  const auto variable =
      test_util::run_chexscale("launch --program /bin/sh -- -c 'cat /proc/self/cgroup'",
                               {"CHEXSCALE_WORKER_CGROUP=" + group});
  EXPECT_EQ(variable.exit_code, 0) << variable.output;
  EXPECT_NE(variable.output.find(leaf + "\n"), std::string::npos) << variable.output;
}

TEST(WorkerCgroup, MissingGroupsAndASharedTemplateAreUsageErrors) {
  launch::LaunchOptions o;
  o.nproc_per_node = 2;
  o.program = "/bin/true";
  o.args = {"x"};
  o.worker_cgroups = {"/nonexistent/chx-{local_rank}"};
  const std::string missing =
      test_util::message_of<UsageError>([&] { launch::resolve_topology(o, {}); });
  EXPECT_NE(missing.find("/nonexistent/chx-0/cgroup.procs"), std::string::npos) << missing;
  o.worker_cgroups = {cgroup_root()};
  const std::string shared =
      test_util::message_of<UsageError>([&] { launch::resolve_topology(o, {}); });
  EXPECT_NE(shared.find("would share one cgroup"), std::string::npos) << shared;
}

TEST(WorkerCgroup, FilesReplaceEveryPlaceholderAndEndInCgroupProcs) {
  EXPECT_EQ(launch::worker_cgroup_files({"/a/n{local_rank}-w{local_rank}/", "/b"}, 3),
            (std::vector<std::string>{"/a/n3-w3/cgroup.procs", "/b/cgroup.procs"}));
}

}  // namespace
}  // namespace chexscale
