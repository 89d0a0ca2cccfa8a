// A POSIX shared-memory segment mapped by every rank of a job whose ranks all run on one node: a
// header, one control block per rank (the counters and the description of the collective it is
// in, on cache lines of its own) and one region per rank, at the same offsets in every process.
// Rank 0 creates it under a random name, reserves its pages (so that a full /dev/shm is an error
// here, not a SIGBUS later), and removes the name as soon as every rank has mapped it: nothing is
// left in /dev/shm however the job ends. Every rank says through the rendezvous store whether it
// mapped the segment, and a job uses it only when all did.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace chexscale::distributed {

// A rank's control block: written by that rank, read by the others.
struct alignas(128) RankControl {
  std::atomic<uint32_t> arrived{0};  // the last collective this rank has arrived at
  std::atomic<uint32_t> done{0};     // the last collective this rank has finished its share of
  int32_t pid = 0;                   // the rank's process, for noticing that it is gone
  int32_t dtype = -1;                // the collective it arrived at: element type, ...
  uint64_t offset = 0;               // ... its buffer's offset in the region, ...
  uint64_t numel = 0;                // ... and its elements
};

class SharedMemorySegment {
 public:
  // Collective over the `ranks` ranks of the job (every one calls it, eligible or not; `store`
  // keys under `key`): maps a segment with a region of `region_bytes` per rank when every rank is
  // `eligible` and maps it; else returns nullptr and sets `why_not` (the first rank's reason).
  static std::shared_ptr<SharedMemorySegment> create(c10d::Store& store, const std::string& key,
                                                     int rank, int ranks, size_t region_bytes,
                                                     bool eligible, const std::string& ineligible,
                                                     std::string* why_not);
  ~SharedMemorySegment();
  SharedMemorySegment(const SharedMemorySegment&) = delete;
  SharedMemorySegment& operator=(const SharedMemorySegment&) = delete;

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  size_t region_bytes() const { return region_bytes_; }
  std::byte* region(int rank) const;
  RankControl& control(int rank) const;
  // Counts the threads asleep on a counter of the segment, so a writer wakes only when one is.
  std::atomic<uint32_t>& sleepers() const;

 private:
  SharedMemorySegment(std::byte* base, size_t bytes, int rank, int ranks, size_t region_bytes);
  std::byte* base_;
  size_t bytes_;
  int rank_;
  int ranks_;
  size_t region_bytes_;
};

}  // namespace chexscale::distributed
