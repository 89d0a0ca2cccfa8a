// `chexscale commbench` with real ranks through the launcher (Gloo over loopback): 2- and 3-rank
// allreduces checked element by element, raw (float32 and float16) and through the reducer, the
// bus-bandwidth gate, and one rank refused.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "test_util/chexscale_cli.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

using nlohmann::json;

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

TEST(CommbenchRanks, Float16RawAllreduceSumsWithinRoundingAndItsProfileSaysItsType) {
  test_util::TempDir dir;
  const std::string profile = dir.path() + "/half.json";
  const json doc =
      run_commbench(2, "-b 64K -e 1M -f 4 -n 2 -w 1 --dtype float16 --profile " + profile, dir);
  EXPECT_EQ(doc["type"], "half");
  ASSERT_EQ(doc["rows"].size(), 3u);
  EXPECT_EQ(doc["rows"][0]["count"], 65536 / 2);  // 2-byte elements
  for (const json& row : doc["rows"])
    EXPECT_EQ(row["wrong"], 0);
  const json p = json::parse(read_file(profile));
  EXPECT_EQ(p["dtype"], "float16");
  EXPECT_EQ(p["samples"].size(), 3u);
  // The reducer's payload follows --grad-compression, not --dtype.
  auto r = test_util::run_chexscale(
      "launch --nproc-per-node 2 -- commbench -b 64K -e 64K --path reducer --dtype float16");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--dtype float16 is of the raw path"), std::string::npos) << r.output;
  // Gloo of LibTorch 1.13 has no bfloat16 sum: a clear error on every rank, not a hang.
  r = test_util::run_chexscale(
      "launch --nproc-per-node 2 -- commbench -b 64K -e 64K -n 1 -w 0 --dtype bfloat16");
  if (r.exit_code != 0) {
    EXPECT_NE(r.output.find("--dtype bfloat16: the gloo backend of this LibTorch"),
              std::string::npos)
        << r.output;
  } else {
    EXPECT_NE(r.output.find("bfloat16"), std::string::npos) << r.output;
  }
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
}  // namespace chexscale
