// The worker's side of `--elastic in-place` against a real c10d TCPStore server: the round's end
// as the agents record it (a join, a failure, a stop), the worker's request to its agent, the
// place the agent posts and the environment it makes, a round left before its ranks met; and the
// watchdog abandoning a real Gloo collective that cannot complete once the round ended by a
// failure.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "common/error.h"
#include "distributed/context.h"
#include "distributed/dist_options.h"
#include "distributed/elastic_keys.h"
#include "distributed/elastic_round.h"
#include "distributed/watchdog.h"

namespace chexscale::distributed {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::vector<uint8_t> bytes(const std::string& s) {
  return {s.begin(), s.end()};
}
std::string text(const std::vector<uint8_t>& b) {
  return {b.begin(), b.end()};
}

// A store server on a free port and a client of it for the test to play the agent with.
class ElasticRoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c10d::TCPStoreOptions options;
    options.port = 0;
    options.isServer = true;
    options.waitWorkers = false;
    server_ = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  }
  c10::intrusive_ptr<c10d::Store> client() const {
    c10d::TCPStoreOptions options;
    options.port = server_->getPort();
    options.isServer = false;
    options.waitWorkers = false;
    return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  }
  // What the agents write when they end round `round`.
  void end_round(int round, RoundEndKind kind, const std::string& reason) {
    server_->set(round_end_kind_key(kJob, round), bytes(std::to_string(static_cast<int>(kind))));
    server_->set(round_end_reason_key(kJob, round), bytes(reason));
  }
  // Polls `done` for up to 3 s.
  template <typename F>
  static bool within_3s(F done) {
    const auto until = Clock::now() + std::chrono::seconds(3);
    while (!done() && Clock::now() < until)
      std::this_thread::sleep_for(milliseconds(10));
    return done();
  }

  static constexpr const char* kJob = "job-a";
  static constexpr const char* kAgent = "node-1-77-123";
  c10::intrusive_ptr<c10d::TCPStore> server_;
};

TEST(ElasticPlace, EncodesAndDecodesAndRefusesMalformedText) {
  ElasticPlace p;
  p.round = 3;
  p.attempt = 11;
  p.node_rank = 1;
  p.rank_offset = 4;
  p.world_size = 8;
  p.nodes = {"node-a", "node-b"};
  EXPECT_EQ(p.encode(), "3 11 1 4 8 node-a,node-b");
  const ElasticPlace back = ElasticPlace::decode(p.encode());
  EXPECT_EQ(back.round, 3);
  EXPECT_EQ(back.attempt, 11);
  EXPECT_EQ(back.node_rank, 1);
  EXPECT_EQ(back.rank_offset, 4);
  EXPECT_EQ(back.world_size, 8);
  EXPECT_EQ(back.nodes, p.nodes);
  EXPECT_THROW(ElasticPlace::decode("3 11 1 4"), DistError);
  EXPECT_THROW(ElasticPlace::decode("3 11 2 4 8 node-a,node-b"), DistError);  // no node 2
  EXPECT_THROW(ElasticPlace::decode("3 11 0 4 0 node-a"), DistError);         // world size 0
}

TEST_F(ElasticRoundTest, AJoinEndsTheRoundWithoutAbandoningCollectives) {
  ElasticRound round(client(), kJob, kAgent, 2, 0);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_FALSE(round.ended());
  end_round(1, RoundEndKind::kFailure, "an earlier round");  // not this worker's round
  end_round(2, RoundEndKind::kRestart, "1 node(s) waiting to join");
  EXPECT_TRUE(within_3s([&] { return round.ended(); }));
  EXPECT_EQ(round.abandon_reason(), std::nullopt);
}

TEST_F(ElasticRoundTest, AFailureEndsTheRoundAndAbandonsItsCollectivesWithTheReason) {
  ElasticRound round(client(), kJob, kAgent, 0, 0);
  end_round(0, RoundEndKind::kFailure, "node 1 (node-b) sent no heartbeat for 3 s");
  EXPECT_TRUE(within_3s([&] { return round.ended(); }));
  EXPECT_EQ(round.abandon_reason(), "node 1 (node-b) sent no heartbeat for 3 s");
}

TEST_F(ElasticRoundTest, AStopIsLeftToTheWorkersStopSignal) {
  ElasticRound round(client(), kJob, kAgent, 0, 0);
  end_round(0, RoundEndKind::kStopped, "SIGTERM to node node-a");
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_FALSE(round.ended());
  EXPECT_EQ(round.abandon_reason(), std::nullopt);
}

TEST_F(ElasticRoundTest, TheRequestReachesTheAgentAndThePlaceComesBackAsAnEnvironment) {
  ElasticRound round(client(), kJob, kAgent, 4, 1);
  round.request_regroup("allreduce failed (Connection reset by peer)");
  EXPECT_EQ(text(server_->get(agent_key(kJob, kAgent, "regroup/4"))),
            "local rank 1: allreduce failed (Connection reset by peer)");
  // Nothing posted yet, then only this round: no place.
  EXPECT_THROW(round.wait_next_place(milliseconds(200)), DistError);
  server_->set(agent_key(kJob, kAgent, "latest"), bytes("4"));
  EXPECT_THROW(round.wait_next_place(milliseconds(200)), DistError);
  std::thread agent([&] {
    std::this_thread::sleep_for(milliseconds(200));
    server_->set(agent_key(kJob, kAgent, "place/5"), bytes("5 9 1 2 4 node-a,node-b"));
    server_->set(agent_key(kJob, kAgent, "latest"), bytes("5"));
  });
  const ElasticPlace place = round.wait_next_place(milliseconds(5000));
  agent.join();
  EXPECT_EQ(place.round, 5);
  const auto env = round.environment_for(place);
  EXPECT_EQ(env.at(kEnvRank), "3");  // rank offset 2 + local rank 1
  EXPECT_EQ(env.at(kEnvWorldSize), "4");
  EXPECT_EQ(env.at(kEnvGroupRank), "1");
  EXPECT_EQ(env.at(kEnvRestartCount), "9");  // the store prefix: the round's attempt
  EXPECT_EQ(env.at(kEnvElasticRound), "5");
  EXPECT_EQ(env.at(kEnvElasticNodes), "node-a,node-b");
}

// A worker started in standby after its agent placed earlier workers (a node back from a cut
// link): it announces itself, and takes the first place posted after that, not the old one.
TEST_F(ElasticRoundTest, AStandbyWorkerTakesAPlacePostedAfterItNotAnEarlierWorkersOne) {
  server_->set(agent_key(kJob, kAgent, "place/2"), bytes("2 7 1 1 2 node-a,node-b"));
  server_->set(agent_key(kJob, kAgent, "latest"), bytes("2"));
  const std::map<std::string, std::string> env = {
      {kEnvElasticMode, kElasticInPlace},
      {kEnvRunId, kJob},
      {kEnvElasticAgent, kAgent},
      {kEnvElasticRound, kElasticStandby},
      {kEnvLocalRank, "0"},
      {kEnvMasterAddr, "127.0.0.1"},
      {kEnvMasterPort, std::to_string(server_->getPort())}};
  const std::unique_ptr<ElasticRound> round = ElasticRound::standby(env);
  EXPECT_TRUE(round->in_standby());
  EXPECT_TRUE(round->ended());
  EXPECT_FALSE(round->abandon_reason());
  EXPECT_THROW(round->wait_next_place(milliseconds(200)), DistError);  // round 2's is not its
  const std::string ready = agent_key(kJob, kAgent, fmt::format("standby/{}", ::getpid()));
  EXPECT_FALSE(server_->check({ready}));
  round->announce_ready();
  // A TCPStore client's set does not wait for the server: another client sees it soon after.
  EXPECT_TRUE(within_3s([&] { return server_->check({ready}); }));
  server_->set(agent_key(kJob, kAgent, "place/3"), bytes("3 8 0 0 3 node-c,node-a,node-b"));
  server_->set(agent_key(kJob, kAgent, "latest"), bytes("3"));
  const ElasticPlace place = round->wait_next_place(milliseconds(2000));
  EXPECT_EQ(place.round, 3);
  EXPECT_EQ(round->environment_for(place).at(kEnvRank), "0");
}

// A worker placed in round 23 (world 2) whose peer never comes there: the round ends (a node
// waits to join) and the agent places the node in round 24, alone. The worker leaves round 23's
// rendezvous at once and joins round 24, as rank 0 and as rank 1 (which wait for different keys),
// long before the 30 s rendezvous timeout.
TEST_F(ElasticRoundTest, ARoundThatEndsBeforeItsRanksMeetIsLeftForTheNextPlace) {
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(fmt::format("rank {}", rank));
    const std::string agent = fmt::format("node-x-{}", rank);
    const std::map<std::string, std::string> env = {
        {kEnvElasticMode, kElasticInPlace},
        {kEnvRunId, kJob},
        {kEnvElasticAgent, agent},
        {kEnvElasticRound, "23"},
        {kEnvElasticNodes, "node-a,node-b"},
        {kEnvUseAgentStore, "True"},
        {kEnvRestartCount, std::to_string(100 + rank)},  // each case its own store prefix
        {kEnvRank, std::to_string(rank)},
        {kEnvWorldSize, "2"},
        {kEnvLocalRank, "0"},
        {kEnvLocalWorldSize, "1"},
        {kEnvGroupRank, std::to_string(rank)},
        {kEnvMasterAddr, "127.0.0.1"},
        {kEnvMasterPort, std::to_string(server_->getPort())}};
    std::thread agents([&] {
      std::this_thread::sleep_for(milliseconds(500));
      end_round(23, RoundEndKind::kRestart, "1 node(s) waiting to join");
      server_->set(agent_key(kJob, agent, "place/24"), bytes("24 200 0 0 1 node-c"));
      server_->set(agent_key(kJob, agent, "latest"), bytes("24"));
    });
    DistOptions options;
    options.backend = Backend::kGloo;
    options.rdzv_timeout = std::chrono::seconds(30);
    const auto start = Clock::now();
    std::shared_ptr<DistContext> ctx;
    EXPECT_NO_THROW(ctx = DistContext::init(options, env));
    agents.join();
    ASSERT_NE(ctx, nullptr);
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
    ASSERT_NE(ctx->elastic_round(), nullptr);
    EXPECT_EQ(ctx->elastic_round()->round(), 24);
    EXPECT_EQ(ctx->elastic_round()->nodes(), std::vector<std::string>{"node-c"});
    EXPECT_EQ(ctx->rank(), 0);
    EXPECT_EQ(ctx->world_size(), 1);
    server_->deleteKey(round_end_kind_key(kJob, 23));
    server_->deleteKey(round_end_reason_key(kJob, 23));
  }
}

TEST(ElasticRoundEnvironment, OnlyInPlaceJobsHaveOneAndTheirVariablesMustBeThere) {
  RendezvousEnv rdzv;
  rdzv.master_addr.value = "127.0.0.1";
  rdzv.master_port.value = 1;  // never reached: every case fails or returns first
  EXPECT_EQ(ElasticRound::from_environment({}, rdzv), nullptr);
  EXPECT_THROW(ElasticRound::from_environment({{kEnvElasticMode, "sideways"}}, rdzv), UsageError);
  try {
    ElasticRound::from_environment(
        {{kEnvElasticMode, kElasticInPlace}, {kEnvRunId, "j"}, {kEnvElasticRound, "0"}}, rdzv);
    FAIL() << "no agent given";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(kEnvElasticAgent), std::string::npos) << e.what();
  }
}

// Two in-process Gloo ranks over loopback (rank 1 built on a thread: both must meet).
std::array<c10::intrusive_ptr<c10d::ProcessGroupGloo>, 2> two_gloo_ranks(
    const c10::intrusive_ptr<c10d::Store>& store) {
  auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(60));
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  std::array<c10::intrusive_ptr<c10d::ProcessGroupGloo>, 2> groups;
  std::thread second(
      [&] { groups[1] = c10::make_intrusive<c10d::ProcessGroupGloo>(store, 1, 2, options); });
  groups[0] = c10::make_intrusive<c10d::ProcessGroupGloo>(store, 0, 2, options);
  second.join();
  return groups;
}

// Runs `wait` under a watchdog whose abandon check has a reason 300 ms after the start: the wait
// must end at once with it (named by `head`: what, collective number), long before the timeout.
void expect_abandoned(const c10::intrusive_ptr<c10d::Store>& store, const std::string& head,
                      const std::function<void(CollectiveWatchdog&)>& wait) {
  CollectiveWatchdog watchdog(store, 0, 2, std::chrono::seconds(30), "in-process");
  const auto start = Clock::now();
  watchdog.set_abandon([&]() -> std::optional<std::string> {
    if (Clock::now() - start < milliseconds(300)) return std::nullopt;
    return "node 1 (node-b) sent no heartbeat for 3 s";
  });
  try {
    wait(watchdog);
    FAIL() << "the wait completed with one rank";
  } catch (const DistError& e) {
    EXPECT_NE(std::string(e.what()).find(head + " abandoned on rank 0: the round ended: node 1 "
                                                "(node-b) sent no heartbeat for 3 s"),
              std::string::npos)
        << e.what();
  }
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_GE(took, 0.3);
  EXPECT_LT(took, 5.0);
  EXPECT_TRUE(watchdog.failed());
}

// Rank 1 never issues the allreduce, so rank 0's cannot complete.
TEST(WatchdogAbandon, AStuckGlooCollectiveIsAbandonedOnceTheRoundEnded) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto groups = two_gloo_ranks(store);
  std::vector<torch::Tensor> tensors{torch::ones({4})};
  auto work = groups[0]->allreduce(tensors);
  expect_abandoned(store, "allreduce of gradient bucket 0 of 1 (collective #1)",
                   [&](CollectiveWatchdog& watchdog) {
                     watchdog.wait(*work, watchdog.begin(), "allreduce of gradient bucket 0 of 1");
                   });
  // Rank 1 arrives after all, so that both groups end cleanly.
  std::vector<torch::Tensor> late{torch::ones({4})};
  groups[1]->allreduce(late)->wait();
  work->wait();
  EXPECT_EQ(tensors[0][0].item<float>(), 2.0f);
}

// A receive whose sender comes after many of the abandon check's slices: Gloo closes the pair
// of a receive whose own wait times out, so the watchdog must not wait for it in slices; the
// bytes arrive whole.
TEST(WatchdogAbandon, AReceiveOutlastingManySlicesCompletesWithItsBytes) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto groups = two_gloo_ranks(store);
  CollectiveWatchdog watchdog(store, 0, 2, std::chrono::seconds(30), "in-process");
  watchdog.set_abandon([]() -> std::optional<std::string> { return std::nullopt; });
  std::vector<torch::Tensor> received{torch::zeros({100000})};
  std::thread sender([&] {
    std::this_thread::sleep_for(milliseconds(400));
    std::vector<torch::Tensor> sent{torch::arange(100000, torch::kFloat)};
    groups[1]->send(sent, 0, 0)->wait();
  });
  EXPECT_NO_THROW(
      watchdog.wait_point_to_point(groups[0]->recv(received, 1, 0), 1, "receive from rank 1"));
  sender.join();
  EXPECT_TRUE(torch::equal(received[0], torch::arange(100000, torch::kFloat)));
  EXPECT_FALSE(watchdog.failed());
}

// A receive whose sender never sends is abandoned once the round has ended, with the reason.
TEST(WatchdogAbandon, AReceiveWithoutASenderIsAbandonedOnceTheRoundEnded) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto groups = two_gloo_ranks(store);
  std::vector<torch::Tensor> received{torch::zeros({16})};
  expect_abandoned(store, "receive from rank 1 (collective #7)", [&](CollectiveWatchdog& watchdog) {
    watchdog.wait_point_to_point(groups[0]->recv(received, 1, 0), 7, "receive from rank 1");
  });
  // Rank 1 sends after all, so that the waiting thread and both groups end cleanly.
  std::vector<torch::Tensor> late{torch::ones({16})};
  groups[1]->send(late, 0, 0)->wait();
}

// The interleaving in which a Gloo work completes just after a wait's slice ran out: c10d's
// Work::wait(timeout) then throws "Operation timed out!" although the work is completed, with
// success. The watchdog must take its outcome, not the slice's timeout.
class CompletesAsTheSliceEnds : public c10d::Work {
 public:
  bool isCompleted() override { return completed_; }
  bool wait(std::chrono::milliseconds timeout) override {
    if (timeout == kNoTimeout) return true;
    completed_ = true;  // as the slice ran out
    TORCH_CHECK(false, "Operation timed out!");
  }

 private:
  bool completed_ = false;
};

TEST(WatchdogAbandon, AWorkThatCompletesAsASliceEndsIsASuccess) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  CollectiveWatchdog watchdog(store, 0, 2, std::chrono::seconds(30), "in-process");
  watchdog.set_abandon([]() -> std::optional<std::string> { return std::nullopt; });
  CompletesAsTheSliceEnds work;
  EXPECT_NO_THROW(watchdog.wait(work, watchdog.begin(), "allreduce of gradient bucket 2 of 3"));
  EXPECT_FALSE(watchdog.failed());
}

}  // namespace
}  // namespace chexscale::distributed
