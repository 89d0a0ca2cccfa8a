// The GPU-path flags through the real binary: --amp and --device mistakes are usage errors (exit
// 2) with the way out, before any work; a bf16 channels-last benchmark runs on the CPU and says so
// in bench.json.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "common/atomic_file.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

using test_util::run_chexscale;

TEST(CliGpuFlags, Fp16OnTheCpuIsAUsageErrorWithTheWayOut) {
  for (const std::string cmd : {"bench --device cpu --amp fp16",
                                "train --device cpu --amp fp16 --data /nonexistent "
                                "--out /nonexistent/run"}) {
    const auto r = run_chexscale(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.output;
    EXPECT_NE(r.output.find("--amp fp16 needs a CUDA device"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("use --amp bf16 on CPU"), std::string::npos) << r.output;
  }
}

TEST(CliGpuFlags, UnknownAmpModeAndDeviceAreUsageErrors) {
  auto r = run_chexscale("bench --amp fp8");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--amp must be off, bf16 or fp16, not 'fp8'"), std::string::npos)
      << r.output;
  r = run_chexscale("env --device tpu");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--device 'tpu': choose auto, cpu or cuda"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("world size"), std::string::npos) << r.output;  // no half table
}

TEST(CliGpuFlags, Bf16ChannelsLastBenchRunsOnCpuAndIsRecorded) {
  test_util::TempDir dir;
  const std::string json_path = dir.path() + "/bench.json";
  const auto r = run_chexscale(
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
