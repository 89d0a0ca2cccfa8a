// The throughput benchmark's options: each refused value names its field (the CLI maps it to the
// flag), and the defaults are a valid benchmark.
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/limits.h"
#include "measure/throughput.h"
#include "test_util/error_message.h"

namespace chexscale::measure {
namespace {

TEST(ThroughputOptionsValidate, RefusesEachBadValueNamingItsField) {
  const auto message = [](auto change) {
    ThroughputOptions o;
    change(o);
    return test_util::message_of<UsageError>([&] { o.validate(); });
  };
  EXPECT_EQ(message([](auto&) {}), "(no expected exception)");
  EXPECT_EQ(message([](auto& o) { o.steps = 0; }), "steps 0 must be >= 1");
  EXPECT_EQ(message([](auto& o) { o.warmup_steps = -1; }), "warmup_steps -1 must be >= 0");
  EXPECT_EQ(message([](auto& o) { o.batch_size = 0; }), "batch_size 0 must be >= 1");
  EXPECT_EQ(message([](auto& o) { o.image_size = 15; }), "image_size 15 must be >= 16");
  EXPECT_EQ(message([](auto& o) { o.image_size = 28; }),
            "image_size 28 px is below densenet121's smallest input, 29 px (its pooling would "
            "leave no pixel)");
  EXPECT_EQ(message([](auto& o) {
              o.arch = "resnet18";
              o.image_size = 16;
            }),
            "(no expected exception)");
  EXPECT_EQ(message([](auto& o) { o.threads = 0; }),
            fmt::format("threads 0 is not in [1, {}]", kMaxThreads));
  EXPECT_EQ(message([](auto& o) { o.loader_threads = kMaxThreads + 1; }),
            fmt::format("loader_threads {} is not in [1, {}]", kMaxThreads + 1, kMaxThreads));
  EXPECT_EQ(message([](auto& o) { o.reducer.first_bucket_mb = 0; }),
            "first_bucket_mb 0 must be > 0");
}

}  // namespace
}  // namespace chexscale::measure
