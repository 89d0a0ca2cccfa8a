// bench.json and sweep.json documents (see bench_document.h and docs/bench-format.md).
#include "bench/bench_document.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <ctime>

#include "bench/step_stats.h"
#include "common/error.h"
#include "common/torch_compat.h"

namespace chexscale::bench {
namespace {

using nlohmann::json;

json breakdown_json(const StepTimes& t) {
  return json{{"data_wait", t.data_wait}, {"forward", t.forward},
              {"backward", t.backward},   {"comm_exposed", t.comm_exposed},
              {"optimizer", t.optimizer}, {"total", t.total}};
}

json summary_json(const TimeSummary& s) {
  return json{{"median", s.median}, {"p10", s.p10}, {"p90", s.p90}, {"mean", s.mean}};
}

}  // namespace

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

json bench_document(const BenchConfig& config, const std::vector<RankMeasurement>& ranks) {
  CHX_CHECK_EQ(ranks.size(), static_cast<size_t>(config.world_size), "measurements per rank");
  const size_t steps = static_cast<size_t>(config.steps);
  for (const auto& r : ranks)
    CHX_CHECK_EQ(r.steps.size(), steps, "timed steps of a rank");
  CHX_CHECK(steps > 0, "a benchmark needs at least one timed step");

  double elapsed = 0;
  for (const auto& r : ranks)
    elapsed = std::max(elapsed, r.elapsed_s);
  const double images = static_cast<double>(config.world_size * config.batch_per_worker) *
                        static_cast<double>(config.steps);

  // Each step's time is the mean over ranks: ranks' step boundaries differ (one rank's slow
  // optimizer shows up as another's wait in the next allreduce), so a per-step maximum would count
  // such delays twice, while the mean keeps the steps' sum within the elapsed time.
  std::vector<double> step_totals(steps, 0.0);
  for (const auto& r : ranks) {
    for (size_t i = 0; i < steps; ++i)
      step_totals[i] += r.steps[i].total / ranks.size();
  }

  StepTimes mean_breakdown;
  json per_rank = json::array();
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    const StepTimes median = median_step(ranks[rank].steps);
    mean_breakdown += median;
    per_rank.push_back(
        {{"rank", rank},
         {"images_per_sec",
          static_cast<double>(config.batch_per_worker * config.steps) / ranks[rank].elapsed_s},
         {"breakdown_s", breakdown_json(median)}});
  }
  mean_breakdown = divided(mean_breakdown, static_cast<double>(ranks.size()));

  const double images_per_sec = images / elapsed;
  return json{{"schema", kBenchSchema},
              {"label", config.label},
              {"arch", config.arch},
              {"image_size", config.image_size},
              {"batch_per_worker", config.batch_per_worker},
              {"world_size", config.world_size},
              {"nnodes", config.nnodes},
              {"backend", config.backend},
              {"overlap", config.overlap},
              {"compression", config.compression},
              {"bucket_mb", config.bucket_mb},
              {"data", config.data},
              {"threads_per_worker", config.threads_per_worker},
              {"device", config.device},
              {"amp", config.amp},
              {"channels_last", config.channels_last},
              {"warmup_steps", config.warmup_steps},
              {"steps", config.steps},
              {"elapsed_s", elapsed},
              {"images_per_sec", images_per_sec},
              {"images_per_sec_per_worker", images_per_sec / config.world_size},
              {"step_time_s", summary_json(summarise(step_totals))},
              {"breakdown_s", breakdown_json(mean_breakdown)},
              {"per_rank", per_rank},
              {"torch_version", compat::torch_version()},
              {"hostname", host_name()},
              {"timestamp", utc_timestamp()}};
}

std::vector<ScalingPoint> scaling(const std::vector<json>& runs) {
  std::vector<ScalingPoint> points;
  for (const auto& run : runs) {
    ScalingPoint p;
    p.workers = run.at("world_size").get<int>();
    p.images_per_sec = run.at("images_per_sec").get<double>();
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

json sweep_document(const std::string& label, const std::vector<json>& runs) {
  json points = json::array();
  for (const auto& p : scaling(runs)) {
    points.push_back({{"workers", p.workers},
                      {"images_per_sec", p.images_per_sec},
                      {"efficiency", p.efficiency}});
  }
  return json{{"schema", kSweepSchema}, {"label", label}, {"runs", runs}, {"scaling", points}};
}

}  // namespace chexscale::bench
