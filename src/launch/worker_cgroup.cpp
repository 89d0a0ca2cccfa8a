// Per-worker cgroup paths and their checks (see worker_cgroup.h).
#include "launch/worker_cgroup.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace chexscale::launch {

std::vector<std::string> worker_cgroup_files(const std::vector<std::string>& templates,
                                             int local_rank) {
  std::vector<std::string> files;
  const std::string placeholder = kLocalRankPlaceholder;
  for (std::string dir : templates) {
    for (size_t at = dir.find(placeholder); at != std::string::npos;
         at = dir.find(placeholder, at)) {
      dir.replace(at, placeholder.size(), std::to_string(local_rank));
    }
    while (dir.size() > 1 && dir.back() == '/')
      dir.pop_back();
    files.push_back(dir + "/cgroup.procs");
  }
  return files;
}

void check_worker_cgroups(const std::vector<std::string>& templates, int nproc_per_node) {
  for (const auto& t : templates) {
    if (t.empty()) throw UsageError("--worker-cgroup: an empty directory");
    if (nproc_per_node > 1 && t.find(kLocalRankPlaceholder) == std::string::npos) {
      throw UsageError(fmt::format(
          "--worker-cgroup {}: {} workers per node would share one cgroup; put {} in the path "
          "(one group per worker)",
          t, nproc_per_node, kLocalRankPlaceholder));
    }
  }
  for (int local = 0; local < nproc_per_node; ++local) {
    for (const auto& file : worker_cgroup_files(templates, local)) {
      if (::access(file.c_str(), W_OK) != 0) {
        throw UsageError(fmt::format(
            "--worker-cgroup: cannot join {} for local rank {} ({}): make the cgroup first "
            "(and run as its owner)",
            file, local, std::strerror(errno)));
      }
    }
  }
}

}  // namespace chexscale::launch
