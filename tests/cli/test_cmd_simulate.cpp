// `chexscale simulate` end to end, and the flags that write its inputs: `bench --profile` on a
// real one-worker run (gradient sizes and shapes that add up to the model's parameter count,
// gradients ready in reverse layer order, PowerSGD's measured rate), `commbench --profile` over
// loopback with real ranks (medians of rounds, a monotone fit, its distrusted sizes named), a
// two-system simulation of hand-made profiles checked against steps worked out by hand, fp16
// jobs on a path's float16 profile, PowerSGD's factors on the wire, its predicted runs read back
// by `chexscale report`, and the mistakes a user makes.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include "common/atomic_file.h"
#include "test_util/chexscale_cli.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

using nlohmann::json;

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kResnet18Parameters = 11'183'694;  // `chexscale models`, torchvision's count

// The three-layer profile of tests/simulate: 10 MiB gradients ready at 0.2, 0.1, 0.05 s.
json three_layer_profile() {
  json params = json::array();
  for (double ready : {0.2, 0.1, 0.05})
    params.push_back({{"bytes", 10 * kMiB}, {"ready_s", ready}});
  return {{"schema", "chexscale.compute-profile/1"},
          {"arch", "toy"},
          {"image_size", 32},
          {"batch_per_worker", 8},
          {"phases_s",
           {{"data_wait", 0},
            {"forward", 0.1},
            {"backward", 0.2},
            {"optimizer", 0.05},
            {"step", 0.35}}},
          {"parameters", params}};
}

// A link without latency on which a 2-rank allreduce of 10 MiB takes `seconds`.
json link(double seconds) {
  return {{"schema", "chexscale.network-profile/1"},
          {"latency_s", 0},
          {"bandwidth_bytes_per_s", 10.0 * kMiB / seconds}};
}

TEST(SimulateCli, TwoSystemsTableJsonPredictedRunsAndCharts) {
  test_util::TempDir dir;
  const std::string d = dir.path();
  write_file_atomic(d + "/compute.json", three_layer_profile().dump());
  write_file_atomic(d + "/fabric.json", link(0.04).dump());
  write_file_atomic(d + "/overlay.json", link(0.08).dump());
  const auto r = test_util::run_chexscale(
      "simulate --compute " + d + "/compute.json --network fabric=" + d +
      "/fabric.json --network overlay=" + d +
      "/overlay.json --system bare-metal=fabric "
      "--system kubernetes=overlay --nodes 1,2 --bucket-mb 10 --first-bucket-mb 10 --steps 5 "
      "--out " +
      d + "/sim");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kubernetes"), std::string::npos) << r.output;
  const json doc = json::parse(read_file(d + "/sim/simulate.json"));
  const json& k8s = doc["systems"][1]["jobs"][1];
  // Two nodes: the last bucket (ready at 0.2 s) ends 0.04 s (fabric) or 0.09 s (overlay: queued)
  // after backward; steps of 0.39 s and 0.44 s against 0.35 s alone.
  EXPECT_NEAR(doc["systems"][0]["jobs"][1]["images_per_sec"].get<double>(), 16 / 0.39, 1e-6);
  EXPECT_NEAR(k8s["images_per_sec"].get<double>(), 16 / 0.44, 1e-6);
  EXPECT_NEAR(k8s["efficiency"].get<double>(), 0.35 / 0.44, 1e-9);
  EXPECT_NEAR(k8s["gap_pct"].get<double>(), 100 * (1 - 0.39 / 0.44), 1e-6);
  EXPECT_TRUE(std::filesystem::exists(d + "/sim/throughput.svg"));
  EXPECT_TRUE(std::filesystem::exists(d + "/sim/breakdown.svg"));

  // The predicted runs are bench.json results: the report compares them like measured ones.
  const auto rep =
      test_util::run_chexscale("report bare-metal=" + d + "/sim/runs/bare-metal kubernetes=" + d +
                               "/sim/runs/kubernetes --no-charts --out " + d + "/rep");
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  const json report = json::parse(read_file(d + "/rep/report.json"));
  EXPECT_NE(report.dump().find("kubernetes"), std::string::npos);
}

TEST(SimulateCli, PowerSgdSendsTheFactorsOrSaysWhatTheProfileLacks) {
  test_util::TempDir dir;
  const std::string d = dir.path();
  json profile = three_layer_profile();  // written before shapes and the PowerSGD rate existed
  write_file_atomic(d + "/old.json", profile.dump());
  for (json& g : profile["parameters"])
    g["shape"] = {1280, 2048};  // 10 MiB of floats
  profile["powersgd_flops_per_s"] = 1e10;
  write_file_atomic(d + "/compute.json", profile.dump());
  write_file_atomic(d + "/fabric.json", link(0.04).dump());
  const std::string args = " --network fabric=" + d +
                           "/fabric.json --nodes 2 --bucket-mb 10 --first-bucket-mb 10 "
                           "--grad-compression powersgd:4 --no-charts --out " +
                           d + "/sim";
  auto r = test_util::run_chexscale("simulate --compute " + d + "/compute.json" + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json job = json::parse(read_file(d + "/sim/simulate.json"))["systems"][0]["jobs"][0];
  // Per bucket P = 1280 x 4 and Q = 2048 x 4 floats, in two allreduces.
  EXPECT_EQ(job["allreduces_per_step"], 6);
  EXPECT_EQ(job["wire_bytes_per_step"], 3 * (1280 + 2048) * 4 * 4);
  EXPECT_GT(job["compression_seconds_per_step"].get<double>(), 0.0);
  r = test_util::run_chexscale("simulate --compute " + d + "/old.json" + args);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("needs the parameters' shapes"), std::string::npos) << r.output;
}

TEST(SimulateCli, Fp16JobsUseThePathsFloat16ProfileWhereOneIsGiven) {
  test_util::TempDir dir;
  const std::string d = dir.path();
  write_file_atomic(d + "/compute.json", three_layer_profile().dump());
  write_file_atomic(d + "/fabric.json", link(0.04).dump());
  json half = link(0.16);  // 16-bit reductions at a quarter of float32's bytes per second
  half["dtype"] = "float16";
  write_file_atomic(d + "/fabric-half.json", half.dump());
  const auto images_per_sec = [&](const std::string& networks) {
    const auto r = test_util::run_chexscale(
        "simulate --compute " + d + "/compute.json" + networks +
        " --nodes 2 --bucket-mb 10 --first-bucket-mb 10 --grad-compression fp16 --steps 5 "
        "--no-charts --out " +
        d + "/sim");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return std::make_pair(
        json::parse(read_file(d + "/sim/simulate.json"))["systems"][0]["jobs"][0]["images_per_sec"]
            .get<double>(),
        r.output);
  };
  // Float32's rates: 5 MiB per bucket at 0.02 s, the last one 0.02 s after backward.
  const auto [float32_only, warning] = images_per_sec(" --network fabric=" + d + "/fabric.json");
  EXPECT_NEAR(float32_only, 16 / 0.37, 1e-6);
  EXPECT_NE(warning.find("network 'fabric' has no float16 profile"), std::string::npos) << warning;
  // The float16 profile: 5 MiB at 0.08 s each, queued: 0.05-0.13, 0.13-0.21, 0.21-0.29.
  const auto [both, quiet] = images_per_sec(
      " --network fabric=" + d + "/fabric.json --network fabric=" + d + "/fabric-half.json");
  EXPECT_NEAR(both, 16 / (0.35 + 0.09), 1e-6);
  EXPECT_EQ(quiet.find("no float16 profile"), std::string::npos) << quiet;
  const auto r = test_util::run_chexscale("simulate --compute " + d + "/compute.json --network " +
                                          "fabric=" + d + "/fabric.json --network fabric=" + d +
                                          "/fabric.json --no-charts --out " + d + "/sim");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--network fabric is given twice with a float32 profile"),
            std::string::npos)
      << r.output;
}

TEST(SimulateCli, MistakesAreClearErrors) {
  test_util::TempDir dir;
  const std::string d = dir.path();
  write_file_atomic(d + "/compute.json", three_layer_profile().dump());
  write_file_atomic(d + "/fabric.json", link(0.04).dump());
  auto r =
      test_util::run_chexscale("simulate --compute " + d + "/compute.json --network fabric=" + d +
                               "/fabric.json --system kubernetes=overlay --out " + d);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--system kubernetes: no --network named 'overlay' (given: fabric)"),
            std::string::npos)
      << r.output;
  r = test_util::run_chexscale("simulate --compute " + d + "/fabric.json --network fabric=" + d +
                               "/fabric.json --out " + d);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("bench --workers 1 --profile"), std::string::npos) << r.output;
  r = test_util::run_chexscale("simulate --compute " + d + "/compute.json --network fabric" +
                               " --out " + d);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("expected NAME=PROFILE"), std::string::npos) << r.output;
  r = test_util::run_chexscale("bench --workers 1,2 --profile " + d + "/p.json");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--profile measures one worker"), std::string::npos) << r.output;
}

TEST(SimulateCli, BenchProfileRecordsEveryGradientOfTheRealModel) {
  test_util::TempDir dir;
  const std::string profile = dir.path() + "/compute.json";
  const auto r = test_util::run_chexscale(
      "bench --arch resnet18 --image-size 32 --batch-size 2 --steps 4 --warmup-steps 1 "
      "--threads 1 --out " +
      dir.path() + " --profile " + profile);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json p = json::parse(read_file(profile));
  EXPECT_EQ(p["schema"], "chexscale.compute-profile/1");
  EXPECT_EQ(p["arch"], "resnet18");
  EXPECT_EQ(p["step_spread"].size(), 4u);
  int64_t bytes = 0, elements = 0;
  for (const json& g : p["parameters"]) {
    bytes += g["bytes"].get<int64_t>();
    int64_t numel = 1;
    for (int64_t d : g["shape"].get<std::vector<int64_t>>())
      numel *= d;
    elements += numel;
  }
  EXPECT_EQ(bytes, 4 * kResnet18Parameters);
  EXPECT_EQ(elements, kResnet18Parameters);                          // every parameter's shape
  EXPECT_EQ(p["parameters"].front()["shape"], json({64, 3, 7, 7}));  // the stem's convolution
  // PowerSGD's arithmetic measured on one core: more than 10 MFLOP/s, less than 1 TFLOP/s.
  EXPECT_GT(p["powersgd_flops_per_s"].get<double>(), 1e7);
  EXPECT_LT(p["powersgd_flops_per_s"].get<double>(), 1e12);
  // The reducer's passes over ResNet-18's 45 MB of gradients: each takes some time, under 1 s.
  for (const char* pass : {"copy", "average", "casts"}) {
    EXPECT_GT(p["gradient_passes_s"][pass].get<double>(), 0.0) << pass;
    EXPECT_LT(p["gradient_passes_s"][pass].get<double>(), 1.0) << pass;
  }
  // Backward runs from the head to the stem: the first parameter (the stem's convolution) gets
  // its gradient after the last (the head's bias), and both within backward.
  const double backward = p["phases_s"]["backward"].get<double>();
  const double stem = p["parameters"].front()["ready_s"].get<double>();
  const double head = p["parameters"].back()["ready_s"].get<double>();
  EXPECT_GT(stem, head);
  EXPECT_LE(stem, backward);
  EXPECT_GE(head, 0.0);
}

TEST(SimulateCli, CommbenchProfileFitsLoopbackWithRealRanks) {
  // Sizes 4 KiB .. 16 MiB in three rounds: whatever a busy host does to single rounds and rows,
  // the profile is fitted (only a curve flat over a 4096x size range would refuse) and says
  // which sizes it distrusts, so every assertion holds under load.
  test_util::TempDir dir;
  const std::string profile = dir.path() + "/loop.json";
  const std::string rows = dir.path() + "/rows.json";
  const auto r = test_util::run_chexscale(
      "launch --nproc-per-node 2 -- commbench -b 4K -e 16M -f 4 -n 5 -w 2 --json " + rows +
      " --profile " + profile + " --profile-path intra-node");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("median of 3 rounds"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("# network profile 'intra-node'"), std::string::npos) << r.output;
  const json doc = json::parse(read_file(rows));
  EXPECT_EQ(doc["repeats"], 3);
  ASSERT_EQ(doc["rows"].size(), 7u);
  for (const json& row : doc["rows"]) {
    std::vector<double> t = row["round_time_us"].get<std::vector<double>>();
    ASSERT_EQ(t.size(), 3u) << row;
    std::sort(t.begin(), t.end());
    EXPECT_DOUBLE_EQ(row["time_us"].get<double>(), t[1]) << row;
  }
  const json p = json::parse(read_file(profile));
  EXPECT_EQ(p["schema"], "chexscale.network-profile/1");
  EXPECT_EQ(p["measured_world_size"], 2);
  EXPECT_GT(p["bandwidth_bytes_per_s"].get<double>(), 1e7);  // loopback moves > 10 MB/s
  EXPECT_GE(p["latency_s"].get<double>(), 0.0);
  EXPECT_GT(p["cpu_s_per_byte"].get<double>(), 0.0);
  ASSERT_EQ(p["samples"].size(), 7u);
  for (size_t i = 1; i < p["samples"].size(); ++i) {
    EXPECT_LE(p["samples"][i - 1]["seconds"].get<double>(),
              p["samples"][i]["seconds"].get<double>())
        << "the fitted curve is not monotone at " << i << ": " << p["samples"];
  }
  // Each distrusted size is a measured one, with the median time the rows file has for it, and
  // the output names it.
  for (const json& d : p["distrusted"]) {
    bool measured = false;
    for (const json& row : doc["rows"]) {
      if (row["size_bytes"] != d["bytes"]) continue;
      measured = true;
      EXPECT_NEAR(d["seconds"].get<double>(), row["time_us"].get<double>() * 1e-6, 1e-12) << d;
    }
    EXPECT_TRUE(measured) << d;
    EXPECT_NE(r.output.find(fmt::format("#   {} B: measured", d["bytes"].get<int64_t>())),
              std::string::npos)
        << r.output;
  }
  EXPECT_EQ(r.output.find("# distrusted sizes") != std::string::npos, !p["distrusted"].empty())
      << r.output;
}

}  // namespace
}  // namespace chexscale
