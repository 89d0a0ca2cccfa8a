// Images per second of wall time and per second of CPU time (the per-core cost, insensitive to
// other processes on a shared machine) of a function over a list of image files, each the best of
// several passes; shared by the data micro-benchmarks.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "common/timer.h"

namespace chexscale::microbench {

struct Rates {
  double wall = 0;
  double cpu = 0;
};

// fn(index, path) for every path, `repeats` passes.
template <typename Fn>
Rates rate(const std::vector<std::string>& paths, int repeats, Fn fn) {
  double best_wall = 1e30;
  double best_cpu = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const Stopwatch clock;
    const double cpu_start = process_cpu_seconds();
    for (size_t i = 0; i < paths.size(); ++i)
      fn(i, paths[i]);
    best_cpu = std::min(best_cpu, process_cpu_seconds() - cpu_start);
    best_wall = std::min(best_wall, clock.seconds());
  }
  const auto n = static_cast<double>(paths.size());
  return {n / best_wall, n / best_cpu};
}

}  // namespace chexscale::microbench
