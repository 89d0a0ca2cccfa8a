// Writes bench.json files for report tests, built field by field from the schema chexscale.bench/1
// (independently of the parser under test).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "test_util/temp_dir.h"

namespace chexscale::test_util {

struct BenchSpec {
  std::string arch = "densenet121";
  int image_size = 128;
  int batch = 16;
  int workers = 1;
  int threads = 1;
  double images_per_sec = 10.0;
  double data_wait = 0.001, forward = 0.4, backward = 0.8, comm_exposed = 0.0, optimizer = 0.05;
  double other = 0.0;  // added to the total beyond the phases
  std::string compression = "none";
  bool overlap = true;
};

// A spec with `workers` workers and `images_per_sec`; other fields keep their defaults.
inline BenchSpec run_spec(int workers, double images_per_sec = 10.0) {
  BenchSpec s;
  s.workers = workers;
  s.images_per_sec = images_per_sec;
  return s;
}

inline nlohmann::json bench_object(const BenchSpec& s) {
  const double total =
      s.data_wait + s.forward + s.backward + s.comm_exposed + s.optimizer + s.other;
  return {{"schema", "chexscale.bench/1"},
          {"label", "test"},
          {"arch", s.arch},
          {"image_size", s.image_size},
          {"batch_per_worker", s.batch},
          {"world_size", s.workers},
          {"nnodes", s.workers},
          {"backend", s.workers > 1 ? "gloo" : "none"},
          {"overlap", s.overlap},
          {"compression", s.compression},
          {"bucket_mb", 25.0},
          {"data", "synthetic"},
          {"threads_per_worker", s.threads},
          {"warmup_steps", 2},
          {"steps", 10},
          {"images_per_sec", s.images_per_sec},
          {"images_per_sec_per_worker", s.images_per_sec / s.workers},
          {"step_time_s", {{"median", total}, {"p10", total}, {"p90", total}, {"mean", total}}},
          {"breakdown_s",
           {{"data_wait", s.data_wait},
            {"forward", s.forward},
            {"backward", s.backward},
            {"comm_exposed", s.comm_exposed},
            {"optimizer", s.optimizer},
            {"total", total}}},
          {"per_rank", nlohmann::json::array()},
          {"torch_version", "1.13.0"},
          {"hostname", "test"},
          {"timestamp", "2026-01-01T00:00:00Z"}};
}

// Writes dir/sub/bench-w<workers>.json and returns the folder dir/sub.
inline std::string write_bench(const TempDir& dir, const std::string& sub, const BenchSpec& s) {
  dir.write(sub + "/bench-w" + std::to_string(s.workers) + ".json", bench_object(s).dump(2));
  return dir.path() + "/" + sub;
}

// Writes dir/sub/bench-w<workers>-r<round>.json (round `round` of several) and returns dir/sub.
inline std::string write_bench_round(const TempDir& dir, const std::string& sub, const BenchSpec& s,
                                     int round) {
  dir.write(sub + "/bench-w" + std::to_string(s.workers) + "-r" + std::to_string(round) + ".json",
            bench_object(s).dump(2));
  return dir.path() + "/" + sub;
}

}  // namespace chexscale::test_util
