// The allreduce of buffers in node shared memory: barriers on futexes, one summing pass
// (shared_memory_allreduce.h).
#include "distributed/shared_memory_allreduce.h"

#include <fmt/format.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"

namespace chexscale::distributed {
namespace {

constexpr size_t kAlignment = 64;  // a cache line: no two ranks write one
constexpr int kSpins = 2000;       // about 20-50 us of looking before sleeping
constexpr auto kSleepSlice = std::chrono::milliseconds(10);

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::milliseconds limit) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(limit.count() / 1000);
  ts.tv_nsec = static_cast<long>(limit.count() % 1000) * 1000000L;
  // Not FUTEX_PRIVATE: the word is in memory the processes share.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

bool reached(uint32_t value, uint32_t seq) {
  return static_cast<int32_t>(value - seq) >= 0;  // counters may wrap
}

// True when process `pid` has ended: no such process, or one that has exited and waits for its
// parent (a zombie, state Z or X in /proc/PID/stat).
bool process_gone(int32_t pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t name_end = line.rfind(')');
  if (name_end == std::string::npos || name_end + 2 >= line.size()) return false;
  const char state = line[name_end + 2];
  return state == 'Z' || state == 'X';
}

// Sums elements [begin, end) of the buffer at `offset` over every rank's region in rank order,
// divides by `divisor` and writes the result back into every region.
template <typename T>
void sum_share(const SharedMemorySegment& segment, uint64_t offset, int64_t begin, int64_t end,
               T divisor) {
  constexpr int64_t kBlock = 2048;  // the sums stay in L1 while they are written L times
  T acc[kBlock];
  std::vector<T*> at(static_cast<size_t>(segment.ranks()));
  for (int k = 0; k < segment.ranks(); ++k)
    at[static_cast<size_t>(k)] = reinterpret_cast<T*>(segment.region(k) + offset);
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t n = std::min(kBlock, end - b);
    const T* first = at[0] + b;
    for (int64_t i = 0; i < n; ++i)
      acc[i] = first[i];
    for (size_t k = 1; k < at.size(); ++k) {
      const T* next = at[k] + b;
      for (int64_t i = 0; i < n; ++i)
        acc[i] += next[i];
    }
    if (divisor != T(1)) {
      for (int64_t i = 0; i < n; ++i)
        acc[i] /= divisor;
    }
    for (T* region : at)
      std::memcpy(region + b, acc, static_cast<size_t>(n) * sizeof(T));
  }
}

}  // namespace

std::unique_ptr<SharedMemoryAllreduce> SharedMemoryAllreduce::create(
    c10d::Store& store, const std::string& key, int rank, int ranks, size_t region_bytes,
    bool eligible, const std::string& ineligible, std::chrono::milliseconds timeout,
    std::string* why_not) {
  auto segment = SharedMemorySegment::create(store, key, rank, ranks, region_bytes, eligible,
                                             ineligible, why_not);
  if (!segment) return nullptr;
  return std::unique_ptr<SharedMemoryAllreduce>(
      new SharedMemoryAllreduce(std::move(segment), timeout));
}

SharedMemoryAllreduce::SharedMemoryAllreduce(std::shared_ptr<SharedMemorySegment> segment,
                                             std::chrono::milliseconds timeout)
    : segment_(std::move(segment)), timeout_(timeout), queue_(std::make_unique<CollectiveQueue>()) {
  // A rank in another PID namespace (containers that share /dev/shm only) cannot be watched:
  // its pid means nothing here, and it would look gone from the start.
  for (int k = 0; k < segment_->ranks(); ++k)
    watched_.push_back(!process_gone(segment_->control(k).pid));
}

SharedMemoryAllreduce::~SharedMemoryAllreduce() {
  stopping_ = true;
  queue_.reset();
}

size_t SharedMemoryAllreduce::allocation_bytes(int64_t numel, c10::ScalarType type) {
  const size_t bytes = static_cast<size_t>(numel) * c10::elementSize(type);
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

torch::Tensor SharedMemoryAllreduce::allocate(int64_t numel, c10::ScalarType type) {
  if (type != torch::kFloat && type != torch::kDouble) {
    throw Error(
        fmt::format("shared-memory allreduce: {} buffers are not supported", c10::toString(type)));
  }
  const size_t bytes = allocation_bytes(numel, type);
  if (used_ + bytes > segment_->region_bytes()) {
    throw Error(
        fmt::format("shared-memory allreduce: {} more bytes do not fit the region ({} of {} used)",
                    bytes, used_, segment_->region_bytes()));
  }
  std::byte* at = segment_->region(segment_->rank()) + used_;
  used_ += bytes;
  // The tensor keeps the mapping alive; the pages are zeros (fresh, reserved shared memory).
  return torch::from_blob(
      at, {numel}, [keep = segment_](void*) {}, torch::TensorOptions().dtype(type));
}

bool SharedMemoryAllreduce::holds(const torch::Tensor& t) const {
  if (!t.defined() || !t.device().is_cpu() || !t.is_contiguous()) return false;
  const auto* begin = static_cast<const std::byte*>(t.data_ptr());
  const std::byte* region = segment_->region(segment_->rank());
  return begin >= region && begin + t.nbytes() <= region + used_;
}

c10::intrusive_ptr<c10d::Work> SharedMemoryAllreduce::allreduce(const torch::Tensor& t,
                                                                double divisor) {
  if (!holds(t)) throw Error("shared-memory allreduce of a tensor it did not allocate");
  const uint64_t offset = static_cast<uint64_t>(static_cast<const std::byte*>(t.data_ptr()) -
                                                segment_->region(segment_->rank()));
  const int64_t numel = t.numel();
  const c10::ScalarType type = t.scalar_type();
  // Numbered as issued; the queue runs them in that order.
  std::lock_guard<std::mutex> lock(issue_mutex_);
  const uint32_t seq = ++issued_;
  return queue_->enqueue(c10d::OpType::ALLREDUCE, {t}, [this, seq, offset, numel, type, divisor] {
    run(seq, offset, numel, type, divisor);
  });
}

void SharedMemoryAllreduce::post(std::atomic<uint32_t>& counter, uint32_t seq) {
  counter.store(seq);
  if (segment_->sleepers().load() > 0) futex_wake_all(&counter);
}

void SharedMemoryAllreduce::wait_all(std::atomic<uint32_t> RankControl::*counter, uint32_t seq,
                                     const char* stage,
                                     std::chrono::steady_clock::time_point deadline) {
  for (int k = 0; k < segment_->ranks(); ++k) {
    RankControl& peer = segment_->control(k);
    std::atomic<uint32_t>& word = peer.*counter;
    int spins = 0;
    while (!reached(word.load(std::memory_order_acquire), seq)) {
      if (++spins < kSpins) {
        cpu_relax();
        continue;
      }
      if (stopping_) throw Error("shared-memory allreduce: stopped before its end");
      if (watched_[static_cast<size_t>(k)] && process_gone(peer.pid)) {
        throw DistError(
            fmt::format("shared-memory allreduce {}: rank {} (pid {}) is gone before it could {}",
                        seq, k, peer.pid, stage));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        throw DistError(
            fmt::format("shared-memory allreduce {}: rank {} did not {} within {} s", seq, k, stage,
                        std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()));
      }
      std::atomic<uint32_t>& sleepers = segment_->sleepers();
      sleepers.fetch_add(1);
      const uint32_t seen = word.load();
      if (!reached(seen, seq)) futex_wait(&word, seen, kSleepSlice);
      sleepers.fetch_sub(1);
    }
  }
}

void SharedMemoryAllreduce::run(uint32_t seq, uint64_t offset, int64_t numel, c10::ScalarType type,
                                double divisor) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  const int rank = segment_->rank(), ranks = segment_->ranks();
  RankControl& me = segment_->control(rank);
  me.dtype = static_cast<int32_t>(type);
  me.offset = offset;
  me.numel = static_cast<uint64_t>(numel);
  post(me.arrived, seq);
  wait_all(&RankControl::arrived, seq, "arrive", deadline);
  for (int k = 0; k < ranks; ++k) {
    const RankControl& peer = segment_->control(k);
    if (peer.dtype != me.dtype || peer.offset != me.offset || peer.numel != me.numel) {
      throw DistError(fmt::format(
          "shared-memory allreduce {}: rank {} allreduces {} {} elements at byte {} of its "
          "region, rank {} {} {} elements at byte {}: the ranks issued different allreduces",
          seq, k, peer.numel, c10::toString(static_cast<c10::ScalarType>(peer.dtype)), peer.offset,
          rank, me.numel, c10::toString(type), me.offset));
    }
  }
  // Shares of whole cache lines (16 floats, 8 doubles), the last rank's up to the end.
  const int64_t unit = static_cast<int64_t>(kAlignment / c10::elementSize(type));
  const auto edge = [&](int r) { return r == ranks ? numel : numel * r / ranks / unit * unit; };
  const int64_t begin = edge(rank), end = edge(rank + 1);
  if (type == torch::kFloat) {
    sum_share<float>(*segment_, offset, begin, end, static_cast<float>(divisor));
  } else {
    sum_share<double>(*segment_, offset, begin, end, divisor);
  }
  post(me.done, seq);
  wait_all(&RankControl::done, seq, "finish its share", deadline);
}

}  // namespace chexscale::distributed
