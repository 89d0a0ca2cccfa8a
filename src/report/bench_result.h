// bench.json (schema chexscale.bench/1) as a type: what one throughput run ran and measured. The
// benchmark builds a BenchResult and writes it with to_json; the report reads files back with
// from_json; so both sides name every field once, here. Field meanings: docs/bench-format.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "common/step_times.h"

namespace chexscale::report {

inline constexpr const char* kBenchSchema = "chexscale.bench/1";

// What was run: the workload and the engine's settings.
struct BenchConfig {
  std::string label;
  std::string arch = "densenet121";
  int64_t image_size = 128;
  int64_t batch_per_worker = 16;
  int world_size = 1;
  int nnodes = 1;
  std::string backend = "none";
  bool hierarchical = false;  // allreduce node by node (--hierarchical on nodes of several ranks)
  // --hierarchical=auto chose `hierarchical` on the first steps (hierarchical_trial.h).
  bool hierarchical_auto = false;
  // The gradient buckets went through node shared memory (every rank on one node;
  // --no-shared-memory turns it off).
  bool shared_memory = false;
  bool overlap = true;
  std::string compression = "none";
  double bucket_mb = 25.0;
  std::string data = "synthetic";
  int threads_per_worker = 1;
  std::string device = "cpu";  // "cpu" or "cuda" (each rank its own GPU)
  std::string amp = "off";     // off | bf16 | fp16
  bool channels_last = false;
  int64_t warmup_steps = 0;
  int64_t steps = 0;
};

// Statistics of a sample of seconds.
struct TimeSummary {
  double median = 0;
  double p10 = 0;
  double p90 = 0;
  double mean = 0;
};

// One rank's own numbers.
struct RankResult {
  int rank = 0;
  double images_per_sec = 0;
  StepTimes breakdown;        // its median step
  bool has_breakdown = true;  // false: the file has none (e.g. a peer's result)
};

// One bench.json: the config, then what was measured.
struct BenchResult : BenchConfig {
  double elapsed_s = 0;
  double images_per_sec = 0;
  double images_per_sec_per_worker = 0;
  TimeSummary step_time_s;
  StepTimes breakdown;        // bench.json's breakdown_s (seconds per step)
  bool has_breakdown = true;  // false: no breakdown_s (e.g. a peer's result); total = median
  std::vector<RankResult> per_rank;
  std::string torch_version;
  std::string hostname;
  std::string timestamp;
};

// The bench.json object of `result` (breakdown_s left out without a breakdown).
nlohmann::json to_json(const BenchResult& result);

// Reads a bench.json object; `file` names it in errors. Fields the PyTorch peer or older files
// may lack have fallbacks (label, nnodes, backend, ..., breakdown_s; 0 or "" for numbers and
// names not shown in reports); arch, image_size, batch_per_worker, world_size, images_per_sec
// and step_time_s.median are required. Throws DataError naming the file and the field for a
// missing or mistyped field, a schema that is not chexscale.bench/, or a non-positive size.
BenchResult from_json(const nlohmann::json& j, const std::string& file);

}  // namespace chexscale::report
