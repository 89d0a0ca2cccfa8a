// The JSON documents of the throughput benchmark: bench.json (one run, from every rank's
// measurements) and sweep.json (runs at several worker counts with their scaling efficiency).
// Field meanings: docs/bench-format.md.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "common/step_times.h"

namespace chexscale::bench {

inline constexpr const char* kBenchSchema = "chexscale.bench/1";
inline constexpr const char* kSweepSchema = "chexscale.sweep/1";

// What was run: the workload and the engine's settings.
struct BenchConfig {
  std::string label;
  std::string arch = "densenet121";
  int64_t image_size = 128;
  int64_t batch_per_worker = 16;
  int world_size = 1;
  int nnodes = 1;
  std::string backend = "none";
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

// One rank's measurement of the timed steps.
struct RankMeasurement {
  double elapsed_s = 0;          // wall time of all timed steps on this rank
  std::vector<StepTimes> steps;  // one entry per timed step (total includes data_wait)
};

// bench.json from every rank's measurement (index = rank); adds LibTorch version, host, time.
nlohmann::json bench_document(const BenchConfig& config, const std::vector<RankMeasurement>& ranks);

struct ScalingPoint {
  int workers = 0;
  double images_per_sec = 0;
  double efficiency = 0;  // T(N) * N0 / (N * T(N0)), N0 = the smallest worker count (usually 1)
};

// Scaling of bench documents run at different worker counts.
std::vector<ScalingPoint> scaling(const std::vector<nlohmann::json>& runs);

// sweep.json: the runs as given and their scaling.
nlohmann::json sweep_document(const std::string& label, const std::vector<nlohmann::json>& runs);

// "2026-11-29T15:40:00Z": the current UTC time.
std::string utc_timestamp();

// This machine's host name ("unknown" when it cannot be read).
std::string host_name();

}  // namespace chexscale::bench
