// The cgroup CPU quota of this process (see cpu_quota.h).
#include "common/cpu_quota.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace chexscale {
namespace {

// The first line of `file`, or "" where it cannot be read.
std::string first_line(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

// Cores of one group's limit: quota over period where both parse and the quota is not -1 (v1)
// or "max" (v2); 0 otherwise.
double ratio(const std::string& quota, const std::string& period) {
  try {
    const double q = std::stod(quota), p = std::stod(period);
    return q > 0 && p > 0 ? q / p : 0;
  } catch (const std::exception&) {
    return 0;  // "max", empty: no limit
  }
}

double v1_limit(const std::string& dir) {
  return ratio(first_line(dir + "/cpu.cfs_quota_us"), first_line(dir + "/cpu.cfs_period_us"));
}

double v2_limit(const std::string& dir) {
  std::istringstream max(first_line(dir + "/cpu.max"));
  std::string quota, period;
  max >> quota >> period;
  return ratio(quota, period);
}

// The smallest limit of the groups from `path` up to the root under `mount`.
template <typename Limit>
double smallest_up(const std::string& mount, std::string path, Limit limit) {
  double smallest = 0;
  for (;;) {
    const double cores = limit(mount + (path == "/" ? "" : path));
    if (cores > 0) smallest = smallest > 0 ? std::min(smallest, cores) : cores;
    if (path.empty() || path == "/") return smallest;
    const size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
}

bool has_cpu_controller(const std::string& controllers) {
  std::istringstream list(controllers);
  std::string c;
  while (std::getline(list, c, ','))
    if (c == "cpu") return true;
  return false;
}

}  // namespace

double cgroup_cpu_quota_cores(const std::string& proc_cgroup, const std::string& root) {
  std::istringstream lines(proc_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    // hierarchy-ID:controller-list:path
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty() && line.compare(0, a, "0") == 0) {
      const double cores = smallest_up(root, path, v2_limit);
      if (cores > 0) return cores;
    } else if (has_cpu_controller(controllers)) {
      for (const char* mount : {"/cpu", "/cpu,cpuacct"}) {
        const double cores = smallest_up(root + mount, path, v1_limit);
        if (cores > 0) return cores;
      }
    }
  }
  return 0;
}

double cgroup_cpu_quota_cores() {
  std::ifstream in("/proc/self/cgroup");
  std::stringstream text;
  text << in.rdbuf();
  return cgroup_cpu_quota_cores(text.str(), "/sys/fs/cgroup");
}

}  // namespace chexscale
