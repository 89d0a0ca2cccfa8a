// The rank-aware, multi-threaded loader: one interface over loose PNGs, packed shards and
// synthetic tensors. Rank r of N gets its own disjoint slice of each epoch (DistributedSampler
// semantics), in a deterministic order whatever the number of worker threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/loader_options.h"

namespace chexscale::data {

// Counters for the run summary: nothing is dropped silently.
struct LoaderStats {
  int64_t batches = 0;
  int64_t images = 0;
  int64_t bad_images = 0;   // corrupt/truncated/missing: reported by name and skipped
  double wait_seconds = 0;  // consumer time blocked in next()
};

// Where a pass over an epoch starts. A run resumed in another layout (world size, batch size)
// passes over the rest of its epoch's permutation: the sampler lays it out among the ranks anew;
// when a rank's slice of that rest would end in a batch of one example (BatchNorm cannot train on
// one, and the offset, not the user, chose that size), it is padded by one more example per rank
// (without drop_last).
struct EpochStart {
  int64_t sample_offset = 0;  // of the permutation's positions, consumed by an earlier layout
  int64_t skip_batches = 0;   // of this pass, trained already (exact resume mid-epoch)
};

class ExampleSource;

class Loader {
 public:
  explicit Loader(const LoaderOptions& options);
  // Serves `source` (e.g. an ImageListSource) instead of opening options.source.
  Loader(const LoaderOptions& options, std::shared_ptr<const ExampleSource> source);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Starts a pass over epoch `epoch` (permutation seeded by (seed, epoch)) at `start`: a whole
  // epoch by default. UsageError for an offset past the epoch or more batches than the pass has.
  // The pass started last, when no batch of it has been taken yet and it starts at the same
  // place, goes on with the batches it has prefetched.
  void start_epoch(int64_t epoch, EpochStart start = {});
  // Starts a pass over exactly `indices` of the data set, in their order and in batches of the
  // batch size (the last one shorter), loaded as epoch `epoch` loads them, whatever this rank's
  // slice: the rest of an evaluation that a regroup interrupted. UsageError for an index outside
  // the data set.
  void start_indices(int64_t epoch, std::vector<int64_t> indices);
  // Serves rank `rank` of `world_size` from now on (a worker regrouped in place), over the same
  // examples: the pass under way and its batches are dropped; start_epoch() starts the next.
  // UsageError for a rank outside the world.
  void reshard(int rank, int world_size);
  // The next batch of the current epoch, or nullopt at its end. Time blocked here is counted
  // in stats().wait_seconds and returned by last_wait_seconds().
  std::optional<Batch> next();
  double last_wait_seconds() const;

  // The batches of a pass from `sample_offset` (EpochStart), for this rank; equal on every rank.
  int64_t batches_per_epoch(int64_t sample_offset = 0) const;
  int64_t dataset_size() const;  // examples in the split (before padding)
  // The names of the batches' label columns (ChestX-ray14's with synthetic tensors).
  const std::vector<std::string>& label_names() const;
  LoaderStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chexscale::data
