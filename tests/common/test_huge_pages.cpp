// zeros_on_huge_pages(): zeros of the asked size and type, 2 MiB-aligned from one huge page up
// (the kernel is advised per buffer, so the alignment is what the code controls), writable and
// freed with the tensor; small buffers and non-float types work as torch::zeros.
#include <gtest/gtest.h>

#include <cstdint>

#include "common/huge_pages.h"

namespace chexscale {
namespace {

TEST(HugePages, LargeBuffersAreAlignedZerosOfTheType) {
  const int64_t numel = 3 * (kHugePageBytes / 4) + 5;  // not a whole number of huge pages
  torch::Tensor t = zeros_on_huge_pages(numel, torch::dtype(torch::kFloat));
  EXPECT_EQ(t.numel(), numel);
  EXPECT_EQ(t.dim(), 1);
  EXPECT_EQ(t.scalar_type(), torch::kFloat);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % kHugePageBytes, 0u);
  EXPECT_EQ(t.abs().sum().item<double>(), 0.0);
  t.fill_(2.0);
  EXPECT_EQ(t.sum().item<double>(), 2.0 * numel);
  EXPECT_FALSE(t.requires_grad());
}

TEST(HugePages, HalfBuffersAndViewsIntoThemWork) {
  torch::Tensor t = zeros_on_huge_pages(kHugePageBytes, torch::dtype(torch::kHalf));
  EXPECT_EQ(t.scalar_type(), torch::kHalf);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % kHugePageBytes, 0u);
  torch::Tensor slot = torch::empty({0}, t.options());
  slot.set_(t.storage(), 10, {4, 5}, {5, 1});  // as the reducer's gradient slots
  slot.fill_(1.0);
  EXPECT_EQ(t.to(torch::kFloat).sum().item<double>(), 20.0);
}

TEST(HugePages, SmallBuffersArePlainZeros) {
  torch::Tensor t = zeros_on_huge_pages(1000, torch::dtype(torch::kFloat));
  EXPECT_EQ(t.numel(), 1000);
  EXPECT_EQ(t.abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(t.storage().resizable());  // torch's own allocation, not a huge-page buffer
}

}  // namespace
}  // namespace chexscale
