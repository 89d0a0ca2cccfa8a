// commbench: size parsing, path names, option checks and the bus-bandwidth formula (its real
// ranks through the launcher: tests/cli/test_cmd_commbench.cpp).
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

}  // namespace
}  // namespace chexscale::measure
