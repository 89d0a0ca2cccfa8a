// DistributedSampler semantics: disjoint rank slices that cover the epoch, equal lengths with
// padding from the epoch's start, a new permutation per epoch, reproducible.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/sampler.h"

namespace chexscale::data {
namespace {

TEST(Sampler, RankSlicesAreDisjointAndCoverTheEpoch) {
  const int64_t n = 103;
  const int world = 4;
  std::vector<int64_t> all;
  for (int r = 0; r < world; ++r) {
    const auto mine = DistributedSampler(n, r, world, true, 9).epoch_indices(3);
    EXPECT_EQ(static_cast<int64_t>(mine.size()), 26);  // ceil(103 / 4)
    all.insert(all.end(), mine.begin(), mine.end());
  }
  ASSERT_EQ(all.size(), 104u);
  std::set<int64_t> distinct(all.begin(), all.end());
  EXPECT_EQ(distinct.size(), 103u);  // exactly one index repeated as padding
  EXPECT_EQ(*distinct.begin(), 0);
  EXPECT_EQ(*distinct.rbegin(), 102);
}

TEST(Sampler, PaddingRepeatsThePermutationStartLikePyTorch) {
  // Without shuffle the permutation is 0..n-1: padded [0..9, 0, 1], rank r takes r, r+4, r+8.
  EXPECT_EQ(DistributedSampler(10, 0, 4, false, 0).epoch_indices(0),
            (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(DistributedSampler(10, 1, 4, false, 0).epoch_indices(0),
            (std::vector<int64_t>{1, 5, 9}));
  EXPECT_EQ(DistributedSampler(10, 2, 4, false, 0).epoch_indices(0),
            (std::vector<int64_t>{2, 6, 0}));
  EXPECT_EQ(DistributedSampler(10, 3, 4, false, 0).epoch_indices(0),
            (std::vector<int64_t>{3, 7, 1}));
  // Fewer examples than ranks: the padding wraps more than once.
  EXPECT_EQ(DistributedSampler(2, 4, 5, false, 0).epoch_indices(0), (std::vector<int64_t>{0}));
}

TEST(Sampler, EpochsArePermutationsSeededBySeedAndEpoch) {
  const DistributedSampler s(50, 0, 1, true, 4);
  const auto e0 = s.epoch_indices(0);
  EXPECT_EQ(e0, s.epoch_indices(0));
  EXPECT_EQ(e0, DistributedSampler(50, 0, 1, true, 4).epoch_indices(0));
  EXPECT_NE(e0, s.epoch_indices(1));
  EXPECT_NE(e0, DistributedSampler(50, 0, 1, true, 5).epoch_indices(0));
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 50; ++i)
    EXPECT_EQ(sorted[i], i);
  EXPECT_FALSE(std::is_sorted(e0.begin(), e0.end()));
}

}  // namespace
}  // namespace chexscale::data
