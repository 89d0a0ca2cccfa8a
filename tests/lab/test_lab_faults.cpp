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

#include "lab/lab_fixture.h"
#include "test_util/full_disk.h"
#include "test_util/temp_dir.h"

namespace chexscale::test_util {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kServerNode = 2;  // the rendezvous server's own "host"
constexpr int kPort = 29611;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Waits until `process` has written `text` (60 s at most); the time it appeared.
std::optional<Clock::time_point> wait_for(const Process& process, const std::string& text,
                                          size_t from = 0) {
  const auto deadline = Clock::now() + std::chrono::seconds(90);
  while (Clock::now() < deadline) {
    const std::string out = process.output();
    if (out.size() > from && out.find(text, from) != std::string::npos) return Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

// The step records of a run's metrics.jsonl (its step numbers, in file order).
std::vector<int64_t> logged_steps(const std::string& run) {
  std::vector<int64_t> steps;
  std::istringstream in(file_contents(run + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto record = nlohmann::json::parse(line, nullptr, false);
    if (!record.is_discarded() && record.value("type", "") == "step") {
      steps.push_back(record.at("step").get<int64_t>());
    }
  }
  return steps;
}

std::string newest_step_manifest(const std::string& dir) {
  std::string newest;
  if (!fs::exists(dir)) return newest;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0 && e.path().extension() == ".json" && n > newest) newest = n;
  }
  return newest;
}

class LabFaults : public LabTest {
 protected:
  void SetUp() override {
    LabTest::SetUp();
    if (HasFatalFailure()) return;
    const ProcessResult up = cluster("up --nodes 3");
    ASSERT_EQ(up.exit_code, 0) << up.output;
    data_ = tmp_.path() + "/data";
    // 64 images: no last batch of one image (BatchNorm refuses it) on one worker or two.
    const ProcessResult synth =
        run_shell(chexscale_bin() + " synth --out " + data_ + " --images 64 --size 32 --seed 6");
    ASSERT_EQ(synth.exit_code, 0) << synth.output;
  }

  std::string ns(int node) const { return prefix_ + "-n" + std::to_string(node); }
  static std::string address(int node) { return "10.77.0." + std::to_string(node + 1); }

  // `chexscale ARGS` inside node `node`'s namespace, as a process of its own.
  std::unique_ptr<Process> on_node(int node, const std::string& args, const std::string& log) {
    return std::make_unique<Process>(ProcessSpec{
        {"/bin/sh", "-c",
         fmt::format("exec ip netns exec {} env -i PATH=\"$PATH\" HOME=/tmp OMP_NUM_THREADS=1 "
                     "GLOO_SOCKET_IFNAME=eth0 '{}' {}",
                     ns(node), chexscale_bin(), args)},
        environment_with(),
        tmp_.path() + "/" + log});
  }

  std::string train(const std::string& out, int epochs) const {
    return fmt::format(
        "train --data {} --out {} --arch resnet18 --image-size 32 --crop-size 32 --batch-size 4 "
        "--epochs {} --no-augment --loader-threads 1 --val-threads 1 --intra-op-threads 1 "
        "--seed 3 --log-every 1 --checkpoint-every 2 --keep-checkpoints 3 "
        "--collective-timeout 20 --resume auto",
        data_, out, epochs);
  }

  // One node of a fixed 2-node job whose store node 0 serves: `chexscale launch ... LAUNCH_FLAGS --
  // WORKER`.
  std::unique_ptr<Process> fixed_node(int node, const std::string& worker, const std::string& log,
                                      const std::string& launch_flags = "") {
    return on_node(node,
                   fmt::format("launch --nnodes 2 --node-rank {} --master-addr {} --master-port {} "
                               "--nproc-per-node 1 {}-- {}",
                               node, address(0), kPort,
                               launch_flags.empty() ? "" : launch_flags + " ", worker),
                   log);
  }

  // One node of an elastic --nnodes 1:2 job; its workers record their examples in
  // <out>.examples.rank<r>.
  std::unique_ptr<Process> elastic_node(int node, const std::string& out, int epochs,
                                        const std::string& log) {
    return on_node(node,
                   fmt::format("launch --nnodes 1:2 --nproc-per-node 1 --master-addr {} "
                               "--master-port {} --node-name node-{} --rdzv-last-call 1 "
                               "--heartbeat-timeout 3 --max-restarts 5 --stop-grace 10 -- {} "
                               "--record-examples {}.examples",
                               address(kServerNode), kPort, node, train(out, epochs), out),
                   log);
  }

  std::unique_ptr<Process> rendezvous_server() {
    auto server =
        on_node(kServerNode, fmt::format("rendezvous-server --port {}", kPort), "server.log");
    EXPECT_TRUE(wait_for(*server, "serving the store")) << server->output();
    return server;
  }

  void kill_every_process_of(int node) const {
    const ProcessResult r = run_shell("ip netns pids " + ns(node) + " | xargs -r kill -9");
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }

  // Waits until `run` has logged step `step` (one after a checkpoint: the fault then loses it,
  // and the lineage must count its retraining once).
  static bool wait_for_logged_step(const std::string& run, int64_t step) {
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < deadline) {
      const std::vector<int64_t> steps = logged_steps(run);
      if (!steps.empty() && steps.back() >= step) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  // Waits for the step-`step` checkpoint of `run`.
  static bool wait_for_checkpoint(const std::string& run, int step) {
    const std::string path = fmt::format("{}/checkpoints/step-{:09d}.json", run, step);
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (!fs::exists(path) && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return fs::exists(path);
  }

  // The elastic recovery of `survivor` after a fault at `fault` (its output from `from` on):
  // detection, restart and first step times, printed and returned with the steps lost.
  void expect_recovery(const Process& survivor, const std::string& run, Clock::time_point fault,
                       size_t from, int64_t last_step_before, const std::string& what) {
    const auto detected = wait_for(survivor, "round 0 ended:", from);
    ASSERT_TRUE(detected) << survivor.output();
    const auto restarted = wait_for(survivor, "round 1: 1 node(s)", from);
    ASSERT_TRUE(restarted) << survivor.output();
    const size_t logged = logged_steps(run).size();
    const auto resumed = wait_for(survivor, "resumed from ", from);
    ASSERT_TRUE(resumed) << survivor.output();
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (logged_steps(run).size() <= logged && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const double first_step = since(fault);
    const std::string out = survivor.output();
    const size_t at = out.find("resumed from ", from);
    const size_t step_at = out.find("step ", out.find("(epoch", at));
    const int64_t resumed_step = std::stoll(out.substr(step_at + 5));
    const auto s = [&](Clock::time_point t) {
      return std::chrono::duration<double>(t - fault).count();
    };
    fmt::print(
        "[fault: {}] detected after {:.2f} s, restarted after {:.2f} s, first step after "
        "{:.2f} s; {} step(s) lost (trained up to {}, resumed at {})\n",
        what, s(*detected), s(*restarted), first_step, last_step_before - resumed_step,
        last_step_before, resumed_step);
    EXPECT_LE(last_step_before - resumed_step, 2) << "more than --checkpoint-every steps lost";
  }

  TempDir tmp_;
  std::string data_;
};

// The final lineage of a run's steps from the workers' --record-examples files: for each step
// the records of the last round that trained it (a failed round's steps after its checkpoint
// were trained again). Checks that every epoch trained every example, across the changes of
// world size, and none twice beyond the sampler's padding: the pass that ends an epoch pads its
// rest to equal slices (at most one example for two workers) and, when it began mid-epoch and
// its slices would end in a batch of one, by one more example per worker: at most 3.
void expect_each_example_once_per_epoch(const std::string& run, int epochs) {
  std::map<int64_t, std::pair<int, std::vector<std::pair<int64_t, int64_t>>>> steps;
  for (int rank = 0; rank < 2; ++rank) {
    std::istringstream in(file_contents(fmt::format("{}.examples.rank{}", run, rank)));
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      int round = 0;
      int64_t epoch = 0, step = 0;
      fields >> round >> epoch >> step;
      auto& [latest, examples] = steps[step];
      if (round > latest || examples.empty()) {
        latest = round;
        examples.clear();
      }
      if (round < latest) continue;
      for (int64_t index = 0; fields >> index;)
        examples.emplace_back(epoch, index);
    }
  }
  std::map<int64_t, std::vector<int64_t>> by_epoch;
  for (const auto& [step, record] : steps)
    for (const auto& [epoch, index] : record.second)
      by_epoch[epoch].push_back(index);
  ASSERT_EQ(by_epoch.size(), static_cast<size_t>(epochs));
  std::set<int64_t> all;
  for (const auto& [epoch, indices] : by_epoch)
    all.insert(indices.begin(), indices.end());
  for (const auto& [epoch, indices] : by_epoch) {
    const std::set<int64_t> seen(indices.begin(), indices.end());
    EXPECT_EQ(seen, all) << "epoch " << epoch << " left examples out";
    EXPECT_LE(indices.size() - seen.size(), 3u)
        << "epoch " << epoch << " trained examples twice beyond the padding";
  }
}

// The final checkpoints of two runs are the same bytes.
void expect_same_final_checkpoints(const std::string& a, const std::string& b) {
  const std::string last = newest_step_manifest(a + "/checkpoints");
  ASSERT_FALSE(last.empty());
  EXPECT_EQ(newest_step_manifest(b + "/checkpoints"), last);
  for (const std::string& file : {last, fs::path(last).replace_extension(".safetensors").string(),
                                  std::string("best.safetensors")}) {
    const std::string x = file_contents(a + "/checkpoints/" + file);
    ASSERT_FALSE(x.empty()) << file;
    EXPECT_TRUE(x == file_contents(b + "/checkpoints/" + file)) << file << " differs";
  }
}

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
  ASSERT_TRUE(wait_for(*nodes[0], "round 0: 2 node(s)")) << nodes[0]->output();
  ASSERT_TRUE(wait_for_logged_step(run, 5)) << nodes[0]->output() << nodes[1]->output();
  const int victim = nodes[0]->output().find("runs ranks 0..0") != std::string::npos ? 0 : 1;
  const int survivor = 1 - victim;
  const size_t from = nodes[survivor]->output().size();
  const std::vector<int64_t> before = logged_steps(run);
  const auto fault = Clock::now();
  kill_every_process_of(victim);
  expect_recovery(*nodes[survivor], run, fault, from, before.empty() ? 0 : before.back(),
                  fmt::format("kill -9 of rank 0's node (node {})", victim));
  EXPECT_NE(
      nodes[survivor]->output().find(fmt::format("(node-{}) sent no heartbeat", victim), from),
      std::string::npos)
      << nodes[survivor]->output();

  nodes[victim] = elastic_node(victim, run, kEpochs, "back.log");
  const auto rejoined = wait_for(*nodes[survivor], "round 2: 2 node(s)", from);
  EXPECT_TRUE(rejoined) << nodes[survivor]->output() << nodes[victim]->output();
  const auto r = wait_all({nodes[0].get(), nodes[1].get()}, Clock::now() + std::chrono::minutes(3));
  EXPECT_EQ(r[survivor].exit_code, 0) << r[survivor].output;
  EXPECT_EQ(r[victim].exit_code, 0) << r[victim].output;
  EXPECT_NE(r[survivor].output.find("round 1 ended: 1 node(s) waiting to join"), std::string::npos)
      << r[survivor].output;
  // The run completed: every epoch's record, the last checkpoint written by 2 workers.
  // And metrics.jsonl recorded each membership: round, world size, nodes.
  std::set<int64_t> epochs;
  std::vector<std::pair<int, int>> memberships;  // (round, world size)
  std::istringstream in(file_contents(run + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_discarded()) continue;
    if (record.value("type", "") == "epoch") epochs.insert(record.at("epoch").get<int64_t>());
    if (record.value("type", "") == "membership") {
      memberships.emplace_back(record.at("round").get<int>(), record.at("world_size").get<int>());
      EXPECT_EQ(record.at("nodes").size(), static_cast<size_t>(memberships.back().second));
    }
  }
  EXPECT_EQ(epochs.size(), static_cast<size_t>(kEpochs));
  EXPECT_EQ(memberships, (std::vector<std::pair<int, int>>{{0, 2}, {1, 1}, {2, 2}}));
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
  ASSERT_TRUE(wait_for(*n0, "round 0: 2 node(s)")) << n0->output();
  ASSERT_TRUE(wait_for_logged_step(run, 5)) << n0->output() << n1->output();
  // The node holding rank 1 loses its link (the other keeps rank 0 and the run directory).
  const int cut = n0->output().find("runs ranks 0..0") != std::string::npos ? 1 : 0;
  Process& survivor = cut == 1 ? *n0 : *n1;
  const size_t from = survivor.output().size();
  const std::vector<int64_t> before = logged_steps(run);
  const auto fault = Clock::now();
  ASSERT_EQ(run_shell("ip -n " + ns(cut) + " link set eth0 down").exit_code, 0);
  expect_recovery(survivor, run, fault, from, before.empty() ? 0 : before.back(),
                  fmt::format("link of node {} cut", cut));
  ASSERT_EQ(run_shell("ip -n " + ns(cut) + " link set eth0 up").exit_code, 0);
  const auto rejoined = wait_for(survivor, "round 2: 2 node(s)", from);
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

// The workers of a launcher, from /proc.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> children;
  std::ifstream in(fmt::format("/proc/{}/task/{}/children", pid, pid));
  for (pid_t child = 0; in >> child;)
    children.push_back(child);
  return children;
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
