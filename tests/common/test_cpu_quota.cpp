// cgroup_cpu_quota_cores(): the smallest CPU limit of a process's groups up to the root, read
// from cgroup v1 (cpu.cfs_quota_us / cpu.cfs_period_us, at <root>/cpu or <root>/cpu,cpuacct) or
// v2 (cpu.max) trees made by the test, 0 where no group has one; and from a real v1 group with a
// quota that a forked child joins, where this machine has the v1 cpu controller.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/cpu_quota.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

// A v1 group DIR (relative to ROOT) with its quota and period files.
void v1_group(const test_util::TempDir& root, const std::string& dir, const std::string& quota,
              const std::string& period) {
  root.write(dir + "/cpu.cfs_quota_us", quota + "\n");
  root.write(dir + "/cpu.cfs_period_us", period + "\n");
}

TEST(CpuQuota, V1GroupQuotaOverPeriod) {
  test_util::TempDir root;
  v1_group(root, "cpu", "-1", "100000");
  v1_group(root, "cpu/lab/w1", "15000", "100000");
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota_cores("3:cpuset:/\n2:cpu,cpuacct:/lab/w1\n0::/\n", root.path()),
                   0.15);
  // The controller named alone, and the mount named after both controllers.
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota_cores("1:cpu:/lab/w1\n", root.path()), 0.15);
  std::filesystem::rename(root.path() + "/cpu", root.path() + "/cpu,cpuacct");
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota_cores("1:cpu:/lab/w1\n", root.path()), 0.15);
}

TEST(CpuQuota, TheSmallestLimitUpToTheRootCounts) {
  test_util::TempDir root;
  v1_group(root, "cpu", "-1", "100000");
  v1_group(root, "cpu/lab", "50000", "100000");      // 0.5 core for the whole lab
  v1_group(root, "cpu/lab/w1", "-1", "100000");      // none of its own
  v1_group(root, "cpu/lab/w2", "200000", "100000");  // 2 cores, above its parent's
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota_cores("1:cpu:/lab/w1\n", root.path()), 0.5);
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota_cores("1:cpu:/lab/w2\n", root.path()), 0.5);
  v1_group(root, "cpu/lab/w3", "10000", "40000");
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota_cores("1:cpu:/lab/w3\n", root.path()), 0.25);
}

TEST(CpuQuota, V2CpuMax) {
  test_util::TempDir root;
  root.write("kubepods/pod1/cpu.max", "max 100000\n");
  root.write("kubepods/pod1/c1/cpu.max", "30000 100000\n");
  root.write("kubepods/pod2/cpu.max", "max 100000\n");
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota_cores("0::/kubepods/pod1/c1\n", root.path()), 0.3);
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota_cores("0::/kubepods/pod2\n", root.path()), 0.0);
}

TEST(CpuQuota, NoLimitOrNothingReadableIsZero) {
  test_util::TempDir root;
  v1_group(root, "cpu", "-1", "100000");
  EXPECT_EQ(cgroup_cpu_quota_cores("1:cpu:/\n", root.path()), 0.0);
  EXPECT_EQ(cgroup_cpu_quota_cores("1:cpu:/not/there\n", root.path()), 0.0);
  EXPECT_EQ(cgroup_cpu_quota_cores("4:memory:/x\n", root.path()), 0.0);  // no cpu controller
  EXPECT_EQ(cgroup_cpu_quota_cores("garbage\n\n", root.path()), 0.0);
  v1_group(root, "cpu/bad", "lots", "100000");
  EXPECT_EQ(cgroup_cpu_quota_cores("1:cpu:/bad\n", root.path()), 0.0);
}

// A real group at 0.35 core that a forked child joins before it reads its own quota.
TEST(CpuQuota, ARealV1GroupsQuotaIsRead) {
  const std::string mount = "/sys/fs/cgroup/cpu";
  if (::geteuid() != 0 || !std::filesystem::exists(mount + "/cpu.cfs_quota_us")) {
    GTEST_SKIP() << "needs root and the cgroup v1 cpu controller at " << mount;
  }
  const std::string group = mount + "/chexscale-test-quota-" + std::to_string(::getpid());
  ASSERT_TRUE(std::filesystem::create_directory(group));
  std::ofstream(group + "/cpu.cfs_period_us") << "100000\n";
  std::ofstream(group + "/cpu.cfs_quota_us") << "35000\n";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    std::ofstream(group + "/cgroup.procs") << "0\n";
    const double cores = cgroup_cpu_quota_cores();
    const ssize_t n = ::write(fds[1], &cores, sizeof cores);
    ::_exit(n == sizeof cores ? 0 : 1);
  }
  double cores = -1;
  const ssize_t n = ::read(fds[0], &cores, sizeof cores);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(fds[0]);
  ::close(fds[1]);
  // A reaped child can still be leaving the group for a moment.
  std::error_code gone;
  for (int i = 0; i < 200 && !std::filesystem::remove(group, gone); ++i)
    ::usleep(10000);
  EXPECT_FALSE(std::filesystem::exists(group));
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof cores));
  EXPECT_DOUBLE_EQ(cores, 0.35);
}

}  // namespace
}  // namespace chexscale
