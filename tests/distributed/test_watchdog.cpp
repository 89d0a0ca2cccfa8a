// The watchdog with real ranks (Gloo over loopback, the test worker): a rank killed with SIGKILL
// ends the others with its name, and a rank that does not arrive at a collective is named after
// the collective timeout; the job ends with a clear message instead of a hang.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "test_util/helper_programs.h"
#include "test_util/temp_dir.h"
#include "test_util/worker_group.h"

namespace chexscale {
namespace {

constexpr int kCollectiveTimeout = 20;

TEST(Failures, KilledRankEndsTheOthersWithItsNameWithinTheTimeout) {
  test_util::TempDir dir;
  test_util::WorkerGroup job(
      test_util::distributed_worker(), {"loop", dir.path(), "100000"}, 3, dir.path(),
      {{"CHEXSCALE_TEST_COLLECTIVE_TIMEOUT", std::to_string(kCollectiveTimeout)}});
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (test_util::worker_progress(dir.path()) < 3 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(test_util::worker_progress(dir.path()), 3) << "the job never got going";
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(job.pid(2), SIGKILL), 0);
  const auto exits = job.wait_all(std::chrono::seconds(120));
  const double after_kill =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_EQ(exits[2].exit_code, 128 + SIGKILL);
  for (int r : {0, 1}) {
    EXPECT_EQ(exits[r].exit_code, 1) << exits[r].output;
    EXPECT_NE(exits[r].output.find("lost rank 2"), std::string::npos) << exits[r].output;
  }
  EXPECT_LT(after_kill, kCollectiveTimeout) << "survivors took too long to notice";
}

TEST(Failures, StalledRankIsNamedAsNotArrivedAfterTheCollectiveTimeout) {
  test_util::TempDir dir;
  test_util::WorkerGroup job(test_util::distributed_worker(), {"stall", dir.path()}, 2, dir.path(),
                             {{"CHEXSCALE_TEST_COLLECTIVE_TIMEOUT", "3"}});
  const auto exits = job.wait_all(std::chrono::seconds(25));
  EXPECT_EQ(exits[0].exit_code, 1) << exits[0].output;
  EXPECT_NE(exits[0].output.find("did not complete within 3 s"), std::string::npos)
      << exits[0].output;
  EXPECT_NE(exits[0].output.find("ranks that did not arrive: 1"), std::string::npos)
      << exits[0].output;
  EXPECT_LT(exits[0].seconds, 20);
}

}  // namespace
}  // namespace chexscale
