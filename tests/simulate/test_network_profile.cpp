// Network profiles: the ring model's alpha and beta recovered from exact allreduce times, the
// latency clamped when the sizes cannot resolve it, refusals of unusable measurements, and the
// file's round trip and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "common/atomic_file.h"
#include "common/error.h"
#include "simulate/network_profile.h"
#include "test_util/temp_dir.h"

namespace chexscale::simulate {
namespace {

// Exact ring times t(S) = 2 (n-1) (alpha + S / (n B)) for sizes 4 KiB .. 64 MiB.
std::vector<AllreduceSample> ring_samples(int n, double alpha, double bandwidth) {
  std::vector<AllreduceSample> s;
  for (int64_t bytes = 4096; bytes <= 64 * 1024 * 1024; bytes *= 4)
    s.push_back({bytes, 2.0 * (n - 1) * (alpha + bytes / (n * bandwidth))});
  return s;
}

TEST(NetworkProfile, FitRecoversLatencyAndBandwidthOfExactRingTimes) {
  for (int n : {2, 4}) {
    const NetworkProfile p =
        fit_network_profile("fabric", "gloo", n, ring_samples(n, 50e-6, 1.25e8), 0.5, 1e9);
    EXPECT_NEAR(p.latency_s, 50e-6, 50e-6 * 1e-6) << n;
    EXPECT_NEAR(p.bandwidth_bytes_per_s, 1.25e8, 1.25e8 * 1e-6) << n;
    EXPECT_LT(p.fit_max_error, 1e-9);
    EXPECT_DOUBLE_EQ(p.cpu_s_per_byte, 0.5e-9);
    EXPECT_EQ(p.path, "fabric");
    EXPECT_EQ(p.measured_world_size, n);
  }
}

TEST(NetworkProfile, KeepsTheMeanTimeOfEachMeasuredSizeInOrder) {
  const NetworkProfile p = fit_network_profile(
      "x", "gloo", 2, {{4'000'000, 0.05}, {1'000'000, 0.01}, {1'000'000, 0.02}}, 0, 0);
  ASSERT_EQ(p.samples.size(), 2u);
  EXPECT_EQ(p.samples[0].bytes, 1'000'000);
  EXPECT_DOUBLE_EQ(p.samples[0].seconds, 0.015);
  EXPECT_EQ(p.samples[1].bytes, 4'000'000);
}

TEST(NetworkProfile, NegativeInterceptRefitsThroughZeroLatency) {
  // Times exactly proportional to the size minus a little: the free fit's intercept is < 0.
  std::vector<AllreduceSample> s;
  for (int64_t bytes : {1'000'000, 2'000'000, 4'000'000})
    s.push_back({bytes, bytes * 1e-8 - 1e-5});
  const NetworkProfile p = fit_network_profile("x", "gloo", 2, s, 0, 0);
  EXPECT_EQ(p.latency_s, 0.0);
  EXPECT_GT(p.bandwidth_bytes_per_s, 0);
  EXPECT_GT(p.fit_max_error, 0);  // the clamped fit cannot be exact
}

TEST(NetworkProfile, RefusesWhatCannotBeFitted) {
  const auto samples = ring_samples(2, 1e-5, 1e8);
  EXPECT_THROW(fit_network_profile("x", "gloo", 1, samples, 0, 0), UsageError);
  EXPECT_THROW(fit_network_profile("x", "gloo", 2, {{1024, 1e-3}, {1024, 2e-3}}, 0, 0), UsageError);
  // Times that fall as sizes grow have no bandwidth.
  EXPECT_THROW(fit_network_profile("x", "gloo", 2, {{1024, 2e-3}, {1 << 20, 1e-3}}, 0, 0),
               UsageError);
  EXPECT_THROW(fit_network_profile("x", "gloo", 2, {{0, 1e-3}, {1024, 2e-3}}, 0, 0), UsageError);
}

TEST(NetworkProfile, FileRoundTripsAndBadFilesNameTheFileAndField) {
  test_util::TempDir dir;
  const NetworkProfile p =
      fit_network_profile("overlay", "gloo", 2, ring_samples(2, 80e-6, 3e7), 1.0, 1e8);
  const std::string path = dir.path() + "/overlay.json";
  save_network_profile(p, path);
  const NetworkProfile back = load_network_profile(path);
  EXPECT_EQ(back.path, "overlay");
  EXPECT_DOUBLE_EQ(back.latency_s, p.latency_s);
  EXPECT_DOUBLE_EQ(back.bandwidth_bytes_per_s, p.bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(back.cpu_s_per_byte, p.cpu_s_per_byte);
  EXPECT_EQ(back.dtype, "float32");
  ASSERT_EQ(back.samples.size(), 8u);  // 4 KiB .. 64 MiB by 4, as measured
  EXPECT_EQ(back.samples.front().bytes, 4096);
  EXPECT_DOUBLE_EQ(back.samples.back().seconds, p.samples.back().seconds);

  NetworkProfile half = p;
  half.dtype = "float16";
  save_network_profile(half, path);
  EXPECT_EQ(load_network_profile(path).dtype, "float16");
  nlohmann::json j = to_json(p);
  j["dtype"] = "int8";
  write_file_atomic(path, j.dump());
  EXPECT_THROW(load_network_profile(path), DataError);
  j = to_json(p);
  j["samples"][1]["bytes"] = 4096;  // not above the sample before
  write_file_atomic(path, j.dump());
  try {
    load_network_profile(path);
    FAIL() << "samples out of order loaded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("samples[1]"), std::string::npos) << e.what();
  }

  write_file_atomic(path, R"({"schema": "chexscale.bench/1", "latency_s": 0})");
  try {
    load_network_profile(path);
    FAIL() << "a bench.json read as a network profile";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": schema 'chexscale.bench/1'"), std::string::npos)
        << e.what();
  }
  write_file_atomic(path, R"({"schema": "chexscale.network-profile/1", "latency_s": 0})");
  try {
    load_network_profile(path);
    FAIL() << "a profile without bandwidth loaded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("bandwidth_bytes_per_s"), std::string::npos) << e.what();
  }
  write_file_atomic(path, R"({"schema": "chexscale.network-profile/1", "latency_s": 0,
                              "bandwidth_bytes_per_s": -5})");
  EXPECT_THROW(load_network_profile(path), DataError);
  write_file_atomic(path, "{not json");
  EXPECT_THROW(load_network_profile(path), DataError);
}

}  // namespace
}  // namespace chexscale::simulate
