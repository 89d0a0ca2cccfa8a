// bench.json and sweep.json documents (see bench_document.h and docs/bench-format.md).
#include "measure/bench_document.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <ctime>

#include "common/error.h"
#include "common/torch_compat.h"
#include "measure/step_stats.h"

namespace chexscale::measure {

std::string host_name() {
  std::array<char, 256> buf{};
  if (::gethostname(buf.data(), buf.size() - 1) != 0) return "unknown";
  return buf.data();
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf.data();
}

report::BenchResult bench_document(const report::BenchConfig& config,
                                   const std::vector<RankMeasurement>& ranks) {
  CHX_CHECK_EQ(ranks.size(), static_cast<size_t>(config.world_size), "measurements per rank");
  const size_t steps = static_cast<size_t>(config.steps);
  for (const auto& r : ranks)
    CHX_CHECK_EQ(r.steps.size(), steps, "timed steps of a rank");
  CHX_CHECK(steps > 0, "a benchmark needs at least one timed step");

  report::BenchResult result;
  static_cast<report::BenchConfig&>(result) = config;
  for (const auto& r : ranks)
    result.elapsed_s = std::max(result.elapsed_s, r.elapsed_s);
  const double images = static_cast<double>(config.world_size * config.batch_per_worker) *
                        static_cast<double>(config.steps);
  result.images_per_sec = images / result.elapsed_s;
  result.images_per_sec_per_worker = result.images_per_sec / config.world_size;

  // Each step's time is the mean over ranks: ranks' step boundaries differ (one rank's slow
  // optimizer shows up as another's wait in the next allreduce), so a per-step maximum would count
  // such delays twice, while the mean keeps the steps' sum within the elapsed time.
  std::vector<double> step_totals(steps, 0.0);
  for (const auto& r : ranks) {
    for (size_t i = 0; i < steps; ++i)
      step_totals[i] += r.steps[i].total / ranks.size();
  }
  result.step_time_s = summarise(step_totals);

  StepTimes breakdown_sum;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    report::RankResult r;
    r.rank = static_cast<int>(rank);
    r.images_per_sec =
        static_cast<double>(config.batch_per_worker * config.steps) / ranks[rank].elapsed_s;
    r.breakdown = median_step(ranks[rank].steps);
    breakdown_sum += r.breakdown;
    result.per_rank.push_back(r);
  }
  result.breakdown = breakdown_sum.scaled(1.0 / static_cast<double>(ranks.size()));
  result.torch_version = compat::torch_version();
  result.hostname = host_name();
  result.timestamp = utc_timestamp();
  return result;
}

std::vector<ScalingPoint> scaling(const std::vector<report::BenchResult>& runs) {
  std::vector<ScalingPoint> points;
  for (const auto& run : runs) {
    ScalingPoint p;
    p.workers = run.world_size;
    p.images_per_sec = run.images_per_sec;
    CHX_CHECK(p.workers > 0 && p.images_per_sec > 0, "run with {} workers and {} images/s",
              p.workers, p.images_per_sec);
    points.push_back(p);
  }
  if (points.empty()) return points;
  const auto base =
      *std::min_element(points.begin(), points.end(),
                        [](const auto& a, const auto& b) { return a.workers < b.workers; });
  for (auto& p : points) {
    p.efficiency = p.images_per_sec * base.workers / (p.workers * base.images_per_sec);
  }
  return points;
}

SweepResult sweep_document(const std::string& label, std::vector<report::BenchResult> runs) {
  SweepResult sweep;
  sweep.label = label;
  sweep.scaling = scaling(runs);
  sweep.runs = std::move(runs);
  return sweep;
}

nlohmann::json to_json(const SweepResult& sweep) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& run : sweep.runs)
    runs.push_back(report::to_json(run));
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : sweep.scaling) {
    points.push_back({{"workers", p.workers},
                      {"images_per_sec", p.images_per_sec},
                      {"efficiency", p.efficiency}});
  }
  return {{"schema", kSweepSchema}, {"label", sweep.label}, {"runs", runs}, {"scaling", points}};
}

}  // namespace chexscale::measure
