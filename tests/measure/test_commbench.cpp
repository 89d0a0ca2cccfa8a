// commbench: size parsing, path names, option checks, the bus-bandwidth formula and the median
// row of repeated rounds (its real ranks through the launcher: tests/cli/test_cmd_commbench.cpp).
#include <gtest/gtest.h>

#include "common/error.h"
#include "measure/commbench.h"
#include "test_util/error_message.h"

namespace chexscale::measure {
namespace {

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

TEST(Commbench, PathNamesRoundTrip) {
  for (CommPath p : {CommPath::kRaw, CommPath::kReducer}) {
    EXPECT_EQ(parse_comm_path(to_string(p)), p) << to_string(p);
  }
  EXPECT_EQ(test_util::message_of<UsageError>([] { parse_comm_path("nccl"); }),
            "path 'nccl': choose raw or reducer");
}

TEST(CommOptionsValidate, RefusesEachBadValueNamingItsField) {
  const auto message = [](auto change) {
    CommOptions o;
    change(o);
    return test_util::message_of<UsageError>([&] { o.validate(); });
  };
  EXPECT_EQ(message([](auto&) {}), "(no expected exception)");
  EXPECT_EQ(message([](auto& o) { o.iterations = 0; }), "iterations 0 must be >= 1");
  EXPECT_EQ(message([](auto& o) { o.warmup = -1; }), "warmup -1 must be >= 0");
  EXPECT_EQ(message([](auto& o) { o.reducer.bucket_mb = 0; }), "bucket_mb 0 must be > 0");
}

TEST(Commbench, BusBandwidthIsAlgbwTimesTwoNMinusOneOverN) {
  EXPECT_DOUBLE_EQ(bus_bandwidth(3.0, 2), 3.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth(3.0, 3), 4.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth(2.0, 8), 3.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth(2.0, 1), 0.0);
}

// One round of `bytes` that took `us` microseconds.
CommRow round_of(int64_t bytes, double us, int64_t wrong, double cpu_s) {
  CommRow r;
  r.size_bytes = bytes;
  r.count = bytes / 4;
  r.time_us = us;
  r.round_time_us = {us};
  r.wrong = wrong;
  r.cpu_s = cpu_s;
  return r;
}

TEST(Commbench, MedianRowOfRoundsTakesTheMiddleTimeAndSumsTheRest) {
  // Rounds of 1 MiB: 1000, 5000 (slowed down by other work), 2000 us.
  const int64_t mib = 1 << 20;
  const CommRow r = median_row(
      {round_of(mib, 1000, 0, 0.5), round_of(mib, 5000, 1, 0.25), round_of(mib, 2000, 0, 0.25)}, 4);
  EXPECT_DOUBLE_EQ(r.time_us, 2000);
  EXPECT_EQ(r.round_time_us, (std::vector<double>{1000, 5000, 2000}));  // in the order measured
  EXPECT_DOUBLE_EQ(r.algbw_gbps, mib / 2000e-6 / 1e9);
  EXPECT_DOUBLE_EQ(r.busbw_gbps, r.algbw_gbps * 1.5);  // 2 (n-1)/n at n = 4
  EXPECT_EQ(r.wrong, 1);
  EXPECT_DOUBLE_EQ(r.cpu_s, 1.0);
  EXPECT_DOUBLE_EQ(median_row({round_of(mib, 1000, -1, 0), round_of(mib, 3000, -1, 0)}, 2).time_us,
                   2000);  // even count: the mean of the middle two
  EXPECT_EQ(median_row({round_of(mib, 1000, -1, 0), round_of(mib, 3000, -1, 0)}, 2).wrong, -1);
  EXPECT_THROW(median_row({}, 2), UsageError);
  EXPECT_THROW(median_row({round_of(mib, 1000, 0, 0), round_of(2 * mib, 1000, 0, 0)}, 2),
               UsageError);
}

}  // namespace
}  // namespace chexscale::measure
