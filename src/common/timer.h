// Monotonic stopwatch used for step breakdowns and throughput.
#pragma once

#include <time.h>

#include <chrono>

namespace chexscale {

class Stopwatch {
 public:
  using Clock = std::chrono::steady_clock;
  Stopwatch() : start_(Clock::now()) {}
  void reset() { start_ = Clock::now(); }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double millis() const { return seconds() * 1e3; }

 private:
  Clock::time_point start_;
};

// Microseconds since the steady clock's epoch; the time base of timelines.
inline int64_t now_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU seconds this process has used so far, all threads, user and system: the per-core cost of
// work, insensitive to other processes on a shared machine.
inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace chexscale
