// Network profiles: the ring model's alpha and beta recovered from exact allreduce times, the
// latency clamped when the sizes cannot resolve it, the median of repeated rounds and the
// monotone curve of noisy rows (sizes out of order pooled and named as distrusted), refusals of
// what cannot be fitted at all, and the file's round trip and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "common/atomic_file.h"
#include "common/error.h"
#include "simulate/monotone_times.h"
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

TEST(NetworkProfile, KeepsTheMedianTimeOfEachMeasuredSizeInOrder) {
  const NetworkProfile p = fit_network_profile(
      "x", "gloo", 2, {{4'000'000, 0.05}, {1'000'000, 0.01}, {1'000'000, 0.06}, {1'000'000, 0.02}},
      0, 0);
  ASSERT_EQ(p.samples.size(), 2u);
  EXPECT_EQ(p.samples[0].bytes, 1'000'000);
  EXPECT_DOUBLE_EQ(p.samples[0].seconds, 0.02);  // the median, not the mean (0.03)
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

// Every fitted time at least the one of the size before.
void expect_non_decreasing(const std::vector<AllreduceSample>& curve) {
  for (size_t i = 1; i < curve.size(); ++i) {
    EXPECT_LT(curve[i - 1].bytes, curve[i].bytes) << i;
    EXPECT_LE(curve[i - 1].seconds, curve[i].seconds) << i;
  }
}

TEST(MonotoneTimes, MedianOfEachSizeByIncreasingSize) {
  const auto m =
      median_per_size({{4096, 3e-3}, {1024, 1e-3}, {4096, 1e-3}, {1024, 4e-3}, {4096, 2e-3}});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].bytes, 1024);
  EXPECT_DOUBLE_EQ(m[0].seconds, 2.5e-3);  // even count: the mean of the middle two
  EXPECT_EQ(m[1].bytes, 4096);
  EXPECT_DOUBLE_EQ(m[1].seconds, 2e-3);  // odd count: the middle one
}

TEST(MonotoneTimes, ARowFasterThanItsSmallerNeighbourIsPooledAndDistrusted) {
  // 1 MiB measured faster than 256 KiB (the 256 KiB round was slowed down by other work).
  const MonotoneTimes t =
      monotone_times({{64 << 10, 1e-3}, {256 << 10, 3e-3}, {1 << 20, 2e-3}, {4 << 20, 8e-3}});
  ASSERT_EQ(t.fitted.size(), 4u);
  expect_non_decreasing(t.fitted);
  EXPECT_DOUBLE_EQ(t.fitted[0].seconds, 1e-3);
  EXPECT_DOUBLE_EQ(t.fitted[1].seconds, 2.5e-3);  // the pooled pair's mean
  EXPECT_DOUBLE_EQ(t.fitted[2].seconds, 2.5e-3);
  EXPECT_DOUBLE_EQ(t.fitted[3].seconds, 8e-3);
  ASSERT_EQ(t.distrusted.size(), 2u);
  EXPECT_EQ(t.distrusted[0].bytes, 256 << 10);
  EXPECT_DOUBLE_EQ(t.distrusted[0].seconds, 3e-3);  // as measured, not as fitted
  EXPECT_EQ(t.distrusted[1].bytes, 1 << 20);
  EXPECT_DOUBLE_EQ(t.distrusted[1].seconds, 2e-3);
}

TEST(MonotoneTimes, PoolsBackwardsUntilTheCurveIsMonotone) {
  // 5, 3 pool to 4; then 2 is below that block: 5, 3, 2 pool to 10/3.
  const MonotoneTimes t = monotone_times({{1, 1.0}, {2, 5.0}, {3, 3.0}, {4, 2.0}, {5, 10.0}});
  expect_non_decreasing(t.fitted);
  for (size_t i : {1u, 2u, 3u})
    EXPECT_NEAR(t.fitted[i].seconds, 10.0 / 3, 1e-12) << i;
  EXPECT_DOUBLE_EQ(t.fitted[0].seconds, 1.0);
  EXPECT_DOUBLE_EQ(t.fitted[4].seconds, 10.0);
  ASSERT_EQ(t.distrusted.size(), 3u);
  EXPECT_EQ(t.distrusted.front().bytes, 2);
  EXPECT_EQ(t.distrusted.back().bytes, 4);
}

TEST(MonotoneTimes, MonotoneRowsAreKeptAndNoneDistrusted) {
  const std::vector<AllreduceSample> rows{{1, 1.0}, {2, 1.0}, {3, 2.0}};  // equal is in order
  const MonotoneTimes t = monotone_times(rows);
  ASSERT_EQ(t.fitted.size(), 3u);
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_DOUBLE_EQ(t.fitted[i].seconds, rows[i].seconds);
  EXPECT_TRUE(t.distrusted.empty());
}

TEST(NetworkProfile, MedianOfRoundsIgnoresOneSlowRoundPerSize) {
  // Three rounds of exact ring times; one round of each size slowed down 5x by a busy host.
  std::vector<AllreduceSample> rounds;
  int k = 0;
  for (const AllreduceSample& s : ring_samples(2, 50e-6, 1.25e8)) {
    for (int round = 0; round < 3; ++round)
      rounds.push_back({s.bytes, round == k % 3 ? 5 * s.seconds : s.seconds});
    ++k;
  }
  const NetworkProfile p = fit_network_profile("loop", "gloo", 2, rounds, 0, 0);
  EXPECT_NEAR(p.latency_s, 50e-6, 50e-6 * 1e-6);
  EXPECT_NEAR(p.bandwidth_bytes_per_s, 1.25e8, 1.25e8 * 1e-6);
  EXPECT_TRUE(p.distrusted.empty());
}

TEST(NetworkProfile, NoisyRowsOutOfOrderAreFittedMonotoneAndNamed) {
  // The loaded `make test` run: 1 MiB faster than 256 KiB. The fit goes on with the pooled
  // curve instead of refusing, and the profile names both sizes of the pool.
  const std::vector<AllreduceSample> rows{
      {64 << 10, 400e-6}, {256 << 10, 2600e-6}, {1 << 20, 1800e-6}, {4 << 20, 7000e-6}};
  const NetworkProfile p = fit_network_profile("intra-node", "gloo", 2, rows, 0, 0);
  EXPECT_GT(p.bandwidth_bytes_per_s, 0);
  EXPECT_GE(p.latency_s, 0);
  ASSERT_EQ(p.samples.size(), 4u);
  expect_non_decreasing(p.samples);
  EXPECT_DOUBLE_EQ(p.samples[1].seconds, 2200e-6);
  ASSERT_EQ(p.distrusted.size(), 2u);
  EXPECT_EQ(p.distrusted[0].bytes, 256 << 10);
  EXPECT_EQ(p.distrusted[1].bytes, 1 << 20);
  EXPECT_DOUBLE_EQ(p.distrusted[1].seconds, 1800e-6);
}

TEST(NetworkProfile, RefusesWhatCannotBeFitted) {
  const auto samples = ring_samples(2, 1e-5, 1e8);
  EXPECT_THROW(fit_network_profile("x", "gloo", 1, samples, 0, 0), UsageError);
  EXPECT_THROW(fit_network_profile("x", "gloo", 2, {{1024, 1e-3}, {1024, 2e-3}}, 0, 0), UsageError);
  // Times that fall as sizes grow pool into one flat curve: no bandwidth.
  EXPECT_THROW(fit_network_profile("x", "gloo", 2, {{1024, 2e-3}, {1 << 20, 1e-3}}, 0, 0),
               UsageError);
  EXPECT_THROW(
      fit_network_profile("x", "gloo", 2, {{1024, 3e-3}, {4096, 1e-3}, {1 << 20, 2e-3}}, 0, 0),
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

  EXPECT_TRUE(back.distrusted.empty());
  NetworkProfile noisy = p;
  noisy.distrusted = {{4096, 2e-3}, {16384, 1e-3}};
  save_network_profile(noisy, path);
  const NetworkProfile noisy_back = load_network_profile(path);
  ASSERT_EQ(noisy_back.distrusted.size(), 2u);
  EXPECT_EQ(noisy_back.distrusted[1].bytes, 16384);
  EXPECT_DOUBLE_EQ(noisy_back.distrusted[1].seconds, 1e-3);
  nlohmann::json bad = to_json(noisy);
  bad["distrusted"][0]["seconds"] = 0;
  write_file_atomic(path, bad.dump());
  try {
    load_network_profile(path);
    FAIL() << "a distrusted row of 0 s loaded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("distrusted[0]"), std::string::npos) << e.what();
  }

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
