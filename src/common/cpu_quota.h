// The CPU quota this process runs under, in cores: the cgroup's bandwidth limit (v1
// cpu.cfs_quota_us over cpu.cfs_period_us, v2 cpu.max), the smallest of the groups from this
// process's own up to the root. A compute profile records it, so that the simulator knows how
// much CPU a fixed-speed worker has for its communication as well as its compute.
#pragma once

#include <string>

namespace chexscale {

// The quota of this process's cgroups, from /proc/self/cgroup and /sys/fs/cgroup; 0 where none
// of them has one or they cannot be read (no cgroup file system, another mount layout).
double cgroup_cpu_quota_cores();

// The same from the text of a /proc/<pid>/cgroup file and the directory where the cgroup file
// systems are mounted (v1 controller "cpu" at <root>/cpu or <root>/cpu,cpuacct; v2 at <root>).
double cgroup_cpu_quota_cores(const std::string& proc_cgroup, const std::string& root);

}  // namespace chexscale
