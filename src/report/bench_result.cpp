// bench.json to and from BenchResult (see bench_result.h).
#include "report/bench_result.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"
#include "report/json_fields.h"

namespace chexscale::report {
namespace {

using nlohmann::json;

constexpr const char* kBenchSchemaPrefix = "chexscale.bench/";

json step_times_json(const StepTimes& t) {
  json j{{"total", t.total}};
  for (const StepPhase& p : kStepPhases)
    j[p.name] = t.*p.seconds;
  return j;
}

StepTimes step_times_from_json(const json& j, const std::string& file) {
  StepTimes t;
  for (const StepPhase& p : kStepPhases)
    t.*p.seconds = get_field<double>(j, p.name, file);
  t.total = get_field<double>(j, "total", file);
  return t;
}

json rank_json(const RankResult& r) {
  json j{{"rank", r.rank}, {"images_per_sec", r.images_per_sec}};
  if (r.has_breakdown) j["breakdown_s"] = step_times_json(r.breakdown);
  return j;
}

RankResult rank_from_json(const json& j, const std::string& file) {
  RankResult r;
  r.rank = get_field<int>(j, "rank", file);
  r.images_per_sec = get_field<double>(j, "images_per_sec", file);
  r.has_breakdown = j.contains("breakdown_s");
  if (r.has_breakdown) r.breakdown = step_times_from_json(field(j, "breakdown_s", file), file);
  return r;
}

void check_positive(double value, const char* name, const std::string& file) {
  if (!(value > 0))
    throw DataError(fmt::format("{}: field '{}' must be > 0, is {}", file, name, value));
}

}  // namespace

json to_json(const BenchResult& r) {
  json per_rank = json::array();
  for (const RankResult& rank : r.per_rank)
    per_rank.push_back(rank_json(rank));
  json j{{"schema", kBenchSchema},
         {"label", r.label},
         {"arch", r.arch},
         {"image_size", r.image_size},
         {"batch_per_worker", r.batch_per_worker},
         {"world_size", r.world_size},
         {"nnodes", r.nnodes},
         {"backend", r.backend},
         {"hierarchical", r.hierarchical},
         {"hierarchical_auto", r.hierarchical_auto},
         {"shared_memory", r.shared_memory},
         {"overlap", r.overlap},
         {"compression", r.compression},
         {"bucket_mb", r.bucket_mb},
         {"data", r.data},
         {"threads_per_worker", r.threads_per_worker},
         {"device", r.device},
         {"amp", r.amp},
         {"channels_last", r.channels_last},
         {"warmup_steps", r.warmup_steps},
         {"steps", r.steps},
         {"elapsed_s", r.elapsed_s},
         {"images_per_sec", r.images_per_sec},
         {"images_per_sec_per_worker", r.images_per_sec_per_worker},
         {"step_time_s",
          {{"median", r.step_time_s.median},
           {"p10", r.step_time_s.p10},
           {"p90", r.step_time_s.p90},
           {"mean", r.step_time_s.mean}}},
         {"per_rank", per_rank},
         {"torch_version", r.torch_version},
         {"hostname", r.hostname},
         {"timestamp", r.timestamp}};
  if (r.has_breakdown) j["breakdown_s"] = step_times_json(r.breakdown);
  return j;
}

BenchResult from_json(const json& j, const std::string& file) {
  if (!j.is_object()) throw DataError(fmt::format("{}: not a JSON object", file));
  check_schema(j, kBenchSchemaPrefix, file);
  BenchResult r;
  r.label = get_optional<std::string>(j, "label", file, "");
  r.arch = get_field<std::string>(j, "arch", file);
  r.image_size = get_field<int64_t>(j, "image_size", file);
  r.batch_per_worker = get_field<int64_t>(j, "batch_per_worker", file);
  r.world_size = get_field<int>(j, "world_size", file);
  r.nnodes = get_optional<int>(j, "nnodes", file, 1);
  r.backend = get_optional<std::string>(j, "backend", file, "");
  r.hierarchical = get_optional<bool>(j, "hierarchical", file, false);
  r.hierarchical_auto = get_optional<bool>(j, "hierarchical_auto", file, false);
  r.shared_memory = get_optional<bool>(j, "shared_memory", file, false);
  r.overlap = get_optional<bool>(j, "overlap", file, true);
  r.compression = get_optional<std::string>(j, "compression", file, "none");
  r.bucket_mb = get_optional<double>(j, "bucket_mb", file, 0.0);
  r.data = get_optional<std::string>(j, "data", file, "");
  r.threads_per_worker = get_optional<int>(j, "threads_per_worker", file, 0);
  r.device = get_optional<std::string>(j, "device", file, "");
  r.amp = get_optional<std::string>(j, "amp", file, "");
  r.channels_last = get_optional<bool>(j, "channels_last", file, false);
  r.warmup_steps = get_optional<int64_t>(j, "warmup_steps", file, 0);
  r.steps = get_optional<int64_t>(j, "steps", file, 0);
  r.elapsed_s = get_optional<double>(j, "elapsed_s", file, 0.0);
  r.images_per_sec = get_field<double>(j, "images_per_sec", file);
  r.images_per_sec_per_worker = get_optional<double>(j, "images_per_sec_per_worker", file,
                                                     r.images_per_sec / std::max(1, r.world_size));
  const json& step_time = field(j, "step_time_s", file);
  r.step_time_s.median = get_field<double>(step_time, "median", file);
  r.step_time_s.p10 = get_optional<double>(step_time, "p10", file, 0.0);
  r.step_time_s.p90 = get_optional<double>(step_time, "p90", file, 0.0);
  r.step_time_s.mean = get_optional<double>(step_time, "mean", file, 0.0);
  r.has_breakdown = j.contains("breakdown_s");
  if (r.has_breakdown) {
    r.breakdown = step_times_from_json(field(j, "breakdown_s", file), file);
  } else {
    r.breakdown.total = r.step_time_s.median;
  }
  const json per_rank = get_optional<json>(j, "per_rank", file, json::array());
  if (!per_rank.is_array()) {
    throw DataError(fmt::format("{}: field 'per_rank' is not a list", file));
  }
  for (size_t i = 0; i < per_rank.size(); ++i)
    r.per_rank.push_back(rank_from_json(per_rank[i], fmt::format("{} (per_rank[{}])", file, i)));
  r.torch_version = get_optional<std::string>(j, "torch_version", file, "");
  r.hostname = get_optional<std::string>(j, "hostname", file, "");
  r.timestamp = get_optional<std::string>(j, "timestamp", file, "");
  check_positive(static_cast<double>(r.image_size), "image_size", file);
  check_positive(static_cast<double>(r.batch_per_worker), "batch_per_worker", file);
  check_positive(r.world_size, "world_size", file);
  check_positive(r.images_per_sec, "images_per_sec", file);
  return r;
}

}  // namespace chexscale::report
