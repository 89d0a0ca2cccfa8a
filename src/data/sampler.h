// PyTorch DistributedSampler semantics: each epoch a permutation seeded by (seed, epoch) (or the
// identity without shuffle), padded by repeating its start to a multiple of the world size; rank
// r takes positions r, r + N, r + 2N, ... Every rank gets the same count; slices are disjoint
// apart from the padding. After k batches of B on every rank, any layout has consumed the
// permutation's first k x B x N positions, so a run resumed in another layout continues from a
// sample offset: the rest of the permutation is laid out among its ranks the same way.
#pragma once

#include <cstdint>
#include <vector>

namespace chexscale::data {

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int rank, int world_size, bool shuffle, uint64_t seed);

  // This rank's dataset indices for `epoch`, samples_per_rank(offset) + extra_per_rank of them,
  // from the permutation's positions `offset`.. (the first `offset` were consumed by an earlier
  // layout; 0 <= offset <= the dataset size): that rest is padded by repeating its own start and
  // rank r takes its positions r, r + N, ... Empty when nothing is left.
  std::vector<int64_t> epoch_indices(int64_t epoch, int64_t offset = 0,
                                     int64_t extra_per_rank = 0) const;
  // ceil((dataset size - offset) / world size).
  int64_t samples_per_rank(int64_t offset = 0) const;

 private:
  int64_t size_;
  int rank_;
  int world_size_;
  bool shuffle_;
  uint64_t seed_;
};

}  // namespace chexscale::data
