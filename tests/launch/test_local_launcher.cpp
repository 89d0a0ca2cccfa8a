// The local launcher with real worker processes (the dist tests' worker): a job runs to the end
// with prefixed output; a failing worker tears the group down and its status comes back; with
// --max-restarts 1 the job completes; topology comes from flags and the environment. And
// `chexscale launch` as a process: SIGTERM/SIGUSR1 reach every worker, exit 75 when they all
// stopped at a checkpoint, SIGKILL after --stop-grace otherwise; a launcher killed with SIGKILL
// leaves no worker behind and its store port free.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <thread>

#include "common/error.h"
#include "common/timer.h"
#include "distributed/elastic_keys.h"
#include "distributed/rendezvous.h"
#include "distributed/store_io.h"
#include "launch/local_launcher.h"
#include "test_util/chexscale_cli.h"
#include "test_util/error_message.h"
#include "test_util/helper_programs.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"
#include "test_util/worker_group.h"

namespace chexscale {
namespace {

struct Captured {
  launch::LaunchResult result;
  std::string output;
  double seconds = 0;
};

Captured run_workers(const std::vector<std::string>& args, int nproc, int max_restarts,
                     const test_util::TempDir& dir) {
  launch::LaunchOptions o;
  o.nproc_per_node = nproc;
  o.max_restarts = max_restarts;
  o.program = test_util::distributed_worker();
  o.args = args;
  o.grace_period = std::chrono::milliseconds(2000);
  const std::string log = dir.path() + "/launch.log";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  o.output_fd = fd;
  o.error_fd = fd;
  Stopwatch watch;
  Captured c;
  c.result = launch::run_local_group(launch::resolve_topology(o, {}));
  c.seconds = watch.seconds();
  ::close(fd);
  c.output = test_util::file_contents(log);
  return c;
}

TEST(LocalLauncher, RunsTheGroupToTheEndWithRankPrefixedOutput) {
  test_util::TempDir dir;
  const Captured c = run_workers({"loop", dir.path(), "3"}, 2, 0, dir);
  EXPECT_EQ(c.result.exit_code, 0) << c.output;
  EXPECT_EQ(c.result.attempts, 1);
  EXPECT_NE(c.output.find("[rank 0] rank 0 finished 3 steps\n"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("[rank 1] rank 1 finished 3 steps\n"), std::string::npos) << c.output;
}

TEST(LocalLauncher, FailingWorkerTearsTheGroupDownAndItsStatusComesBack) {
  test_util::TempDir dir;
  // Rank 1 exits 3 before joining; rank 0 would wait 60 s in the rendezvous if not torn down.
  const Captured c = run_workers({"fail-once", dir.path()}, 2, 0, dir);
  EXPECT_EQ(c.result.exit_code, 3) << c.output;
  EXPECT_EQ(c.result.failed_rank, 1);
  EXPECT_NE(c.result.summary.find("rank 1 failed with exit status 3"), std::string::npos)
      << c.result.summary;
  EXPECT_NE(c.output.find("[rank 1] rank 1 fails on purpose"), std::string::npos) << c.output;
  EXPECT_LT(c.seconds, 30) << "the waiting rank was not torn down";
}

TEST(LocalLauncher, MaxRestartsOneCompletesAfterAFailure) {
  test_util::TempDir dir;
  const Captured c = run_workers({"fail-once", dir.path()}, 2, 1, dir);
  EXPECT_EQ(c.result.exit_code, 0) << c.output;
  EXPECT_EQ(c.result.attempts, 2);
  EXPECT_NE(c.output.find("[rank 1] rank 1 finished 3 steps"), std::string::npos) << c.output;
}

TEST(LocalLauncher, TopologyFromTheEnvironment) {
  launch::LaunchOptions o;
  o.nproc_per_node = 4;
  o.args = {"train"};
  const auto slurm = launch::resolve_topology(
      o, {{"SLURM_NNODES", "2"}, {"SLURM_NODEID", "1"}, {"SLURM_JOB_NODELIST", "gpu[3-4]"}});
  EXPECT_EQ(slurm.nnodes, 2);
  EXPECT_EQ(slurm.node_rank, 1);
  EXPECT_EQ(slurm.master_addr, "gpu3");
  EXPECT_EQ(slurm.master_port, 29500);
  const auto k8s = launch::resolve_topology(
      o, {{"NNODES", "3"}, {"JOB_COMPLETION_INDEX", "2"}, {"MASTER_ADDR", "job-0.svc"}});
  EXPECT_EQ(k8s.node_rank, 2);
  EXPECT_EQ(k8s.master_addr, "job-0.svc");
  const auto single = launch::resolve_topology(o, {});
  EXPECT_EQ(single.nnodes, 1);
  EXPECT_EQ(single.master_addr, "127.0.0.1");
  EXPECT_EQ(single.master_port, 0);  // a free port per attempt
}

TEST(LocalLauncher, InconsistentTopologyIsRejected) {
  launch::LaunchOptions o;
  o.args = {"train"};
  o.nnodes = 2;
  EXPECT_THROW(launch::resolve_topology(o, {}), UsageError);  // no master address
  o.master_addr = "h";
  o.node_rank = 2;
  EXPECT_THROW(launch::resolve_topology(o, {}), UsageError);
  o.node_rank = 0;
  o.args.clear();
  EXPECT_THROW(launch::resolve_topology(o, {}), UsageError);
}

// A worker count that would flood the node (each worker is a LibTorch process) and a program that
// cannot run are usage errors before any process starts.
TEST(LocalLauncher, ImplausibleValuesAreRejected) {
  launch::LaunchOptions o;
  o.args = {"train"};
  o.nproc_per_node = 100000;
  EXPECT_THROW(launch::resolve_topology(o, {}), UsageError);
  o.nproc_per_node = 2;
  o.program = "/nonexistent/worker";
  EXPECT_THROW(launch::resolve_topology(o, {}), UsageError);
  o.program = test_util::distributed_worker();
  EXPECT_EQ(launch::resolve_topology(o, {}).nproc_per_node, 2);
}

// Each refused value of LaunchOptions names its field (the CLI maps it to the flag).
TEST(LaunchOptionsValidate, RefusesEachBadValueNamingItsField) {
  const auto message = [](auto change) {
    launch::LaunchOptions o;
    change(o);
    return test_util::message_of<UsageError>([&] { o.validate(); });
  };
  EXPECT_EQ(message([](auto&) {}), "(no expected exception)");
  EXPECT_EQ(message([](auto& o) { o.nproc_per_node = 0; }), "nproc_per_node 0 must be at least 1");
  EXPECT_EQ(message([](auto& o) { o.nproc_per_node = launch::kMaxProcPerNode + 1; }),
            "nproc_per_node 1025 is more than 1024 workers on one node");
  EXPECT_EQ(message([](auto& o) { o.master_port = 65536; }),
            "master_port 65536 must be in [0, 65535]");
  EXPECT_EQ(message([](auto& o) { o.max_restarts = -1; }), "max_restarts -1 must be at least 0");
  EXPECT_EQ(message([](auto& o) { o.grace_period = std::chrono::duration<double>(-1); }),
            "grace_period -1 s must be in [0, 3600] seconds");
  EXPECT_EQ(message([](auto& o) { o.grace_period = std::chrono::duration<double>(std::nan("")); }),
            "grace_period nan s must be in [0, 3600] seconds");
  EXPECT_EQ(message([](auto& o) { o.stop_grace = 0; }),
            "stop_grace 0 s must be in [1, 3600] seconds");
  EXPECT_EQ(message([](auto& o) { o.worker_rdzv_timeout = std::chrono::seconds(0); }),
            "worker_rdzv_timeout 0 s must be at least 1 s");
}

// A port taken from the environment is checked like one given as an option.
TEST(LaunchOptionsValidate, ValuesFromTheEnvironmentAreCheckedToo) {
  launch::LaunchOptions o;
  o.args = {"train"};
  o.nnodes = 2;
  o.master_addr = "h";
  EXPECT_EQ(test_util::message_of<UsageError>([&] {
              launch::resolve_topology(o, {{"MASTER_PORT", "70000"}});
            }),
            "master_port 70000 must be in [0, 65535]");
}

TEST(LocalLauncher, WorkersGetTheRendezvousTimeoutWhenGiven) {
  test_util::TempDir dir;
  launch::LaunchOptions o;
  o.program = "/bin/sh";
  o.args = {"-c", "echo timeout=${CHEXSCALE_RDZV_TIMEOUT-unset}"};
  const std::string log = dir.path() + "/launch.log";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  o.output_fd = fd;
  o.error_fd = fd;
  EXPECT_EQ(launch::run_local_group(launch::resolve_topology(o, {})).exit_code, 0);
  o.worker_rdzv_timeout = std::chrono::seconds(42);
  EXPECT_EQ(launch::run_local_group(launch::resolve_topology(o, {})).exit_code, 0);
  ::close(fd);
  EXPECT_EQ(test_util::file_contents(log), "[rank 0] timeout=unset\n[rank 0] timeout=42\n");
}

// Waits until `process` has written `text` `times` times (or 60 s pass).
bool wait_for_output(const test_util::Process& process, const std::string& text, int times) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string out = process.output();
    int found = 0;
    for (size_t at = out.find(text); at != std::string::npos; at = out.find(text, at + 1))
      ++found;
    if (found >= times) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// `chexscale launch --nproc-per-node 2 FLAGS --program /bin/sh -- -c SCRIPT`.
test_util::ProcessSpec shell_workers(const std::string& flags, const std::string& script) {
  return test_util::chexscale_command("launch --nproc-per-node 2 " + flags +
                                      " --program /bin/sh -- -c '" + script + "'");
}

// A worker that stops "at a checkpoint" (exit 75) on SIGNAL, as `chexscale train` does.
std::string stops_on(const std::string& signal) {
  return "trap \"echo stopped on " + signal + "; exit 75\" " + signal +
         "; echo ready; while :; do sleep 0.05; done";
}

TEST(LaunchSignals, SigtermReachesEveryWorkerAndTheirExit75IsTheLaunchers) {
  test_util::Process launcher(shell_workers("--stop-grace 20", stops_on("TERM")));
  ASSERT_TRUE(wait_for_output(launcher, "] ready", 2)) << launcher.output();
  launcher.send_signal(SIGTERM);
  const auto r = launcher.wait(std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 75) << r.output;
  EXPECT_NE(r.output.find("[rank 0] stopped on TERM"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank 1] stopped on TERM"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped on SIGTERM: ranks 0, 1 exited 75 (stopped at a checkpoint); "
                          "exit 75 (resume with --resume auto)"),
            std::string::npos)
      << r.output;
}

TEST(LaunchSignals, SigusrOneIsForwardedToo) {
  test_util::Process launcher(shell_workers("", stops_on("USR1")));
  ASSERT_TRUE(wait_for_output(launcher, "] ready", 2)) << launcher.output();
  launcher.send_signal(SIGUSR1);
  const auto r = launcher.wait(std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 75) << r.output;
  EXPECT_NE(r.output.find("got SIGUSR1; forwarding it to the workers (SIGKILL in 26 s"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("[rank 1] stopped on USR1"), std::string::npos) << r.output;
}

// Rank 1 ignores SIGTERM: the launcher kills it when --stop-grace (+1 s) runs out and reports
// the signal's status, naming who stopped and who was killed.
TEST(LaunchSignals, AWorkerThatDoesNotStopIsKilledAfterTheStopGrace) {
  test_util::Process launcher(
      shell_workers("--stop-grace 1",
                    "if [ \"$RANK\" = 1 ]; then trap \"\" TERM; echo ready; while :; do sleep "
                    "0.05; done; fi; " +
                        stops_on("TERM")));
  ASSERT_TRUE(wait_for_output(launcher, "] ready", 2)) << launcher.output();
  const auto sent = std::chrono::steady_clock::now();
  launcher.send_signal(SIGTERM);
  const auto r = launcher.wait(std::chrono::seconds(60));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.output;
  EXPECT_NE(r.output.find("stopped on SIGTERM: rank 0 exited 75 (stopped at a checkpoint); rank "
                          "1 ended with signal 9 (Killed); SIGKILL sent when the grace ran out"),
            std::string::npos)
      << r.output;
  EXPECT_GE(seconds, 1.9);  // --stop-grace 1 + the 1 s margin
  EXPECT_LT(seconds, 10);
}

bool process_gone(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string pid_text, name, state;
  // Gone, or a zombie nobody has reaped yet (it holds no socket).
  return !(stat >> pid_text >> name >> state) || state == "Z";
}

// The workers are children of the launcher, each in its own process group: only
// PR_SET_PDEATHSIG ends them when the launcher is killed. Rank 0 served the store on the port;
// a new job on the same port starts and finishes.
TEST(LaunchSignals, WorkersOfAKilledLauncherDoNotLingerAndThePortIsFree) {
  test_util::TempDir dir;
  const int port = distributed::pick_free_port();
  const std::string job = fmt::format("launch --nproc-per-node 2 --master-port {} --program {} -- ",
                                      port, test_util::distributed_worker());
  test_util::Process launcher(test_util::chexscale_command(job + "loop " + dir.path() + " 100000"));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (test_util::worker_progress(dir.path()) < 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GE(test_util::worker_progress(dir.path()), 2) << launcher.output();
  std::vector<pid_t> workers;
  std::ifstream children(fmt::format("/proc/{}/task/{}/children", launcher.pid(), launcher.pid()));
  for (pid_t child = 0; children >> child;)
    workers.push_back(child);
  ASSERT_EQ(workers.size(), 2u);

  launcher.send_signal(SIGKILL);
  EXPECT_EQ(launcher.wait(std::chrono::seconds(10)).exit_code, 128 + SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  const auto all_gone = [&] { return std::all_of(workers.begin(), workers.end(), process_gone); };
  while (!all_gone() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(all_gone()) << "a worker outlived its launcher";

  test_util::TempDir again;
  const auto next = test_util::run_chexscale(job + "loop " + again.path() + " 3");
  EXPECT_EQ(next.exit_code, 0) << next.output;
  EXPECT_NE(next.output.find("[rank 0] rank 0 finished 3 steps"), std::string::npos) << next.output;
}

// An elastic job on this host: `chexscale rendezvous-server` and one launcher per "node"
// (--nnodes 1:2, one worker each: a shell script that prints its round, rank and world size).
class ElasticLaunch : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = distributed::pick_free_port();
    start_server();
  }

  std::unique_ptr<test_util::Process> node(const std::string& name, const std::string& script,
                                           const std::string& flags = "--nnodes 1:2",
                                           int heartbeat_timeout_s = 2, int last_call_s = 1) {
    return std::make_unique<test_util::Process>(test_util::chexscale_command(fmt::format(
        "launch {} --nproc-per-node 1 --master-addr 127.0.0.1 --master-port {} --node-name {} "
        "--rdzv-last-call {} --heartbeat-timeout {} --max-restarts 3 --program /bin/sh -- -c '{}'",
        flags, port_, name, last_call_s, heartbeat_timeout_s, script)));
  }

  void start_server() {
    server_ = std::make_unique<test_util::Process>(
        test_util::chexscale_command(fmt::format("rendezvous-server --port {}", port_)));
    ASSERT_TRUE(wait_for_output(*server_, "serving the store on port", 1)) << server_->output();
  }

  // Whether node `place` of round `round` joined at the server within a minute: then its
  // launcher reached the server (on a loaded machine a launcher's start and first connection can
  // take seconds, so a fixed sleep is not enough).
  bool joined_at_server(int round, int place) {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(port_);
    options.isServer = false;
    options.waitWorkers = false;
    c10d::TCPStore store("127.0.0.1", options);
    return distributed::wait_for_key(
        store,
        distributed::elastic_key(launch::kDefaultRdzvId, fmt::format("r{}/node/{}", round, place)),
        std::chrono::steady_clock::now() + std::chrono::minutes(1));
  }

  void stop_server() {
    server_->send_signal(SIGTERM);
    // wait() counts from the server's start; its stop gets 20 s from now.
    const auto stopped =
        server_->wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(20));
    EXPECT_EQ(stopped.exit_code, 0) << server_->output();
  }

  int port_ = 0;
  std::unique_ptr<test_util::Process> server_;
};

// Prints the round's facts; in the rounds before `last_round` runs until SIGTERM (then exits
// 75, as train does); in `last_round` exits 0.
std::string elastic_worker(int last_round) {
  return fmt::format(
      "echo round=$CHEXSCALE_ELASTIC_ROUND rank=$RANK world=$WORLD_SIZE; "
      "if [ $CHEXSCALE_ELASTIC_ROUND -lt {} ]; then trap \"exit 75\" TERM; "
      "while :; do sleep 0.05; done; fi",
      last_round);
}

TEST_F(ElasticLaunch, TwoNodesMeetInOneRoundWithRanksOfTheirOwn) {
  // A last call long enough for the second launcher to start on a loaded machine (it can take
  // seconds); with both nodes in, the round opens at once.
  auto a = node("a", elastic_worker(0), "--nnodes 1:2", 2, 30);
  auto b = node("b", elastic_worker(0), "--nnodes 1:2", 2, 30);
  const auto ra = a->wait(std::chrono::seconds(60));
  const auto rb = b->wait(std::chrono::seconds(60));
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  ASSERT_EQ(rb.exit_code, 0) << rb.output;
  const bool a_is_zero = ra.output.find("round=0 rank=0 world=2") != std::string::npos;
  EXPECT_NE((a_is_zero ? rb : ra).output.find("round=0 rank=1 world=2"), std::string::npos)
      << ra.output << rb.output;
  EXPECT_NE(ra.output.find("round 0: 2 node(s)"), std::string::npos) << ra.output;
}

TEST_F(ElasticLaunch, ANodeKilledIsNamedAndTheOtherCarriesOnAlone) {
  auto a = node("a", elastic_worker(1));
  auto b = node("b", elastic_worker(1));
  ASSERT_TRUE(wait_for_output(*a, "world=2", 1)) << a->output();
  ASSERT_TRUE(wait_for_output(*b, "world=2", 1)) << b->output();
  const auto killed = std::chrono::steady_clock::now();
  b->send_signal(SIGKILL);  // its worker follows (PR_SET_PDEATHSIG)
  const auto ra = a->wait(std::chrono::seconds(60));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  EXPECT_NE(ra.output.find("(b) sent no heartbeat for 2 s"), std::string::npos) << ra.output;
  EXPECT_NE(ra.output.find("round 1: 1 node(s) (a), world size 1"), std::string::npos) << ra.output;
  EXPECT_NE(ra.output.find("round=1 rank=0 world=1"), std::string::npos) << ra.output;
  EXPECT_LT(seconds, 15) << ra.output;  // 2 s to notice, 2 s for b's round to be given up
}

TEST_F(ElasticLaunch, ANodeThatComesBackIsTakenInAtTheNextRound) {
  auto a = node("a", elastic_worker(1));
  ASSERT_TRUE(wait_for_output(*a, "round=0 rank=0 world=1", 1)) << a->output();
  auto b = node("b", elastic_worker(1));
  const auto ra = a->wait(std::chrono::seconds(60));
  const auto rb = b->wait(std::chrono::seconds(60));
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  ASSERT_EQ(rb.exit_code, 0) << rb.output;
  EXPECT_NE(ra.output.find("round 0 ended: 1 node(s) waiting to join"), std::string::npos)
      << ra.output;
  // Node ranks of a round follow the order the nodes joined it: either node may be rank 0.
  const bool a_first = ra.output.find("round=1 rank=0 world=2") != std::string::npos;
  EXPECT_NE(ra.output.find(a_first ? "round=1 rank=0 world=2" : "round=1 rank=1 world=2"),
            std::string::npos)
      << ra.output;
  EXPECT_NE(rb.output.find(a_first ? "round=1 rank=1 world=2" : "round=1 rank=0 world=2"),
            std::string::npos)
      << rb.output;
}

// A stop signal to one node's launcher stops the whole job: every worker exits 75, and so does
// every launcher.
TEST_F(ElasticLaunch, ASigtermToOneNodeStopsTheJob) {
  auto a = node("a", elastic_worker(5));
  auto b = node("b", elastic_worker(5));
  ASSERT_TRUE(wait_for_output(*a, "world=2", 1)) << a->output();
  ASSERT_TRUE(wait_for_output(*b, "world=2", 1)) << b->output();
  a->send_signal(SIGTERM);
  const auto ra = a->wait(std::chrono::seconds(60));
  EXPECT_EQ(ra.exit_code, 75) << ra.output;
  // b's worker never got a signal of its own (in train, the stop vote reaches it); the test's
  // worker is told by b's agent, which follows the round's end.
  const auto rb = b->wait(std::chrono::seconds(60));
  EXPECT_EQ(rb.exit_code, 75) << rb.output;
  EXPECT_NE(rb.output.find("stopped on SIGTERM to node a"), std::string::npos) << rb.output;
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++n;
  return n;
}

// A node that arrives while a round runs with MAX nodes waits as a spare (as torch's dynamic
// rendezvous keeps a redundant node), says so once, and is taken in when a node is lost.
// Heartbeats of 5 s: a round that ended early (a heartbeat late by 2 s under a heavy load) would
// end the job before the spare arrives, and the test would check nothing.
TEST_F(ElasticLaunch, ASpareAtAFullRoundSaysSoOnceAndIsTakenInWhenANodeIsLost) {
  auto a = node("a", elastic_worker(1), "--nnodes 1:2", 5);
  auto b = node("b", elastic_worker(1), "--nnodes 1:2", 5);
  ASSERT_TRUE(wait_for_output(*a, "world=2", 1)) << a->output();
  ASSERT_TRUE(wait_for_output(*b, "world=2", 1)) << b->output();
  auto c = node("c", elastic_worker(1), "--nnodes 1:2", 5);
  ASSERT_TRUE(wait_for_output(*c, "waits as a spare", 1)) << c->output();
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the running round is left alone
  EXPECT_EQ(a->output().find("round 0 ended"), std::string::npos) << a->output();
  b->send_signal(SIGKILL);
  const auto ra = a->wait(std::chrono::seconds(60));
  const auto rc = c->wait(std::chrono::seconds(60));
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  ASSERT_EQ(rc.exit_code, 0) << rc.output;
  EXPECT_NE(rc.output.find("round 0 is under way with 2 node(s), the most --nnodes 1:2 allows: "
                           "node c waits as a spare"),
            std::string::npos)
      << rc.output;
  EXPECT_EQ(count(rc.output, "waits as a spare"), 1u) << rc.output;
  EXPECT_NE(ra.output.find("(b) sent no heartbeat"), std::string::npos) << ra.output;
  EXPECT_NE(rc.output.find("round 1: 2 node(s)"), std::string::npos) << rc.output;
  EXPECT_NE(rc.output.find("world=2"), std::string::npos) << rc.output;
}

// A spare that no round takes in ends at --rdzv-timeout naming the full round.
TEST_F(ElasticLaunch, ASpareNoRoundTakesInFailsAtTheRdzvTimeoutNamingWhy) {
  auto a = node("a", elastic_worker(5));
  auto b = node("b", elastic_worker(5));
  ASSERT_TRUE(wait_for_output(*a, "world=2", 1)) << a->output();
  ASSERT_TRUE(wait_for_output(*b, "world=2", 1)) << b->output();
  const auto started = std::chrono::steady_clock::now();
  const auto rc = node("c", elastic_worker(5), "--nnodes 1:2 --rdzv-timeout 3")->wait();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_NE(rc.exit_code, 0) << rc.output;
  EXPECT_NE(rc.output.find("no round took node c in within --rdzv-timeout: round 0 kept all 2 "
                           "places of --nnodes 1:2 the whole time"),
            std::string::npos)
      << rc.output;
  EXPECT_GE(seconds, 2.9);
  EXPECT_LT(seconds, 15);
  a->send_signal(SIGTERM);
  EXPECT_EQ(a->wait(std::chrono::seconds(60)).exit_code, 75);
  EXPECT_EQ(b->wait(std::chrono::seconds(60)).exit_code, 75);
}

// A server whose job finished refuses a launcher of the same --rdzv-id (it would otherwise "finish"
// at once, having done nothing); a new id runs a new job there, with workers that use the
// store (the round's attempt keeps their keys off the first job's).
TEST_F(ElasticLaunch, AFinishedJobRefusesNewLaunchersAndANewRdzvIdRunsAgain) {
  test_util::TempDir dir;
  const auto job = [&](const std::string& id, const std::string& out) {
    return test_util::run_chexscale(
        fmt::format("launch --nnodes 1:2 --rdzv-id {} --nproc-per-node 1 --master-addr 127.0.0.1 "
                    "--master-port {} --node-name a --rdzv-last-call 1 --program {} -- loop {} 3",
                    id, port_, test_util::distributed_worker(), out));
  };
  const auto first = job("first", dir.path() + "/1");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("[rank 0] rank 0 finished 3 steps"), std::string::npos)
      << first.output;
  const auto again = job("first", dir.path() + "/2");
  EXPECT_NE(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("job 'first' on this rendezvous server has finished already (node "
                              "a was not part of it): start a new job with a new --rdzv-id, or "
                              "restart the rendezvous server"),
            std::string::npos)
      << again.output;
  EXPECT_EQ(again.output.find("finished 3 steps"), std::string::npos) << again.output;
  const auto second = job("second", dir.path() + "/3");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("[rank 0] rank 0 finished 3 steps"), std::string::npos)
      << second.output;
}

// A node lost mid-job that comes back after the others finished (a pod its controller replaced
// late) has nothing left to do and exits 0; a node that finished with the job, or one that was
// never part of it, is still refused as a new job's launcher would be.
TEST_F(ElasticLaunch, ALostNodeBackAfterTheJobFinishedExitsZeroAndOthersAreStillRefused) {
  auto a = node("a", elastic_worker(1));
  auto b = node("b", elastic_worker(1));
  ASSERT_TRUE(wait_for_output(*a, "world=2", 1)) << a->output();
  ASSERT_TRUE(wait_for_output(*b, "world=2", 1)) << b->output();
  b->send_signal(SIGKILL);
  const auto ra = a->wait(std::chrono::seconds(60));
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  ASSERT_NE(ra.output.find("round 1: 1 node(s) (a)"), std::string::npos) << ra.output;
  const auto back = node("b", elastic_worker(1))->wait(std::chrono::seconds(60));
  EXPECT_EQ(back.exit_code, 0) << back.output;
  EXPECT_NE(back.output.find("job 'none' finished in round 1 while node b was away (it took part "
                             "in round 0): nothing left to do"),
            std::string::npos)
      << back.output;
  EXPECT_EQ(back.output.find("round="), std::string::npos) << back.output;  // no worker ran
  for (const std::string name : {"a", "c"}) {
    const auto late = node(name, elastic_worker(1))->wait(std::chrono::seconds(60));
    EXPECT_NE(late.exit_code, 0) << late.output;
    EXPECT_NE(late.output.find("has finished already (node " + name + " was not part of it)"),
              std::string::npos)
        << late.output;
  }
}

// A server with a job token and a job id: launchers and workers without the token, and a launcher
// of another job, are refused with the reason, each named in the server's log; the job that holds
// the token runs as if they had never come (one node, its worker through the gate too).
TEST_F(ElasticLaunch, AJobTokenAdmitsItsJobAndRefusesStrayLaunchersAndWorkers) {
  stop_server();
  test_util::TempDir dir;
  const std::string token = dir.path() + "/token", wrong = dir.path() + "/wrong";
  std::ofstream(token) << "s3cret-token\n";
  std::ofstream(wrong) << "not-the-token\n";
  server_ = std::make_unique<test_util::Process>(test_util::chexscale_command(fmt::format(
      "rendezvous-server --port {} --rdzv-token-file {} --rdzv-id tokenjob", port_, token)));
  ASSERT_TRUE(wait_for_output(*server_, "serving the store on port", 1)) << server_->output();
  const auto launch = [&](const std::string& node, const std::string& job,
                          const std::string& token_flag, const std::string& out, int workers = 1) {
    return test_util::run_chexscale(fmt::format(
        "launch --nnodes 1:2 --rdzv-id {} {} --nproc-per-node {} --master-addr 127.0.0.1 "
        "--master-port {} --node-name {} --rdzv-last-call 1 --program {} -- loop {} 3",
        job, token_flag, workers, port_, node, test_util::distributed_worker(), out));
  };
  const auto bad_token = launch("stray", "tokenjob", "--rdzv-token-file " + wrong, dir.path());
  EXPECT_NE(bad_token.exit_code, 0) << bad_token.output;
  EXPECT_NE(bad_token.output.find(
                "the rendezvous server refused node stray of job 'tokenjob': wrong job token"),
            std::string::npos)
      << bad_token.output;
  const auto no_token = launch("bare", "tokenjob", "", dir.path());
  EXPECT_NE(no_token.exit_code, 0) << no_token.output;
  EXPECT_NE(no_token.output.find("refused node bare of job 'tokenjob': wrong job token"),
            std::string::npos)
      << no_token.output;
  const auto other_job = launch("other", "otherjob", "--rdzv-token-file " + token, dir.path());
  EXPECT_NE(other_job.exit_code, 0) << other_job.output;
  EXPECT_NE(other_job.output.find("refused node other of job 'otherjob': this server serves job "
                                  "'tokenjob' only"),
            std::string::npos)
      << other_job.output;
  // A worker started by hand as if by a launcher of the job, with a wrong token.
  const auto worker = test_util::run_shell(fmt::format(
      "TORCHELASTIC_USE_AGENT_STORE=True TORCHELASTIC_RUN_ID=tokenjob CHEXSCALE_RDZV_TOKEN=nope "
      "MASTER_ADDR=127.0.0.1 MASTER_PORT={} RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "
      "LOCAL_WORLD_SIZE=1 {} loop {} 3",
      port_, test_util::distributed_worker(), dir.path()));
  EXPECT_NE(worker.exit_code, 0) << worker.output;
  EXPECT_NE(worker.output.find("refused rank 0 of job 'tokenjob': wrong job token"),
            std::string::npos)
      << worker.output;

  // Two workers, so that they meet in a process group through the gate.
  const auto job = launch("a", "tokenjob", "--rdzv-token-file " + token, dir.path() + "/run", 2);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("round 0: 1 node(s) (a), world size 2"), std::string::npos)
      << job.output;
  EXPECT_NE(job.output.find("[rank 0] rank 0 finished 3 steps"), std::string::npos) << job.output;
  const std::string log = server_->output();
  for (const char* refused :
       {"refused node stray of job 'tokenjob': wrong job token",
        "refused node bare of job 'tokenjob': wrong job token",
        "refused node other of job 'otherjob': this server serves job 'tokenjob' only",
        "refused rank 0 of job 'tokenjob': wrong job token"}) {
    EXPECT_NE(log.find(refused), std::string::npos) << refused << "\n" << log;
  }
  EXPECT_NE(log.find("admitted node a of job 'tokenjob'"), std::string::npos) << log;
  EXPECT_NE(log.find("admitted rank 0 of job 'tokenjob'"), std::string::npos) << log;
  EXPECT_NE(log.find("admitted rank 1 of job 'tokenjob'"), std::string::npos) << log;
}

// The server goes away while a node waits for a second one: the launcher logs each retry and,
// once a server is back on the port, joins its round and runs.
TEST_F(ElasticLaunch, StoreErrorsDuringTheJoinAreRetriedUntilTheServerIsBack) {
  auto a = node("a", elastic_worker(0), "--nnodes 2:3");
  ASSERT_TRUE(joined_at_server(0, 0)) << a->output();  // a waits in round 0
  stop_server();
  ASSERT_TRUE(wait_for_output(*a, "retry 2 in", 1)) << a->output();
  start_server();
  auto b = node("b", elastic_worker(0), "--nnodes 2:3");
  const auto ra = a->wait(std::chrono::seconds(60));
  const auto rb = b->wait(std::chrono::seconds(60));
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  ASSERT_EQ(rb.exit_code, 0) << rb.output;
  EXPECT_NE(ra.output.find(fmt::format("the rendezvous server at 127.0.0.1:{} failed (", port_)),
            std::string::npos)
      << ra.output;
  EXPECT_NE(ra.output.find("retry 1 in 0.5 s"), std::string::npos) << ra.output;
  EXPECT_NE(ra.output.find("round 0: 2 node(s)"), std::string::npos) << ra.output;
}

// With no server back, the retries end at --rdzv-timeout with the last error.
TEST_F(ElasticLaunch, StoreErrorsDuringTheJoinEndAtTheRdzvTimeout) {
  auto a = node("a", elastic_worker(0), "--nnodes 2:3 --rdzv-timeout 4");
  ASSERT_TRUE(joined_at_server(0, 0)) << a->output();  // as above
  stop_server();
  const auto ra = a->wait(std::chrono::seconds(30));
  EXPECT_NE(ra.exit_code, 0) << ra.output;
  EXPECT_NE(ra.output.find(fmt::format("the rendezvous server at 127.0.0.1:{} kept failing for "
                                       "--rdzv-timeout (4 s); the last error: ",
                                       port_)),
            std::string::npos)
      << ra.output;
  EXPECT_GE(count(ra.output, "; retry "), 2u) << ra.output;
}

}  // namespace
}  // namespace chexscale
