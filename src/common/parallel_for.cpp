// parallel_for (see parallel_for.h): an atomic next index shared by the caller and its threads.
#include "common/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"

namespace chexscale {

void parallel_for(std::size_t first, std::size_t last, int threads,
                  const std::function<void(std::size_t)>& body,
                  const std::function<void(std::size_t done)>& progress) {
  CHX_CHECK(threads >= 0, "parallel_for needs 0 (automatic) or more threads, got {}", threads);
  if (first >= last) return;
  const std::size_t count = last - first;
  std::size_t workers = threads > 0 ? static_cast<std::size_t>(threads)
                                    : std::max(1U, std::thread::hardware_concurrency());
  workers = std::min(workers, count);

  std::atomic<std::size_t> next{first};
  std::atomic<std::size_t> done{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  auto work = [&](bool on_caller) {
    try {
      for (std::size_t i = next++; i < last; i = next++) {
        body(i);
        const std::size_t finished = ++done;
        if (on_caller && progress) progress(finished);
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next = last;
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (std::size_t t = 1; t < workers; ++t)
    pool.emplace_back(work, false);
  work(true);
  for (auto& t : pool)
    t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace chexscale
