// Bucket assignment: reverse registration order, a smaller first bucket, caps, dtype boundaries.
#include <gtest/gtest.h>

#include "distributed/bucket_plan.h"

namespace chexscale {
namespace {

std::vector<torch::Tensor> floats(std::vector<int64_t> sizes) {
  std::vector<torch::Tensor> out;
  for (int64_t n : sizes)
    out.push_back(torch::zeros({n}));
  return out;
}

TEST(BucketPlan, ReverseOrderWithSmallFirstBucketAndCap) {
  // 4-byte floats: sizes 100, 100, 100, 50, 10 elements = 400, 400, 400, 200, 40 bytes.
  const auto plan = distributed::plan_buckets(floats({100, 100, 100, 50, 10}), 240, 800);
  const std::vector<std::vector<size_t>> want{{4, 3}, {2, 1}, {0}};
  EXPECT_EQ(plan, want);
}

TEST(BucketPlan, OversizedParameterGetsItsOwnBucket) {
  const auto plan = distributed::plan_buckets(floats({10, 1000, 10}), 100, 100);
  const std::vector<std::vector<size_t>> want{{2}, {1}, {0}};
  EXPECT_EQ(plan, want);
}

TEST(BucketPlan, DtypeChangeStartsANewBucket) {
  auto params = floats({10, 10, 10});
  params[1] = torch::zeros({10}, torch::kFloat64);
  const auto plan = distributed::plan_buckets(params, 1 << 20, 1 << 20);
  const std::vector<std::vector<size_t>> want{{2}, {1}, {0}};
  EXPECT_EQ(plan, want);
}

}  // namespace
}  // namespace chexscale
