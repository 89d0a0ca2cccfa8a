// parallel_for: every index once whatever the thread count, errors rethrown, progress on the
// caller.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/parallel_for.h"

namespace chexscale {
namespace {

TEST(ParallelFor, VisitsEveryIndexExactlyOnce) {
  for (const int threads : {0, 1, 2, 3, 8, 64}) {
    for (const std::size_t first : {0, 5}) {
      constexpr std::size_t kLast = 37;
      std::vector<std::atomic<int>> visits(kLast);
      parallel_for(first, kLast, threads, [&](std::size_t i) { ++visits[i]; });
      for (std::size_t i = 0; i < kLast; ++i) {
        EXPECT_EQ(visits[i].load(), i < first ? 0 : 1)
            << "index " << i << ", first " << first << ", threads " << threads;
      }
    }
  }
}

TEST(ParallelFor, MoreThreadsThanIndices) {
  std::vector<std::atomic<int>> visits(3);
  parallel_for(0, visits.size(), 16, [&](std::size_t i) { ++visits[i]; });
  for (const auto& v : visits)
    EXPECT_EQ(v.load(), 1);
}

TEST(ParallelFor, EmptyRangeCallsNothing) {
  std::atomic<int> calls{0};
  for (const int threads : {0, 1, 4}) {
    parallel_for(
        7, 7, threads, [&](std::size_t) { ++calls; }, [&](std::size_t) { ++calls; });
    parallel_for(9, 7, threads, [&](std::size_t) { ++calls; });
  }
  EXPECT_EQ(calls.load(), 0);
}

TEST(ParallelFor, OneThreadRunsInOrderOnTheCaller) {
  std::vector<std::size_t> order;
  std::vector<std::size_t> progress;
  const auto caller = std::this_thread::get_id();
  bool elsewhere = false;
  parallel_for(
      2, 9, 1,
      [&](std::size_t i) {
        order.push_back(i);
        elsewhere = elsewhere || std::this_thread::get_id() != caller;
      },
      [&](std::size_t done) { progress.push_back(done); });
  EXPECT_EQ(order, (std::vector<std::size_t>{2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(progress, (std::vector<std::size_t>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_FALSE(elsewhere);
}

TEST(ParallelFor, ProgressRunsOnTheCallerAndCountsUp) {
  const auto caller = std::this_thread::get_id();
  std::vector<std::size_t> progress;  // no lock: progress is called on this thread only
  bool elsewhere = false;
  parallel_for(
      0, 200, 4, [](std::size_t) { std::this_thread::yield(); },
      [&](std::size_t done) {
        elsewhere = elsewhere || std::this_thread::get_id() != caller;
        progress.push_back(done);
      });
  EXPECT_FALSE(elsewhere);
  ASSERT_FALSE(progress.empty());
  for (std::size_t k = 1; k < progress.size(); ++k)
    EXPECT_LT(progress[k - 1], progress[k]);
  EXPECT_LE(progress.back(), 200U);
}

TEST(ParallelFor, AnExceptionInOneItemIsRethrownAfterAllThreadsStop) {
  for (const int threads : {1, 4}) {
    std::atomic<int> running{0};
    std::atomic<int> after{0};
    try {
      parallel_for(0, 1000, threads, [&](std::size_t i) {
        ++running;
        if (i == 10) {
          --running;
          throw std::runtime_error("item 10 failed");
        }
        std::this_thread::yield();
        --running;
        ++after;
      });
      ADD_FAILURE() << "no exception with " << threads << " threads";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "item 10 failed");
    }
    EXPECT_EQ(running.load(), 0) << "a body still ran after parallel_for returned";
    if (threads == 1) {
      EXPECT_EQ(after.load(), 10) << "the failure did not stop the loop";
    }
  }
}

TEST(ParallelFor, ANegativeThreadCountIsRefused) {
  EXPECT_THROW(parallel_for(0, 3, -1, [](std::size_t) {}), std::exception);
}

}  // namespace
}  // namespace chexscale
