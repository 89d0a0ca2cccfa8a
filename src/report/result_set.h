// Result sets for comparison reports: the bench.json files of one labelled system (a sweep over
// worker counts), loaded and validated, with errors that name the file and the field at fault.
#pragma once

#include <string>
#include <vector>

#include "report/bench_run.h"

namespace chexscale::report {

// The runs of one system, one per worker count, sorted by worker count. A label is given as
// SYSTEM[/VARIANT], e.g. "kubernetes/fp16"; variants of the baseline system are the references.
// The report names the set "SYSTEM · VARIANT" (label_of), e.g. "kubernetes · fp16".
// A worker count measured in rounds (bench-w<N>-r<K>.json) has its median run in `runs` and every
// round in `round_runs`.
struct ResultSet {
  std::string label;  // label_of(system, variant)
  std::string system;
  std::string variant;  // "" when the label has no "/VARIANT"
  std::string source;   // the directory or file given
  std::vector<BenchRun> runs;
  std::vector<BenchRun> round_runs;  // sorted by worker count, then round; empty without rounds

  // The run with `workers` workers, or nullptr.
  const BenchRun* run_with(int workers) const;
  // The rounds of the worker count `workers` (empty when it was measured once).
  std::vector<BenchRun> rounds_with(int workers) const;
};

// The name a report shows for a set: "SYSTEM · VARIANT", or SYSTEM without a variant.
std::string label_of(const std::string& system, const std::string& variant);

// Terminal columns a name takes: its characters (UTF-8 code points), not its bytes.
size_t label_width(const std::string& label);

// Parses one bench.json text; `file` names it in errors (DataError).
BenchRun parse_bench_json(const std::string& text, const std::string& file);

// Loads a result set from a directory (sweep.json, else bench-w<N>.json and bench-w<N>-r<K>.json
// files, else bench.json) or from a single bench.json file. Throws DataError naming missing or
// invalid files, and for a worker count given both as a single run and in rounds.
ResultSet load_result_set(const std::string& label, const std::string& path);

// Splits "LABEL=PATH" (UsageError when malformed) and loads it.
ResultSet load_result_set_spec(const std::string& spec);

}  // namespace chexscale::report
