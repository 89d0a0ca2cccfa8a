// Faults a real cluster inflicts, injected into short training runs on the emulated nodes
// (network namespaces, real processes, Gloo over the lab's fabric): a SIGTERM to one node's
// launcher (the job stops at a checkpoint; the restart ends with the bytes of a run never
// stopped), every process of the rank-0 node killed (the other node carries on alone and takes
// it back when it returns), a node's link cut and restored (the same), a full disk at
// checkpoint time (a clear error, the previous checkpoint kept, a resume once freed) and a
// launcher killed with SIGKILL (no worker nor port left behind). Elastic jobs meet at
// `chexscale rendezvous-server` on a third node. Each test prints its timings: fault to
// detection, to the restart, to the first step after it, and the steps lost.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "lab/elastic_lab.h"
#include "test_util/full_disk.h"
#include "test_util/temp_dir.h"

namespace chexscale::test_util {
namespace {

// The elastic lab's fixture, under the name these tests report.
class LabFaults : public ElasticLab {};

TEST_F(LabFaults, SigtermToOneLauncherStopsTheJobAtACheckpointAndTheRestartIsExact) {
  const auto fixed = [&](int node, const std::string& out, const std::string& log) {
    return fixed_node(node, train(out, 2), log, "--stop-grace 10");
  };
  const std::string whole = tmp_.path() + "/whole", run = tmp_.path() + "/run";
  {
    auto n0 = fixed(0, whole, "whole0.log"), n1 = fixed(1, whole, "whole1.log");
    const auto r = wait_all({n0.get(), n1.get()}, Clock::now() + std::chrono::minutes(3));
    ASSERT_EQ(r[0].exit_code, 0) << r[0].output << r[1].output;
    ASSERT_EQ(r[1].exit_code, 0) << r[1].output;
  }
  auto n0 = fixed(0, run, "run0.log"), n1 = fixed(1, run, "run1.log");
  ASSERT_TRUE(wait_for_checkpoint(run, 4)) << n0->output();
  const auto sent = Clock::now();
  n1->send_signal(SIGTERM);
  const auto r = wait_all({n0.get(), n1.get()}, Clock::now() + std::chrono::minutes(2));
  const double stop_seconds = since(sent);
  EXPECT_EQ(r[0].exit_code, 75) << r[0].output;
  EXPECT_EQ(r[1].exit_code, 75) << r[1].output;
  EXPECT_NE(r[1].output.find("stopped on SIGTERM: rank 1 exited 75 (stopped at a checkpoint)"),
            std::string::npos)
      << r[1].output;
  EXPECT_LT(stop_seconds, 10) << "the stop took longer than --stop-grace";
  const std::string stopped_at = newest_step_manifest(run + "/checkpoints");
  const int64_t stop_step = std::stoll(stopped_at.substr(5));
  const std::vector<int64_t> steps = logged_steps(run);
  fmt::print(
      "[fault: SIGTERM to node 1's launcher] all stopped {:.2f} s after it, at step {}; 0 "
      "steps lost (the last step trained: {})\n",
      stop_seconds, stop_step, steps.empty() ? -1 : steps.back());
  EXPECT_EQ(steps.back(), stop_step);

  auto again0 = fixed(0, run, "again0.log"), again1 = fixed(1, run, "again1.log");
  const auto a = wait_all({again0.get(), again1.get()}, Clock::now() + std::chrono::minutes(3));
  ASSERT_EQ(a[0].exit_code, 0) << a[0].output << a[1].output;
  ASSERT_EQ(a[1].exit_code, 0) << a[1].output;
  EXPECT_NE(a[0].output.find("resumed from " + run + "/checkpoints/" + stopped_at),
            std::string::npos)
      << a[0].output;
  expect_same_final_checkpoints(whole, run);
}

// Rank 0's node (node 0 or 1, whichever took place 0) loses every process: the other node names
// it, carries on alone from the last checkpoint, and takes it back when it is started again.
TEST_F(LabFaults, RankZeroNodeKilledTheOtherCarriesOnAloneAndTakesItBack) {
  auto server = rendezvous_server();
  const std::string run = tmp_.path() + "/run";
  constexpr int kEpochs = 8;
  std::unique_ptr<Process> nodes[2] = {elastic_node(0, run, kEpochs, "node0.log"),
                                       elastic_node(1, run, kEpochs, "node1.log")};
  const std::optional<BothNodes> met = wait_for_both_nodes(*nodes[0]);
  ASSERT_TRUE(met) << nodes[0]->output() << nodes[1]->output();
  ASSERT_TRUE(wait_for_logged_step(run, 5)) << nodes[0]->output() << nodes[1]->output();
  const int victim = met->rank0_node;
  const int survivor = 1 - victim;
  const size_t from = nodes[survivor]->output().size();
  const std::vector<int64_t> before = logged_steps(run);
  const auto fault = Clock::now();
  kill_every_process_of(victim);
  expect_recovery(*nodes[survivor], run, fault, from, before.empty() ? 0 : before.back(),
                  fmt::format("kill -9 of rank 0's node (node {})", victim), met->round);
  EXPECT_NE(
      nodes[survivor]->output().find(fmt::format("(node-{}) sent no heartbeat", victim), from),
      std::string::npos)
      << nodes[survivor]->output();

  nodes[victim] = elastic_node(victim, run, kEpochs, "back.log");
  const auto rejoined =
      wait_for_text(*nodes[survivor], fmt::format("round {}: 2 node(s)", met->round + 2), from);
  EXPECT_TRUE(rejoined) << nodes[survivor]->output() << nodes[victim]->output();
  const auto r = wait_all({nodes[0].get(), nodes[1].get()}, Clock::now() + std::chrono::minutes(3));
  EXPECT_EQ(r[survivor].exit_code, 0) << r[survivor].output;
  EXPECT_EQ(r[victim].exit_code, 0) << r[victim].output;
  EXPECT_NE(r[survivor].output.find(
                fmt::format("round {} ended: 1 node(s) waiting to join", met->round + 1)),
            std::string::npos)
      << r[survivor].output;
  // The run completed: every epoch's record, the last checkpoint written by 2 workers.
  EXPECT_EQ(validations(run).size(), static_cast<size_t>(kEpochs));
  // And metrics.jsonl recorded each membership from the one the fault ended: round, world size.
  const int m = met->round;
  EXPECT_EQ(memberships(run, m),
            (std::vector<std::pair<int, int>>{{m, 2}, {m + 1, 1}, {m + 2, 2}}));
  expect_each_example_once_per_epoch(run, kEpochs);
  const auto last = nlohmann::json::parse(
      file_contents(run + "/checkpoints/" + newest_step_manifest(run + "/checkpoints")));
  EXPECT_EQ(last.at("state").at("world_size"), 2);
}

// Node 1's link goes down (every packet to and from it lost, no reset): node 0 finds it silent,
// goes on alone; once the link is back node 1 rejoins.
TEST_F(LabFaults, ALinkCutAndRestoredDropsTheNodeThenTakesItBack) {
  auto server = rendezvous_server();
  const std::string run = tmp_.path() + "/run";
  constexpr int kEpochs = 8;
  auto n0 = elastic_node(0, run, kEpochs, "node0.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto n1 = elastic_node(1, run, kEpochs, "node1.log");
  const std::optional<BothNodes> met = wait_for_both_nodes(*n0);
  ASSERT_TRUE(met) << n0->output() << n1->output();
  ASSERT_TRUE(wait_for_logged_step(run, 5)) << n0->output() << n1->output();
  // The node holding rank 1 loses its link (the other keeps rank 0 and the run directory).
  const int cut = 1 - met->rank0_node;
  Process& survivor = cut == 1 ? *n0 : *n1;
  const size_t from = survivor.output().size();
  const std::vector<int64_t> before = logged_steps(run);
  const auto fault = Clock::now();
  ASSERT_EQ(run_shell("ip -n " + ns(cut) + " link set eth0 down").exit_code, 0);
  expect_recovery(survivor, run, fault, from, before.empty() ? 0 : before.back(),
                  fmt::format("link of node {} cut", cut), met->round);
  ASSERT_EQ(run_shell("ip -n " + ns(cut) + " link set eth0 up").exit_code, 0);
  const auto rejoined =
      wait_for_text(survivor, fmt::format("round {}: 2 node(s)", met->round + 2), from);
  EXPECT_TRUE(rejoined) << survivor.output() << (cut == 1 ? *n1 : *n0).output();
  const auto r = wait_all({n0.get(), n1.get()}, Clock::now() + std::chrono::minutes(3));
  EXPECT_EQ(r[0].exit_code, 0) << r[0].output;
  EXPECT_EQ(r[1].exit_code, 0) << r[1].output;
  expect_each_example_once_per_epoch(run, kEpochs);
}

// The run directory of a fixed two-node job is a small tmpfs, all but half a checkpoint of it
// taken once step 2's checkpoint is there: step 4's checkpoint fails on node 0 (rank 0 writes
// them) naming the path and the bytes it needs, node 1 loses its peer and ends too, the step-2
// checkpoint is all the folder holds, and once the filler is gone `--resume auto` carries on
// from it to the end.
TEST_F(LabFaults, AFullDiskAtCheckpointTimeFailsClearlyKeepsThePreviousAndResumesOnceFreed) {
  const std::string disk = tmp_.path() + "/disk";
  const test_util::TmpfsMount tmpfs(disk, uintmax_t{1} << 30);  // the nodes' namespaces share it
  ASSERT_TRUE(tmpfs.mounted());
  const std::string run = disk + "/run";
  const auto job = [&](const std::string& extra, const std::string& tag) {
    std::unique_ptr<Process> nodes[2];
    for (int node = 0; node < 2; ++node)
      nodes[node] =
          fixed_node(node, train(run, 1) + " " + extra, fmt::format("{}{}.log", tag, node));
    return wait_all({nodes[0].get(), nodes[1].get()}, Clock::now() + std::chrono::minutes(2));
  };
  const auto first = job("--max-steps 2", "first");
  ASSERT_EQ(first[0].exit_code, 0) << first[0].output << first[1].output;
  const std::string checkpoints = run + "/checkpoints";
  const uintmax_t checkpoint = fs::file_size(checkpoints + "/step-000000002.safetensors");
  struct statvfs room {};
  ASSERT_EQ(::statvfs(disk.c_str(), &room), 0);
  const uintmax_t free_bytes = static_cast<uintmax_t>(room.f_bavail) * room.f_frsize;
  ASSERT_GT(free_bytes, checkpoint * 2) << "the tmpfs is too small for the test";
  const std::string filler = disk + "/filler";
  test_util::allocate_file(filler, free_bytes - checkpoint / 2);
  if (HasFatalFailure()) return;

  const auto started = Clock::now();
  const auto full = job("", "full");
  const double ended = since(started);
  EXPECT_EQ(full[0].exit_code, 1) << full[0].output;
  EXPECT_NE(full[1].exit_code, 0) << full[1].output;
  std::smatch m;
  const std::string step4 = checkpoints + "/step-000000004.safetensors";
  ASSERT_TRUE(std::regex_search(full[0].output, m,
                                std::regex("no space for " + step4 +
                                           ": it needs ([0-9]+) bytes \\([0-9.]+ MiB\\), ([0-9]+) "
                                           "bytes \\([0-9.]+ MiB\\) free on the file system of " +
                                           checkpoints)))
      << full[0].output;
  EXPECT_GT(std::stoull(m[1]), checkpoint);
  EXPECT_LT(std::stoull(m[2]), checkpoint);
  // Node 1 names the rank it lost.
  EXPECT_NE(full[1].output.find("rank 0"), std::string::npos) << full[1].output;
  EXPECT_LT(ended, 60) << "the job took too long to end after the failed checkpoint";
  EXPECT_EQ(test_util::sorted_names_in(checkpoints),
            (std::vector<std::string>{"step-000000002.json", "step-000000002.safetensors"}));

  fs::remove(filler);
  const auto freed = job("", "freed");
  ASSERT_EQ(freed[0].exit_code, 0) << freed[0].output << freed[1].output;
  ASSERT_EQ(freed[1].exit_code, 0) << freed[1].output;
  EXPECT_NE(freed[0].output.find("resumed from " + checkpoints + "/step-000000002.json"),
            std::string::npos)
      << freed[0].output;
  // 46 training images in global batches of 8: 6 steps.
  EXPECT_EQ(newest_step_manifest(checkpoints), "step-000000006.json");
  fmt::print(
      "[fault: full disk at step 4's checkpoint] both nodes ended {:.2f} s after the job "
      "started; resumed at step 2 once freed: 2 step(s) lost (--checkpoint-every 2)\n",
      ended);
}

// Gone, or a zombie nobody has reaped yet whose threads have all ended (the main thread of a
// killed process may turn zombie while the others still hold its files).
bool process_gone(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string pid_text, name, state;
  if (!(stat >> pid_text >> name >> state)) return true;
  if (state != "Z") return false;
  const std::string tasks = fmt::format("/proc/{}/task", pid);
  std::error_code error;
  auto it = fs::directory_iterator(tasks, error);
  return error || std::distance(it, fs::directory_iterator()) <= 1;
}

// SIGKILL to node 0's launcher of a fixed two-node job (its rank 0 serves the job's store on
// kPort): its worker follows it at once (PR_SET_PDEATHSIG), node 0 is left listening on no port
// and kPort binds again straight away (as the store binds it: SO_REUSEADDR), and node 1's
// launcher reports the lost rank and ends.
TEST_F(LabFaults, ALauncherKilledWithSigkillLeavesNoWorkerNorPortAndTheOtherNodeEnds) {
  const std::string run = tmp_.path() + "/run";
  std::unique_ptr<Process> nodes[2];
  for (int node = 0; node < 2; ++node)
    nodes[node] = fixed_node(node, train(run, 8), fmt::format("node{}.log", node));
  ASSERT_TRUE(wait_for_logged_step(run, 3)) << nodes[0]->output() << nodes[1]->output();
  const std::vector<pid_t> workers = children_of(nodes[0]->pid());
  ASSERT_EQ(workers.size(), 1u) << nodes[0]->output();
  const ProcessResult listening = run_shell("ip netns exec " + ns(0) + " ss -Htln");
  EXPECT_NE(listening.output.find(fmt::format(":{}", kPort)), std::string::npos)
      << "rank 0 should serve the store on " << kPort << ": " << listening.output;

  const auto fault = Clock::now();
  nodes[0]->send_signal(SIGKILL);
  EXPECT_EQ(nodes[0]->wait(std::chrono::seconds(10)).exit_code, 128 + SIGKILL);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  const auto all_gone = [&] { return std::all_of(workers.begin(), workers.end(), process_gone); };
  while (!all_gone() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(all_gone()) << "a worker outlived its launcher";
  const double gone = since(fault);
  const ProcessResult left = run_shell("ip netns exec " + ns(0) + " ss -Htlnp");
  EXPECT_EQ(left.output, "") << "node 0 still listens once its worker is gone";
  const ProcessResult bind = run_shell(
      fmt::format("ip netns exec {} python3 -c 'import socket; s = socket.socket(); "
                  "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((\"{}\", {})); "
                  "s.listen(); print(\"bound\")'",
                  ns(0), address(0), kPort));
  EXPECT_EQ(bind.exit_code, 0) << bind.output;
  EXPECT_NE(bind.output.find("bound"), std::string::npos) << bind.output;

  const ProcessResult other = nodes[1]->wait(std::chrono::seconds(60));
  const double ended = since(fault);
  EXPECT_NE(other.exit_code, 0) << other.output;
  EXPECT_NE(other.output.find("rank 1"), std::string::npos) << other.output;
  EXPECT_LT(ended, 30) << other.output;
  const size_t said_at = other.output.rfind("chexscale launch: ");
  ASSERT_NE(said_at, std::string::npos) << other.output;
  const std::string said = other.output.substr(said_at);
  fmt::print(
      "[fault: SIGKILL to node 0's launcher] its worker gone {:.2f} s after it, node 1's "
      "launcher ended (status {}) {:.2f} s after it: {}",
      gone, other.exit_code, ended, said);
}

}  // namespace
}  // namespace chexscale::test_util
