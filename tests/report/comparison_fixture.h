// Two result sets the comparison tests share: bare metal and a slower Kubernetes set whose extra
// step time is known.
#pragma once

#include <vector>

#include "report/bench_fixture.h"
#include "report/result_set.h"

namespace chexscale::test_util {

// bare metal: 10 img/s on 1 worker, 19 on 2; kubernetes: 10 and 17.48 (8 % slower), its extra
// 2 workers' step time all in exposed communication (+0.15 s) and a little compute (+0.01 s).
inline std::vector<report::ResultSet> bare_metal_and_kubernetes(const TempDir& dir) {
  write_bench(dir, "bm", run_spec(1, 10.0));
  BenchSpec bm2 = run_spec(2, 19.0);
  bm2.comm_exposed = 0.02;
  const std::string bm = write_bench(dir, "bm", bm2);
  write_bench(dir, "k8s", run_spec(1, 10.0));
  BenchSpec k2 = run_spec(2, 17.48);
  k2.comm_exposed = 0.17;
  k2.backward = 0.81;
  const std::string k8s = write_bench(dir, "k8s", k2);
  return {report::load_result_set("bare-metal", bm), report::load_result_set("kubernetes", k8s)};
}

}  // namespace chexscale::test_util
