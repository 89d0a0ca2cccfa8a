// A worker-count sweep of the throughput benchmark: each count runs as its own job through the
// local launcher (`chexscale launch --nproc-per-node N -- bench ...`), then the per-run
// bench.json files are joined into sweep.json with the scaling efficiency.
#pragma once

#include <string>
#include <vector>

#include "measure/bench_document.h"

namespace chexscale::measure {

// "1,2,4" -> {1, 2, 4}. UsageError for a non-number, a count < 1 or a repeated count.
std::vector<int> parse_worker_counts(const std::string& text);

struct SweepOptions {
  std::string executable;               // the chexscale binary (normally /proc/self/exe)
  std::vector<int> workers;             // worker counts, run in this order
  std::vector<std::string> bench_args;  // `bench` options for every run (no sweep, no output)
  std::string out_dir;                  // bench-w<N>.json and sweep.json go here
  std::string label;
  std::string timeline;  // "" or FILE: run N writes <FILE stem>-w<N>.json

  // Throws UsageError naming the field: no executable or out_dir, no worker count, a count < 1
  // or a repeated one.
  void validate() const;
};

// Runs every worker count (children inherit stdout/stderr), writes OUT/sweep.json and returns
// it; validates the options first. Error naming the worker count and exit status when a run
// fails.
SweepResult run_sweep(const SweepOptions& options);

// argv of the run with `workers` workers (exposed for tests).
std::vector<std::string> sweep_run_command(const SweepOptions& options, int workers);

// Where run `workers` writes its bench.json.
std::string sweep_run_path(const std::string& out_dir, int workers);

}  // namespace chexscale::measure
