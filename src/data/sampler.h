// PyTorch DistributedSampler semantics: each epoch a permutation seeded by (seed, epoch) (or the
// identity without shuffle), padded by repeating its start to a multiple of the world size; rank
// r takes positions r, r + N, r + 2N, ... Every rank gets the same count; slices are disjoint
// apart from the padding.
#pragma once

#include <cstdint>
#include <vector>

namespace chexscale::data {

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int rank, int world_size, bool shuffle, uint64_t seed);

  // This rank's dataset indices for `epoch`, samples_per_rank() of them.
  std::vector<int64_t> epoch_indices(int64_t epoch) const;
  int64_t samples_per_rank() const;

 private:
  int64_t size_;
  int rank_;
  int world_size_;
  bool shuffle_;
  uint64_t seed_;
};

}  // namespace chexscale::data
