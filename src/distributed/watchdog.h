// The collective watchdog: numbers every collective, publishes this rank's progress and a
// heartbeat in the rendezvous store from a background thread (nothing on the hot path), waits for
// each collective with the collective timeout and, when one fails or times out, works out which
// ranks are lost (heartbeat stopped) or did not arrive, and throws a DistError that names them.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace chexscale::distributed {

class CollectiveWatchdog {
 public:
  CollectiveWatchdog(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                     std::chrono::milliseconds timeout, std::string store_address);
  // Stops the heartbeat and tells the other ranks that this one left: on purpose, or because of
  // an error (when destroyed during stack unwinding).
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Numbers the next collective; every rank issues collectives in the same order, so equal
  // numbers on two ranks are the same collective. Call just before issuing it.
  uint64_t begin();
  // Waits for collective `seq`, described by `what` ("allreduce of gradient bucket 2 of 5").
  // Throws DistError naming the lost or missing ranks when it fails or exceeds the timeout.
  void wait(c10d::Work& work, uint64_t seq, const std::string& what);
  // wait() for a point-to-point send or receive. Gloo closes the pair of one whose wait times
  // out, so with an abandon check (below) a thread waits for it whole while this one looks at
  // the check between slices; an abandoned one's thread keeps `work` (and its tensor) alive until
  // it ends.
  void wait_point_to_point(const c10::intrusive_ptr<c10d::Work>& work, uint64_t seq,
                           const std::string& what);

  // From now on, wait() also gives up on a collective as soon as `abandon` returns a reason (it
  // is asked every kAbandonSlice while one waits), throwing DistError with it and without the
  // diagnosis: the elastic agents know which node was lost (--elastic in-place).
  void set_abandon(std::function<std::optional<std::string>()> abandon);

  std::chrono::milliseconds timeout() const { return timeout_; }
  // True once a collective failed: the process group may hold stuck threads.
  bool failed() const { return failed_.load(); }

 private:
  static constexpr int64_t kNeverSeen = -1, kExited = -2, kFailed = -3;
  struct Beat {
    int64_t beats = kNeverSeen;  // heartbeats so far, or one of the states above
    uint64_t seq = 0;            // the last collective the rank had issued
  };
  void heartbeat_loop();
  void publish(const std::string& state);
  Beat read_beat(int rank);
  std::string read_posted_failure();
  // wait() with an abandon check: the work waited for in slices.
  void wait_abandonable(c10d::Work& work, uint64_t seq, const std::string& what);
  // Marks the watchdog failed and throws DistError: collective `seq` (`what`) given up, `why`.
  [[noreturn]] void throw_abandoned(uint64_t seq, const std::string& what, const std::string& why);
  std::string diagnose(uint64_t seq, const std::string& what, const std::string& cause,
                       bool timed_out);

  c10::intrusive_ptr<c10d::Store> store_;
  const int rank_;
  const int world_size_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds interval_;
  const std::string store_address_;
  std::atomic<uint64_t> issued_{0};
  std::atomic<bool> failed_{false};
  std::function<std::optional<std::string>()> abandon_;
  int64_t beats_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread heartbeat_;
};

}  // namespace chexscale::distributed
