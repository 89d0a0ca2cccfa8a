// Allreduce through node shared memory, for a job whose ranks all run on one node (Gloo on CPU).
// The gradient reducer's buckets live in a segment that every rank maps (shared_memory_segment.h),
// each rank's in its own region at the same offsets. Allreducing a bucket is two barriers and one
// pass: every rank marks that it has arrived; local rank r sums its 1/L share of the bucket over
// the L regions (in rank order, the same on every rank), divides, and writes the result into all
// L regions; every rank marks that it is done and waits for the others. Each rank reads and writes
// the bucket's bytes once in all, with no copy in or out and no socket: over Gloo on loopback the
// same bytes go through the kernel twice and are summed in between. Waits spin a few
// microseconds, then sleep on a futex; a rank whose process is gone, a collective that the ranks
// describe differently, or one that outlasts the timeout is an error naming the rank.
#pragma once

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/collective_queue.h"
#include "distributed/shared_memory_segment.h"

namespace chexscale::distributed {

class SharedMemoryAllreduce {
 public:
  // Collective over every rank of the job (each calls it; keys under `key` in `store`): an
  // allreduce with `region_bytes` of buffers per rank when every rank is `eligible` and the
  // segment can be made; else nullptr, with the reason in `why_not`.
  static std::unique_ptr<SharedMemoryAllreduce> create(c10d::Store& store, const std::string& key,
                                                       int rank, int ranks, size_t region_bytes,
                                                       bool eligible, const std::string& ineligible,
                                                       std::chrono::milliseconds timeout,
                                                       std::string* why_not);
  // Lets the collective in progress fail, then stops the thread.
  ~SharedMemoryAllreduce();

  // The bytes allocate() takes for `numel` elements of `type` (64-byte aligned).
  static size_t allocation_bytes(int64_t numel, c10::ScalarType type);
  // A 1-D tensor of zeros in this rank's region; every rank must allocate the same sequence.
  // float32 and float64 only; throws when the region is full.
  torch::Tensor allocate(int64_t numel, c10::ScalarType type);
  // True for a tensor allocate() returned (or a contiguous part of one).
  bool holds(const torch::Tensor& t) const;

  // Sums `t` (from allocate()) over the ranks and divides it by `divisor`, in place on every rank,
  // on this allreduce's thread. Every rank must issue the same allreduces in the same order.
  c10::intrusive_ptr<c10d::Work> allreduce(const torch::Tensor& t, double divisor);

 private:
  SharedMemoryAllreduce(std::shared_ptr<SharedMemorySegment> segment,
                        std::chrono::milliseconds timeout);
  void run(uint32_t seq, uint64_t offset, int64_t numel, c10::ScalarType type, double divisor);
  // Waits until every rank's counter (`arrived` or `done`) has reached `seq`.
  void wait_all(std::atomic<uint32_t> RankControl::*counter, uint32_t seq, const char* stage,
                std::chrono::steady_clock::time_point deadline);
  void post(std::atomic<uint32_t>& counter, uint32_t seq);

  std::shared_ptr<SharedMemorySegment> segment_;
  std::chrono::milliseconds timeout_;
  size_t used_ = 0;  // bytes of this rank's region allocated
  std::mutex issue_mutex_;
  uint32_t issued_ = 0;        // allreduces issued (numbered and queued under issue_mutex_)
  std::vector<bool> watched_;  // by rank: its pid names its process here (same PID namespace)
  std::atomic<bool> stopping_{false};
  std::unique_ptr<CollectiveQueue> queue_;
};

}  // namespace chexscale::distributed
