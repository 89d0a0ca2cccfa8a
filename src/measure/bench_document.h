// The result documents of the throughput benchmark: bench.json (one run, from every rank's
// measurements, typed as report::BenchResult) and sweep.json (runs at several worker counts with
// their scaling efficiency). Field meanings: docs/bench-format.md.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "common/step_times.h"
#include "report/bench_result.h"

namespace chexscale::measure {

inline constexpr const char* kSweepSchema = "chexscale.sweep/1";

// One rank's measurement of the timed steps.
struct RankMeasurement {
  double elapsed_s = 0;          // wall time of all timed steps on this rank
  std::vector<StepTimes> steps;  // one entry per timed step (total includes data_wait)
};

// bench.json from every rank's measurement (index = rank); adds LibTorch version, host, time.
report::BenchResult bench_document(const report::BenchConfig& config,
                                   const std::vector<RankMeasurement>& ranks);

struct ScalingPoint {
  int workers = 0;
  double images_per_sec = 0;
  double efficiency = 0;  // T(N) * N0 / (N * T(N0)), N0 = the smallest worker count (usually 1)
};

// Scaling of bench results run at different worker counts.
std::vector<ScalingPoint> scaling(const std::vector<report::BenchResult>& runs);

// sweep.json: the runs in the order run, and their scaling (one point per run, in that order).
struct SweepResult {
  std::string label;
  std::vector<report::BenchResult> runs;
  std::vector<ScalingPoint> scaling;
};

// The sweep of `runs` with its scaling.
SweepResult sweep_document(const std::string& label, std::vector<report::BenchResult> runs);

// The sweep.json object of `sweep`.
nlohmann::json to_json(const SweepResult& sweep);

// "2026-11-29T15:40:00Z": the current UTC time.
std::string utc_timestamp();

// This machine's host name ("unknown" when it cannot be read).
std::string host_name();

}  // namespace chexscale::measure
