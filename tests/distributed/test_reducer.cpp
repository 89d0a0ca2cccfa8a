// The reducer's options: every Compression name reads back as itself, a bad name is refused
// listing the valid ones, and ReducerOptions::validate() names the bucket size it refuses.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "distributed/reducer.h"
#include "test_util/error_message.h"

namespace chexscale::distributed {
namespace {

std::string usage_message(const std::function<void()>& f) {
  return test_util::message_of<UsageError>(f);
}

TEST(CompressionNames, RoundTrip) {
  for (Compression c :
       {Compression::kNone, Compression::kFp16, Compression::kBf16, Compression::kPowerSgd}) {
    EXPECT_EQ(parse_compression(to_string(c)), c) << to_string(c);
  }
  EXPECT_STREQ(to_string(Compression::kBf16), "bf16");
  EXPECT_STREQ(to_string(Compression::kPowerSgd), "powersgd");
  EXPECT_EQ(usage_message([] { parse_compression("zip"); }),
            "compression 'zip': choose none, fp16, bf16 or powersgd");
}

TEST(ReducerOptionsValidate, DefaultsAreDdpsBucketSizes) {
  const ReducerOptions o;
  EXPECT_NO_THROW(o.validate());
  EXPECT_EQ(o.bucket_mb, kDefaultBucketMb);
  EXPECT_EQ(o.first_bucket_mb, kDefaultFirstBucketMb);
  EXPECT_EQ(o.compression, Compression::kNone);
}

TEST(ReducerOptionsValidate, BucketSizesThatAreNotPositiveNameTheirField) {
  ReducerOptions o;
  o.bucket_mb = 0;
  EXPECT_EQ(usage_message([&] { o.validate(); }), "bucket_mb 0 must be > 0");
  o.bucket_mb = std::nan("");
  EXPECT_EQ(usage_message([&] { o.validate(); }), "bucket_mb nan must be > 0");
  o = ReducerOptions{};
  o.first_bucket_mb = -1;
  EXPECT_EQ(usage_message([&] { o.validate(); }), "first_bucket_mb -1 must be > 0");
}

}  // namespace
}  // namespace chexscale::distributed
