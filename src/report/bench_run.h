// One bench.json as a result set holds it: the parsed result, the file it came from and its round.
#pragma once

#include <string>

#include "report/bench_result.h"

namespace chexscale::report {

// One bench.json (schema chexscale.bench/1): one worker count of one system, and where it was read.
struct BenchRun : BenchResult {
  std::string file;  // where it was read from
  int round = 0;     // K of a bench-w<N>-r<K>.json file (one round of several); 0 for a single run
};

}  // namespace chexscale::report
