// Rank slices of a seeded epoch permutation (see sampler.h).
#include "data/sampler.h"

#include <numeric>

#include "common/error.h"
#include "common/random.h"

namespace chexscale::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank, int world_size, bool shuffle,
                                       uint64_t seed)
    : size_(dataset_size), rank_(rank), world_size_(world_size), shuffle_(shuffle), seed_(seed) {
  CHX_CHECK(world_size > 0 && rank >= 0 && rank < world_size, "rank {} of world size {}", rank,
            world_size);
  CHX_CHECK(dataset_size > 0, "empty dataset");
}

int64_t DistributedSampler::samples_per_rank(int64_t offset) const {
  CHX_CHECK(offset >= 0 && offset <= size_, "sample offset {} of {}", offset, size_);
  return (size_ - offset + world_size_ - 1) / world_size_;
}

std::vector<int64_t> DistributedSampler::epoch_indices(int64_t epoch, int64_t offset,
                                                       int64_t extra_per_rank) const {
  CHX_CHECK(extra_per_rank >= 0, "extra_per_rank {}", extra_per_rank);
  const int64_t per_rank = samples_per_rank(offset);
  const int64_t rest = size_ - offset;
  if (rest == 0) return {};
  std::vector<int64_t> order(static_cast<size_t>(size_));
  std::iota(order.begin(), order.end(), 0);
  if (shuffle_) shuffle_in_place(order, mix_seed({seed_, static_cast<uint64_t>(epoch)}));
  const int64_t total = (per_rank + extra_per_rank) * world_size_;
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank + extra_per_rank));
  for (int64_t pos = rank_; pos < total; pos += world_size_) {
    mine.push_back(order[static_cast<size_t>(offset + pos % rest)]);  // padding repeats the start
  }
  return mine;
}

}  // namespace chexscale::data
