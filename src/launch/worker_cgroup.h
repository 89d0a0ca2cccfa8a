// Per-worker cgroups (`chexscale launch --worker-cgroup`): every worker process joins a cgroup
// of its own before it runs its first instruction of the worker program, as Slurm's task/cgroup
// plugin binds each task. The lab uses it to make each worker a fixed-speed emulated device (a
// CPU quota per worker, lab/cpu_quota.sh); any cgroup controller works.
#pragma once

#include <string>
#include <vector>

namespace chexscale::launch {

// The placeholder a --worker-cgroup directory may hold: the worker's local rank.
inline constexpr const char* kLocalRankPlaceholder = "{local_rank}";

// The cgroup.procs files worker `local_rank` joins: each template with {local_rank} replaced,
// plus "/cgroup.procs" (cgroup v1 and v2 alike).
std::vector<std::string> worker_cgroup_files(const std::vector<std::string>& templates,
                                             int local_rank);

// Throws UsageError naming the file unless, for every local rank below nproc_per_node, every
// cgroup.procs file exists and this process may write it; and where nproc_per_node > 1 and a
// template lacks {local_rank} (the workers would share one group).
void check_worker_cgroups(const std::vector<std::string>& templates, int nproc_per_node);

}  // namespace chexscale::launch
