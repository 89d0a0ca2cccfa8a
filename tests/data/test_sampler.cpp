// DistributedSampler semantics: disjoint rank slices that cover the epoch, equal lengths with
// padding from the epoch's start, a new permutation per epoch, reproducible; and a pass over the
// rest of an epoch from a sample offset (a resume in another layout).
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

// The epoch's permutation as one rank of one world sees it whole.
std::vector<int64_t> permutation(int64_t n, int64_t epoch) {
  return DistributedSampler(n, 0, 1, true, 9).epoch_indices(epoch);
}

// Any layout's first k batches consumed a prefix of the permutation; the ranks of another layout
// resumed at that offset share exactly the rest between them, disjoint, each equally long (the
// padding, once, repeats the rest's start).
TEST(Sampler, AnOffsetPassSlicesTheRestOfThePermutationAmongTheRanks) {
  const int64_t n = 103;
  const auto order = permutation(n, 3);
  for (const int64_t offset : {int64_t{0}, int64_t{24}, int64_t{40}, int64_t{101}}) {
    for (const int world : {1, 2, 3, 4}) {
      SCOPED_TRACE(::testing::Message() << "offset " << offset << ", " << world << " ranks");
      std::vector<int64_t> all;
      for (int r = 0; r < world; ++r) {
        const DistributedSampler s(n, r, world, true, 9);
        const auto mine = s.epoch_indices(3, offset);
        EXPECT_EQ(static_cast<int64_t>(mine.size()), s.samples_per_rank(offset));
        EXPECT_EQ(s.samples_per_rank(offset), (n - offset + world - 1) / world);
        all.insert(all.end(), mine.begin(), mine.end());
      }
      const std::multiset<int64_t> got(all.begin(), all.end());
      const std::set<int64_t> rest(order.begin() + offset, order.end());
      EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()), rest);
      const int64_t pad = static_cast<int64_t>(all.size()) - (n - offset);
      EXPECT_LT(pad, world);
      for (int64_t i = 0; i < static_cast<int64_t>(rest.size()); ++i) {
        const int64_t index = order[static_cast<size_t>(offset + i)];
        EXPECT_EQ(static_cast<int64_t>(got.count(index)), i < pad ? 2 : 1) << index;
      }
    }
  }
}

// Rank r of N takes the rest's positions r, r + N, ...: after a layout consumed a prefix, the
// pass continues in the permutation's own order (the global batch of a step is the next run of
// positions).
TEST(Sampler, AnOffsetPassKeepsThePermutationOrder) {
  const auto order = permutation(10, 0);
  const DistributedSampler r0(10, 0, 2, true, 9), r1(10, 1, 2, true, 9);
  EXPECT_EQ(r0.epoch_indices(0, 4), (std::vector<int64_t>{order[4], order[6], order[8]}));
  EXPECT_EQ(r1.epoch_indices(0, 4), (std::vector<int64_t>{order[5], order[7], order[9]}));
  // An odd rest pads from its own start; extra_per_rank pads further, still in that order.
  EXPECT_EQ(r1.epoch_indices(0, 5), (std::vector<int64_t>{order[6], order[8], order[5]}));
  EXPECT_EQ(r0.epoch_indices(0, 6, 1), (std::vector<int64_t>{order[6], order[8], order[6]}));
  EXPECT_EQ(r1.epoch_indices(0, 6, 1), (std::vector<int64_t>{order[7], order[9], order[7]}));
  // Offset 0 is the whole epoch; the epoch's end leaves nothing.
  EXPECT_EQ(r0.epoch_indices(0, 0), r0.epoch_indices(0));
  EXPECT_TRUE(r0.epoch_indices(0, 10).empty());
  EXPECT_EQ(r0.samples_per_rank(10), 0);
}

}  // namespace
}  // namespace chexscale::data
