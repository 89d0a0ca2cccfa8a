// `chexscale bench` end to end with real processes: a 2-rank job through the launcher (bench.json
// consistent with itself, a merged timeline of both ranks), a 1,2 sweep whose efficiency follows
// from its own runs, and the GPU-path flags (--amp, --device, --channels-last; with train and env
// for the shared flags): mistakes are usage errors with the way out, and a bf16 channels-last
// benchmark runs on the CPU and says so in bench.json. Tiny workload (resnet18, 32x32, batch 2).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>

#include "common/atomic_file.h"
#include "test_util/chexscale_cli.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

using nlohmann::json;

const std::string kTinyWorkload =
    " --arch resnet18 --image-size 32 --batch-size 2 --steps 3 --warmup-steps 1 --threads 1";

void expect_consistent_run(const json& r, int world) {
  EXPECT_EQ(r["schema"], "chexscale.bench/1");
  EXPECT_EQ(r["world_size"], world);
  EXPECT_EQ(r["steps"], 3);
  EXPECT_EQ(r["data"], "synthetic");
  const double images = 1.0 * world * 2 * 3;
  const double ips = r["images_per_sec"].get<double>();
  EXPECT_NEAR(ips, images / r["elapsed_s"].get<double>(), 1e-9 * ips);
  EXPECT_NEAR(r["images_per_sec_per_worker"].get<double>(), ips / world, 1e-9 * ips);
  const json& s = r["step_time_s"];
  EXPECT_LE(s["p10"].get<double>(), s["median"].get<double>());
  EXPECT_LE(s["median"].get<double>(), s["p90"].get<double>());
  // Three timed steps cannot take longer than the whole timed interval.
  EXPECT_LE(3 * s["mean"].get<double>(), r["elapsed_s"].get<double>() * (1 + 1e-9));
  const json& b = r["breakdown_s"];
  const double parts = b["data_wait"].get<double>() + b["forward"].get<double>() +
                       b["backward"].get<double>() + b["comm_exposed"].get<double>() +
                       b["optimizer"].get<double>();
  EXPECT_GT(b["forward"].get<double>(), 0);
  EXPECT_GT(b["backward"].get<double>(), 0);
  // Synthetic batches are made before the timed steps and kept: no step waits for data.
  EXPECT_EQ(b["data_wait"].get<double>(), 0.0);
  EXPECT_LE(parts, b["total"].get<double>() * (1 + 1e-9));
  ASSERT_EQ(r["per_rank"].size(), static_cast<size_t>(world));
  for (int k = 0; k < world; ++k) {
    EXPECT_EQ(r["per_rank"][k]["rank"], k);
    // The job's rate uses the slowest rank's time, so no rank is slower than its share.
    EXPECT_GE(r["per_rank"][k]["images_per_sec"].get<double>(), ips / world * (1 - 1e-9));
  }
}

TEST(BenchCli, TwoRankJobWritesConsistentResultAndMergedTimeline) {
  test_util::TempDir dir;
  const std::string out = dir.path() + "/bench.json";
  const std::string trace = dir.path() + "/timeline.json";
  const auto r =
      test_util::run_chexscale("launch --nproc-per-node 2 -- bench" + kTinyWorkload +
                               " --label t --bucket-mb 4 --json " + out + " --timeline " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("exposed comm"), std::string::npos) << r.output;
  const json result = json::parse(read_file(out));
  expect_consistent_run(result, 2);
  EXPECT_EQ(result["label"], "t");
  EXPECT_EQ(result["backend"], "gloo");
  EXPECT_EQ(result["bucket_mb"], 4.0);

  const json timeline = json::parse(read_file(trace));
  std::set<int> ranks_with_steps;
  std::set<std::string> phases;
  int allreduces = 0;
  for (const auto& e : timeline["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["tid"] == 0) {
      ranks_with_steps.insert(e["pid"].get<int>());
      phases.insert(e["name"].get<std::string>());
    } else {
      ++allreduces;
    }
  }
  EXPECT_EQ(ranks_with_steps, (std::set<int>{0, 1}));
  EXPECT_EQ(phases, (std::set<std::string>{"data_wait", "forward", "backward", "comm_exposed",
                                           "optimizer"}));
  // resnet18's 44 MiB of gradients in 4 MiB buckets: many allreduces per step on each rank.
  EXPECT_GE(allreduces, 2 * 4 * 5);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/timeline.rank1.json"));
}

TEST(BenchCli, SweepReportsEfficiencyFromItsRuns) {
  test_util::TempDir dir;
  const auto r = test_util::run_chexscale("bench --workers 1,2 --label sw --out " + dir.path() +
                                          kTinyWorkload);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("efficiency"), std::string::npos) << r.output;
  const json w1 = json::parse(read_file(dir.path() + "/bench-w1.json"));
  const json w2 = json::parse(read_file(dir.path() + "/bench-w2.json"));
  expect_consistent_run(w1, 1);
  expect_consistent_run(w2, 2);
  EXPECT_EQ(w1["backend"], "none");
  EXPECT_EQ(w1["breakdown_s"]["comm_exposed"], 0.0);
  const json sweep = json::parse(read_file(dir.path() + "/sweep.json"));
  EXPECT_EQ(sweep["schema"], "chexscale.sweep/1");
  EXPECT_EQ(sweep["label"], "sw");
  ASSERT_EQ(sweep["runs"].size(), 2u);
  EXPECT_EQ(sweep["runs"][1], w2);
  const double t1 = w1["images_per_sec"].get<double>();
  const double t2 = w2["images_per_sec"].get<double>();
  EXPECT_DOUBLE_EQ(sweep["scaling"][0]["efficiency"].get<double>(), 1.0);
  EXPECT_NEAR(sweep["scaling"][1]["efficiency"].get<double>(), t2 / (2 * t1), 1e-12);
}

TEST(BenchCli, BadOptionsAreUsageErrors) {
  for (const char* args : {"bench --steps 0", "bench --workers 1,x", "bench --workers 2,2"}) {
    const auto r = test_util::run_chexscale(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  }
  // Refused in the flag's name before any model is built, not by LibTorch in a forward pass.
  const auto small = test_util::run_chexscale("bench --arch densenet121 --image-size 24");
  EXPECT_EQ(small.exit_code, 2) << small.output;
  EXPECT_NE(small.output.find("--image-size 24 px is below densenet121's smallest input, 29 px"),
            std::string::npos)
      << small.output;
}

TEST(CliGpuFlags, Fp16OnTheCpuIsAUsageErrorWithTheWayOut) {
  for (const std::string cmd : {"bench --device cpu --amp fp16",
                                "train --device cpu --amp fp16 --data /nonexistent "
                                "--out /nonexistent/run"}) {
    const auto r = test_util::run_chexscale(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.output;
    EXPECT_NE(r.output.find("--amp fp16 needs a CUDA device"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("use --amp bf16 on CPU"), std::string::npos) << r.output;
  }
}

TEST(CliGpuFlags, UnknownAmpModeAndDeviceAreUsageErrors) {
  auto r = test_util::run_chexscale("bench --amp fp8");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--amp 'fp8': choose off, bf16 or fp16"), std::string::npos) << r.output;
  r = test_util::run_chexscale("env --device tpu");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--device 'tpu': choose auto, cpu or cuda"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("world size"), std::string::npos) << r.output;  // no half table
}

TEST(CliGpuFlags, Bf16ChannelsLastBenchRunsOnCpuAndIsRecorded) {
  test_util::TempDir dir;
  const std::string json_path = dir.path() + "/bench.json";
  const auto r = test_util::run_chexscale(
      "bench --device cpu --amp bf16 --channels-last --arch resnet18 --image-size 32 "
      "--batch-size 2 --steps 2 --warmup-steps 1 --threads 1 --json " +
      json_path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("device cpu, amp bf16, channels-last"), std::string::npos) << r.output;
  const auto doc = nlohmann::json::parse(read_file(json_path));
  EXPECT_EQ(doc["device"], "cpu");
  EXPECT_EQ(doc["amp"], "bf16");
  EXPECT_EQ(doc["channels_last"], true);
  EXPECT_GT(doc["images_per_sec"].get<double>(), 0);
}

}  // namespace
}  // namespace chexscale
