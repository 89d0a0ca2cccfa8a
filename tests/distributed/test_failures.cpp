// Failures end the job with a clear message instead of a hang: a rank killed with SIGKILL, a rank
// that does not arrive at a collective, and a rendezvous that nobody answers.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <thread>

#include "common/error.h"
#include "distributed/rendezvous.h"
#include "distributed/worker_processes.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

constexpr int kCollectiveTimeout = 20;

int progress(const std::string& dir) {
  std::ifstream in(dir + "/progress");
  int steps = 0;
  in >> steps;
  return steps;
}

TEST(Failures, KilledRankEndsTheOthersWithItsNameWithinTheTimeout) {
  test_util::TempDir dir;
  test_util::WorkerGroup job(
      CHEXSCALE_DISTRIBUTED_WORKER, {"loop", dir.path(), "100000"}, 3, dir.path(),
      {{"CHEXSCALE_TEST_COLLECTIVE_TIMEOUT", std::to_string(kCollectiveTimeout)}});
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (progress(dir.path()) < 3 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(progress(dir.path()), 3) << "the job never got going";
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(job.pid(2), SIGKILL), 0);
  const auto exits = job.wait_all(std::chrono::seconds(120));
  const double after_kill =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_EQ(exits[2].status, 128 + SIGKILL);
  for (int r : {0, 1}) {
    EXPECT_EQ(exits[r].status, 1) << exits[r].output;
    EXPECT_NE(exits[r].output.find("lost rank 2"), std::string::npos) << exits[r].output;
  }
  EXPECT_LT(after_kill, kCollectiveTimeout) << "survivors took too long to notice";
}

TEST(Failures, StalledRankIsNamedAsNotArrivedAfterTheCollectiveTimeout) {
  test_util::TempDir dir;
  test_util::WorkerGroup job(CHEXSCALE_DISTRIBUTED_WORKER, {"stall", dir.path()}, 2, dir.path(),
                             {{"CHEXSCALE_TEST_COLLECTIVE_TIMEOUT", "3"}});
  const auto exits = job.wait_all(std::chrono::seconds(25));
  EXPECT_EQ(exits[0].status, 1) << exits[0].output;
  EXPECT_NE(exits[0].output.find("did not complete within 3 s"), std::string::npos)
      << exits[0].output;
  EXPECT_NE(exits[0].output.find("ranks that did not arrive: 1"), std::string::npos)
      << exits[0].output;
  EXPECT_LT(exits[0].seconds, 20);
}

distributed::RendezvousEnv two_rank_env(int rank, const std::string& host, int port) {
  distributed::RendezvousEnv env;
  env.rank = {rank, "test"};
  env.world_size = {2, "test"};
  env.local_rank = {0, "test"};
  env.local_world_size = {1, "test"};
  env.master_addr = {host, "test"};
  env.master_port = {port, "test"};
  return env;
}

std::string rendezvous_error(const distributed::RendezvousEnv& env) {
  try {
    distributed::rendezvous(env, std::chrono::milliseconds(1500));
  } catch (const DistError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Rendezvous, RefusedConnectionTimesOutNamingAddressAndWhatWasTried) {
  const int port = distributed::pick_free_port();  // nobody listens there
  const std::string message = rendezvous_error(two_rank_env(1, "127.0.0.1", port));
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
  EXPECT_NE(message.find("Connection refused"), std::string::npos) << message;
}

TEST(Rendezvous, UnresolvableHostTimesOutSayingItDidNotResolve) {
  const std::string message = rendezvous_error(two_rank_env(1, "no-such-host.invalid", 29999));
  EXPECT_NE(message.find("'no-such-host.invalid' did not resolve"), std::string::npos) << message;
}

TEST(Rendezvous, ServerAloneNamesTheMissingRanks) {
  const std::string message =
      rendezvous_error(two_rank_env(0, "127.0.0.1", distributed::pick_free_port()));
  EXPECT_NE(message.find("1 of 2 ranks joined; missing ranks: 1"), std::string::npos) << message;
}

}  // namespace
}  // namespace chexscale
