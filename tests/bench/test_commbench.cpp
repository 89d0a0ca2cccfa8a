// commbench: size parsing, the bus-bandwidth formula, and real 2- and 3-rank allreduces through
// the launcher (Gloo over loopback) checked element by element, raw and through the reducer.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/commbench.h"
#include "cli/cli_runner.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "test_util/temp_dir.h"

namespace chexscale::bench {
namespace {

using nlohmann::json;

TEST(Commbench, ParsesNcclTestsSizes) {
  EXPECT_EQ(parse_size("8"), 8);
  EXPECT_EQ(parse_size("512K"), 512 * 1024);
  EXPECT_EQ(parse_size("8M"), 8 * 1024 * 1024);
  EXPECT_EQ(parse_size("64MB"), int64_t{64} << 20);
  EXPECT_EQ(parse_size("1G"), int64_t{1} << 30);
  for (const char* bad : {"", "M", "8X", "-1", "0", "1.5M", "8 M"}) {
    EXPECT_THROW(parse_size(bad), UsageError) << bad;
  }
}

TEST(Commbench, SizeListMultipliesUpToMaxInWholeFloats) {
  const int64_t mib = 1 << 20;
  EXPECT_EQ(size_list(8 * mib, 64 * mib, 2),
            (std::vector<int64_t>{8 * mib, 16 * mib, 32 * mib, 64 * mib}));
  EXPECT_EQ(size_list(1000, 20000, 4), (std::vector<int64_t>{1000, 4000, 16000}));
  EXPECT_EQ(size_list(6, 6, 1), (std::vector<int64_t>{4}));  // rounded down to one float
  EXPECT_EQ(size_list(1, 1, 2), (std::vector<int64_t>{4}));  // at least one float
  EXPECT_THROW(size_list(64, 8, 2), UsageError);
  EXPECT_THROW(size_list(8, 64, 0), UsageError);
}

TEST(Commbench, BusBandwidthIsAlgbwTimesTwoNMinusOneOverN) {
  EXPECT_DOUBLE_EQ(bus_bandwidth(3.0, 2), 3.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth(3.0, 3), 4.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth(2.0, 8), 3.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth(2.0, 1), 0.0);
}

json run_commbench(int ranks, const std::string& args, const test_util::TempDir& dir) {
  const std::string out = dir.path() + "/comm.json";
  const auto r = test_util::run_chexscale("launch --nproc-per-node " + std::to_string(ranks) +
                                          " -- commbench " + args + " --json " + out);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("# Avg bus bandwidth : "), std::string::npos) << r.output;
  return json::parse(read_file(out));
}

TEST(CommbenchRanks, ThreeRanksRawAllreduceIsExactAndBusbwFollowsTime) {
  test_util::TempDir dir;
  const json doc = run_commbench(3, "-b 4K -e 64K -f 4 -n 3 -w 1 -c 1", dir);
  EXPECT_EQ(doc["schema"], "chexscale.commbench/1");
  EXPECT_EQ(doc["world_size"], 3);
  EXPECT_EQ(doc["path"], "raw");
  const auto& rows = doc["rows"];
  ASSERT_EQ(rows.size(), 3u);
  const int64_t sizes[] = {4096, 16384, 65536};
  double busbw_sum = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    EXPECT_EQ(row["size_bytes"], sizes[i]);
    EXPECT_EQ(row["count"], sizes[i] / 4);
    EXPECT_EQ(row["wrong"], 0);
    const double algbw = sizes[i] / (row["time_us"].get<double>() * 1e-6) / 1e9;
    EXPECT_NEAR(row["algbw_gbps"].get<double>(), algbw, 1e-9 * algbw);
    EXPECT_NEAR(row["busbw_gbps"].get<double>(), algbw * 4.0 / 3.0, 1e-9 * algbw);
    busbw_sum += row["busbw_gbps"].get<double>();
  }
  EXPECT_NEAR(doc["avg_busbw_gbps"].get<double>(), busbw_sum / 3, 1e-12 + 1e-9 * busbw_sum);
}

TEST(CommbenchRanks, ReducerPathAveragesExactlyBesideRawPath) {
  test_util::TempDir dir;
  // 12 MiB of gradients in 4 MiB tensors with 4 MiB buckets: several buckets per reduction.
  const json doc =
      run_commbench(2, "-b 12M -e 12M -n 2 -w 1 -c 1 --path reducer --compare --bucket-mb 4", dir);
  EXPECT_EQ(doc["path"], "reducer");
  ASSERT_EQ(doc["rows"].size(), 1u);
  EXPECT_EQ(doc["rows"][0]["wrong"], 0);
  ASSERT_EQ(doc["compare"].size(), 1u);
  const auto& c = doc["compare"][0];
  EXPECT_GE(c["buckets"].get<int>(), 3);
  EXPECT_NEAR(c["ratio"].get<double>(),
              c["reducer_busbw_gbps"].get<double>() / c["raw_busbw_gbps"].get<double>(), 1e-9);
  EXPECT_DOUBLE_EQ(c["reducer_busbw_gbps"].get<double>(),
                   doc["rows"][0]["busbw_gbps"].get<double>());
}

TEST(CommbenchRanks, MinBusbwGateFailsBelowTheThreshold) {
  const auto r = test_util::run_chexscale(
      "launch --nproc-per-node 2 -- commbench -b 64K -e 64K -n 2 -w 1 --min-busbw 100000");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("below --min-busbw"), std::string::npos) << r.output;
}

TEST(CommbenchRanks, OneRankIsAUsageError) {
  const auto r = test_util::run_chexscale("commbench -b 4K -e 4K");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("at least 2 ranks"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace chexscale::bench
