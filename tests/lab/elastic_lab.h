// The elastic lab: a fixture that runs `chexscale launch` nodes and the rendezvous server in
// the lab's network namespaces (node 2 is the server's own host), with the helpers that read a
// run's progress (its logged steps, checkpoints, the examples each step trained) and a launcher's
// workers. Used by the fault tests of both elastic modes.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lab/lab_fixture.h"
#include "test_util/temp_dir.h"

namespace chexscale::test_util {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline constexpr int kServerNode = 2;  // the rendezvous server's own "host"
inline constexpr int kPort = 29611;
inline constexpr int kHeartbeatTimeout = 3;  // seconds: the elastic nodes' --heartbeat-timeout

inline double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The step records of metrics.jsonl text (their step numbers, in file order).
inline std::vector<int64_t> steps_in_metrics(const std::string& metrics) {
  std::vector<int64_t> steps;
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto record = nlohmann::json::parse(line, nullptr, false);
    if (!record.is_discarded() && record.value("type", "") == "step") {
      steps.push_back(record.at("step").get<int64_t>());
    }
  }
  return steps;
}

// The step records of a run's metrics.jsonl.
inline std::vector<int64_t> logged_steps(const std::string& run) {
  return steps_in_metrics(file_contents(run + "/metrics.jsonl"));
}

inline std::string newest_step_manifest(const std::string& dir) {
  std::string newest;
  if (!fs::exists(dir)) return newest;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0 && e.path().extension() == ".json" && n > newest) newest = n;
  }
  return newest;
}

class ElasticLab : public LabTest {
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

  // One node of an elastic --nnodes 1:2 job; its workers (`chexscale GLOBAL_FLAGS train()
  // WORKER_FLAGS`) record their examples in <out>.examples.rank<r>.
  std::unique_ptr<Process> elastic_node(int node, const std::string& out, int epochs,
                                        const std::string& log,
                                        const std::string& launch_flags = "",
                                        const std::string& worker_flags = "",
                                        const std::string& global_flags = "") {
    return on_node(node,
                   fmt::format("launch --nnodes 1:2 --nproc-per-node 1 --master-addr {} "
                               "--master-port {} --node-name node-{} --rdzv-last-call 1 "
                               "--heartbeat-timeout {} --max-restarts 5 --stop-grace 10 {}-- {}{} "
                               "--record-examples {}.examples{}",
                               address(kServerNode), kPort, node, kHeartbeatTimeout,
                               launch_flags.empty() ? "" : launch_flags + " ",
                               global_flags.empty() ? "" : global_flags + " ", train(out, epochs),
                               out, worker_flags.empty() ? "" : " " + worker_flags),
                   log);
  }

  std::unique_ptr<Process> rendezvous_server() {
    auto server =
        on_node(kServerNode, fmt::format("rendezvous-server --port {}", kPort), "server.log");
    EXPECT_TRUE(wait_for_text(*server, "serving the store")) << server->output();
    return server;
  }

  void kill_every_process_of(int node) const {
    const ProcessResult r = run_shell("ip netns pids " + ns(node) + " | xargs -r kill -9");
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }

  // The round in which both nodes first ran together, and the node that held rank 0 in it, from
  // node 0's launcher output: round 0, unless a loaded machine started the second launcher after
  // the first one's last call had closed round 0 without it (it then joined a later round).
  struct BothNodes {
    int round = 0;
    int rank0_node = 0;
  };
  static std::optional<BothNodes> wait_for_both_nodes(const Process& node0) {
    const std::regex line(
        R"(round (\d+): 2 node\(s\) [^\n]*(?:runs ranks|keeps its workers as ranks) (\d+)\.\.)");
    for (const auto deadline = Clock::now() + std::chrono::seconds(120); Clock::now() < deadline;
         std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
      const std::string out = node0.output();
      std::smatch m;
      if (std::regex_search(out, m, line))
        return BothNodes{std::stoi(m[1].str()), m[2].str() == "0" ? 0 : 1};
    }
    return std::nullopt;
  }

  // The (round, world size) of each membership record of `run`'s metrics.jsonl from round
  // `first_round` on (each record's node list as long as its world size: one worker per node).
  static std::vector<std::pair<int, int>> memberships(const std::string& run, int first_round) {
    std::vector<std::pair<int, int>> out;
    std::istringstream in(file_contents(run + "/metrics.jsonl"));
    for (std::string line; std::getline(in, line);) {
      const auto record = nlohmann::json::parse(line, nullptr, false);
      if (record.is_discarded() || record.value("type", "") != "membership") continue;
      EXPECT_EQ(record.at("nodes").size(), record.at("world_size").get<size_t>()) << line;
      if (record.at("round").get<int>() >= first_round)
        out.emplace_back(record.at("round").get<int>(), record.at("world_size").get<int>());
    }
    return out;
  }

  // How many epoch records (validations) of each epoch `run`'s metrics.jsonl holds.
  static std::map<int64_t, int> validations(const std::string& run) {
    std::map<int64_t, int> out;
    std::istringstream in(file_contents(run + "/metrics.jsonl"));
    for (std::string line; std::getline(in, line);) {
      const auto record = nlohmann::json::parse(line, nullptr, false);
      if (!record.is_discarded() && record.value("type", "") == "epoch")
        ++out[record.at("epoch").get<int64_t>()];
    }
    return out;
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
  // detection, restart and first step times, printed and returned with the steps lost; `round`
  // is the round the fault ended.
  void expect_recovery(const Process& survivor, const std::string& run, Clock::time_point fault,
                       size_t from, int64_t last_step_before, const std::string& what, int round) {
    const auto detected = wait_for_text(survivor, fmt::format("round {} ended:", round), from);
    ASSERT_TRUE(detected) << survivor.output();
    const auto restarted =
        wait_for_text(survivor, fmt::format("round {}: 1 node(s)", round + 1), from);
    ASSERT_TRUE(restarted) << survivor.output();
    const size_t logged = logged_steps(run).size();
    const auto resumed = wait_for_text(survivor, "resumed from ", from);
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

// One line of a worker's --record-examples file: "<round> <epoch> <step> <index>...".
struct StepRecord {
  int round = 0;
  int64_t epoch = 0, step = 0;
  std::vector<int64_t> indices;
};

// The records of ranks 0 and 1 of a run (<run>.examples.rank<r>), rank 0's first.
inline std::vector<StepRecord> step_records(const std::string& run) {
  std::vector<StepRecord> records;
  for (int rank = 0; rank < 2; ++rank) {
    std::istringstream in(file_contents(fmt::format("{}.examples.rank{}", run, rank)));
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      StepRecord r;
      if (!(fields >> r.round >> r.epoch >> r.step)) continue;
      for (int64_t index = 0; fields >> index;)
        r.indices.push_back(index);
      records.push_back(std::move(r));
    }
  }
  return records;
}

// The final lineage of a run's steps from the workers' --record-examples files: for each step
// the records of the last round that trained it (a failed round's steps after its checkpoint
// were trained again). Checks that every epoch trained every example, across the changes of
// world size, and none twice beyond the sampler's padding: the pass that ends an epoch pads its
// rest to equal slices (at most one example for two workers) and, when it began mid-epoch and
// its slices would end in a batch of one, by one more example per worker: at most 3.
inline void expect_each_example_once_per_epoch(const std::string& run, int epochs) {
  std::map<int64_t, std::pair<int, std::vector<std::pair<int64_t, int64_t>>>> steps;
  for (const StepRecord& r : step_records(run)) {
    auto& [latest, examples] = steps[r.step];
    if (r.round > latest || examples.empty()) {
      latest = r.round;
      examples.clear();
    }
    if (r.round < latest) continue;
    for (int64_t index : r.indices)
      examples.emplace_back(r.epoch, index);
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
inline void expect_same_final_checkpoints(const std::string& a, const std::string& b) {
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

}  // namespace chexscale::test_util
