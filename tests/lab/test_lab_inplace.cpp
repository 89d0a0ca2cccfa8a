// Elastic recovery in place (`chexscale launch --elastic in-place`) on the emulated nodes: real
// launchers, workers and rendezvous server in network namespaces, Gloo over the lab's fabric.
// Every process of rank 0's node killed, then the node started again; a node's link cut, then
// restored. The survivors' workers keep their processes (same PIDs) and their state: no
// checkpoint is read, no step is trained twice, every rank holds the same bytes after each
// regroup (the workers check it), and every epoch trains every example once. Each test prints
// its timings: fault to the first step after it, the survivors' pause at a join. PowerSGD goes
// through a kill and a join the same way.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lab/elastic_lab.h"

namespace chexscale::test_util {
namespace {

constexpr const char* kInPlace = "--elastic in-place";

// When each step record of a run's metrics.jsonl appeared, and when the survivor's other work
// between steps ended (an epoch record after validation, a new checkpoint manifest; not a
// membership record, written during a regroup), polled every 5 ms on a thread.
class StepClock {
 public:
  explicit StepClock(std::string run) : run_(std::move(run)) {
    thread_ = std::thread([this] {
      size_t records = 0;
      std::string manifest;
      while (!stop_) {
        const std::string metrics = file_contents(run_ + "/metrics.jsonl");
        const std::vector<int64_t> steps = steps_in_metrics(metrics);
        const size_t now_records = count_lines(metrics);
        const std::string now_manifest = newest_step_manifest(run_ + "/checkpoints");
        {
          std::lock_guard<std::mutex> lock(mutex_);
          const auto now = Clock::now();
          while (seen_.size() < steps.size())
            seen_.push_back({steps[seen_.size()], now});
          if (now_records > records || now_manifest != manifest) events_.push_back(now);
        }
        records = std::max(records, now_records);
        manifest = now_manifest;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  ~StepClock() {
    stop_ = true;
    thread_.join();
  }
  struct Seen {
    int64_t step;
    Clock::time_point at;
  };
  std::vector<Seen> seen() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return seen_;
  }
  // When a step, epoch or other record, or a newer checkpoint, appeared: the ends of the
  // survivor's pieces of work.
  std::vector<Clock::time_point> events() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }
  // The first record of a step after `step` that appeared after `t`, waiting up to 60 s for it
  // (a record written just before `t` may be seen just after it).
  std::optional<Seen> first_after(Clock::time_point t, int64_t step = -1) const {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline) {
      for (const Seen& s : seen())
        if (s.at > t && s.step > step) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return std::nullopt;
  }

 private:
  // The records of the survivor's work: every line but the memberships (which a round's rank 0
  // writes during its regroup).
  static size_t count_lines(const std::string& text) {
    size_t memberships = 0;
    for (size_t at = text.find("\"type\":\"membership\""); at != std::string::npos;
         at = text.find("\"type\":\"membership\"", at + 1))
      ++memberships;
    return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) - memberships;
  }

  const std::string run_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::vector<Seen> seen_;
  std::vector<Clock::time_point> events_;
  std::thread thread_;
};

// Steps that the workers' --record-examples files (ranks 0 and 1) show in more than one round.
// A step is recorded once the ranks agree to train it: the step a fault interrupted is recorded
// in the round it failed in and again in the round that trains it; any other is a step trained
// twice.
std::vector<int64_t> steps_in_several_rounds(const std::string& run) {
  std::map<int64_t, std::set<int>> rounds;
  for (const StepRecord& r : step_records(run))
    rounds[r.step].insert(r.round);
  std::vector<int64_t> twice;
  for (const auto& [step, in_rounds] : rounds)
    if (in_rounds.size() > 1) twice.push_back(step);
  return twice;
}

// No step in the records of two rounds but the one the fault interrupted, trained again as the
// first step after it (`redone`, as metrics.jsonl numbers steps).
void expect_only_the_failed_step_twice(const std::string& run, int64_t redone) {
  const std::vector<int64_t> twice = steps_in_several_rounds(run);
  fmt::print("[in place] steps in more than one round's records: {} (step {}; redone: {})\n",
             twice.size(), twice.empty() ? -1 : twice[0], redone);
  EXPECT_LE(twice.size(), 1u);
  if (!twice.empty()) {
    EXPECT_EQ(twice[0] + 1, redone);  // records number a step by the steps done before it
  }
}

// The first match of `re` in `text` (empty when none).
std::smatch first_match(const std::string& text, const std::regex& re) {
  std::smatch m;
  std::regex_search(text, m, re);
  return m;
}

// A worker's account of its regroup into round `round` (the line it logs after its first step
// there): its total and each part ("place", "group", ..., "first step"), waiting up to `wait` for
// it in `process`'s output from `from` on. Empty when none came; `newcomer`: the line of a rank
// new in that round.
struct RegroupLine {
  double total = 0;
  std::map<std::string, double> parts;
  std::string text;
};
std::optional<RegroupLine> regroup_line(const Process& process, size_t from, int round,
                                        bool newcomer,
                                        std::chrono::seconds wait = std::chrono::seconds(10)) {
  const std::regex line(fmt::format(R"(round {}: rank \d+{} regrouped in ([0-9.]+) s: ([^\n]*))",
                                    round, newcomer ? R"( \(new\))" : ""));
  const std::regex part(R"(([a-z][a-z ]*) ([0-9.]+) s(?: \([^)]*\))?(?:, |$))");
  for (const auto deadline = Clock::now() + wait; Clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    const std::string out = process.output().substr(std::min(from, process.output().size()));
    const std::smatch m = first_match(out, line);
    if (m.empty()) continue;
    RegroupLine r{std::stod(m[1].str()), {}, m[0].str()};
    const std::string rest = m[2].str();
    for (auto it = std::sregex_iterator(rest.begin(), rest.end(), part);
         it != std::sregex_iterator(); ++it)
      r.parts[(*it)[1].str()] = std::stod((*it)[2].str());
    return r;
  }
  return std::nullopt;
}

class LabInPlace : public ElasticLab {
 protected:
  // The survivor's recovery from a fault at `fault`: its workers are the same processes and it
  // read no checkpoint; the first step after the fault (returned in `first_step`), printed with
  // `what`, comes within the heartbeat timeout + 4 s (the goal is + 1 s: room for a loaded
  // machine) and is the failed step or the one after it.
  void expect_in_place_recovery(const Process& survivor, const std::vector<pid_t>& workers,
                                const StepClock& clock, Clock::time_point fault, size_t from,
                                int64_t last_step_before, const std::string& what,
                                int64_t& first_step_after) {
    const auto regrouped = wait_for_text(survivor, "keeps its workers as ranks", from);
    ASSERT_TRUE(regrouped) << survivor.output();
    const std::optional<StepClock::Seen> first = clock.first_after(fault, last_step_before);
    ASSERT_TRUE(first) << survivor.output();
    const double first_step = std::chrono::duration<double>(first->at - fault).count();
    first_step_after = first->step;
    fmt::print(
        "[in place: {}] regrouped after {:.2f} s, first step after {:.2f} s (step {}, the last "
        "logged before: {}); worker PIDs kept\n",
        what, std::chrono::duration<double>(*regrouped - fault).count(), first_step, first->step,
        last_step_before);
    EXPECT_LT(first_step, kHeartbeatTimeout + 4.0) << survivor.output();
    // The failed step is trained once more, or (when the survivor had applied it) not again.
    EXPECT_LE(first->step, last_step_before + 2);
    EXPECT_EQ(children_of(survivor.pid()), workers) << "the survivor's workers were restarted";
    const std::string out = survivor.output().substr(from);
    EXPECT_EQ(out.find("resumed from "), std::string::npos) << "read a checkpoint:\n" << out;
  }
};

// Every process of rank 0's node is killed: the other node's worker abandons the step, regroups
// alone as rank 0 with its own state, and goes on; the node started again joins in place and
// its new worker takes the state from the survivor's memory.
TEST_F(LabInPlace, RankZeroNodeKilledTheSurvivorGoesOnInItsProcessAndTheNodeRejoinsFromMemory) {
  auto server = rendezvous_server();
  const std::string run = tmp_.path() + "/run";
  constexpr int kEpochs = 8;
  std::unique_ptr<Process> nodes[2] = {elastic_node(0, run, kEpochs, "node0.log", kInPlace),
                                       elastic_node(1, run, kEpochs, "node1.log", kInPlace)};
  const std::optional<BothNodes> met = wait_for_both_nodes(*nodes[0]);
  ASSERT_TRUE(met) << nodes[0]->output() << nodes[1]->output();
  const int m = met->round;
  StepClock clock(run);
  ASSERT_TRUE(wait_for_logged_step(run, 5)) << nodes[0]->output() << nodes[1]->output();
  const int victim = met->rank0_node;
  const int survivor = 1 - victim;
  const std::vector<pid_t> workers = children_of(nodes[survivor]->pid());
  ASSERT_EQ(workers.size(), 1u) << nodes[survivor]->output();
  const size_t from = nodes[survivor]->output().size();
  const std::vector<int64_t> before = logged_steps(run);
  const auto fault = Clock::now();
  kill_every_process_of(victim);
  int64_t redone = -1;
  expect_in_place_recovery(*nodes[survivor], workers, clock, fault, from, before.back(),
                           fmt::format("kill -9 of rank 0's node (node {})", victim), redone);
  EXPECT_NE(nodes[survivor]->output().find(
                fmt::format("round {}: every rank held the same parameters and optimizer state "
                            "already",
                            m + 1),
                from),
            std::string::npos)
      << nodes[survivor]->output();

  const auto joined = Clock::now();
  nodes[victim] = elastic_node(victim, run, kEpochs, "back.log", kInPlace);
  const auto rejoined =
      wait_for_text(*nodes[survivor], fmt::format("round {}: 2 node(s)", m + 2), from);
  ASSERT_TRUE(rejoined) << nodes[survivor]->output() << nodes[victim]->output();
  // The new round's rank 0 logs the state's size and, when it is the survivor (the newcomer may
  // be rank 0 instead: "this rank is new"), its pause from leaving round 1 to holding the state.
  const std::regex pause_line(
      fmt::format(R"(round {}: every rank took rank \d+'s training state from memory )", m + 2) +
      R"(\(step \d+, ([0-9.]+) MB\) and holds the same bytes; ([^\n]*))");
  std::string all;
  std::smatch pause;
  for (const auto deadline = Clock::now() + std::chrono::seconds(10);
       pause.empty() && Clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    all = nodes[0]->output() + nodes[1]->output();
    pause = first_match(all, pause_line);
  }
  ASSERT_FALSE(pause.empty()) << all;
  // The join's cost to the survivor: from its last record before it left round 1 (a step, an
  // epoch's validation, a checkpoint: the work it does anyway) to its first step's record in the
  // new round, less its usual time per step (of two workers, the median before the fault). The
  // new round starts at the step of its membership record.
  std::optional<int64_t> entry_step;
  for (const auto deadline = Clock::now() + std::chrono::seconds(10);
       !entry_step && Clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    std::istringstream in(file_contents(run + "/metrics.jsonl"));
    for (std::string line; std::getline(in, line);) {
      const auto record = nlohmann::json::parse(line, nullptr, false);
      if (!record.is_discarded() && record.value("type", "") == "membership" &&
          record.at("round").get<int>() == m + 2)
        entry_step = record.at("step").get<int64_t>();
    }
  }
  ASSERT_TRUE(entry_step) << file_contents(run + "/metrics.jsonl");
  const std::optional<StepClock::Seen> after_join = clock.first_after(joined, *entry_step);
  ASSERT_TRUE(after_join) << nodes[survivor]->output() << nodes[victim]->output();
  Clock::time_point last_before = joined;
  for (const Clock::time_point e : clock.events())
    if (e < after_join->at) last_before = std::max(last_before, e);
  const double around_join = std::chrono::duration<double>(after_join->at - last_before).count();
  const std::vector<StepClock::Seen> seen = clock.seen();
  std::vector<double> intervals;
  for (size_t i = 2; i < seen.size() && seen[i].at < fault; ++i)  // not the first step's warm-up
    intervals.push_back(std::chrono::duration<double>(seen[i].at - seen[i - 1].at).count());
  ASSERT_FALSE(intervals.empty());
  std::sort(intervals.begin(), intervals.end());
  const double step_time = intervals[intervals.size() / 2];
  fmt::print(
      "[in place: node {} joins] the survivor's records around the join {:.2f} s apart, {:.2f} s "
      "per step before: the join cost {:.2f} s ({} MB of state sent; rank 0: {})\n",
      victim, around_join, step_time, around_join - step_time, pause[1].str(), pause[2].str());
  // Each side's own account: the survivor's pause in parts, the newcomer warmed in standby.
  const std::optional<RegroupLine> survivor_parts =
      regroup_line(*nodes[survivor], from, m + 2, /*newcomer=*/false);
  ASSERT_TRUE(survivor_parts) << nodes[survivor]->output();
  fmt::print("[in place: node {} joins] the survivor's own account: {}\n", victim,
             survivor_parts->text);
  for (const char* name :
       {"place", "group", "loaders", "reducer", "state", "digest", "first step"}) {
    ASSERT_EQ(survivor_parts->parts.count(name), 1u) << name << " in " << survivor_parts->text;
  }
  // Every part the line names adds up to its total, "epoch end" too where the join interrupted a
  // validation (on a loaded machine the join can land at an epoch's end).
  double parts_sum = 0;
  for (const auto& part : survivor_parts->parts)
    parts_sum += part.second;
  EXPECT_NEAR(parts_sum, survivor_parts->total, 0.02) << survivor_parts->text;
  const std::optional<RegroupLine> newcomer_parts =
      regroup_line(*nodes[victim], 0, m + 2, /*newcomer=*/true);
  ASSERT_TRUE(newcomer_parts) << nodes[victim]->output();
  fmt::print("[in place: node {} joins] the newcomer's: {}\n", victim, newcomer_parts->text);
  EXPECT_NE(nodes[victim]->output().find("warmed the model in standby"), std::string::npos)
      << nodes[victim]->output();
  // The goal is 1 s plus the state over the link: room for a loaded machine, and on a machine
  // so loaded that a step takes several times its usual 0.45 s, room for the regroup's work to
  // slow as much (a restart would cost about 6 steps; the PIDs below catch it anyway).
  EXPECT_LT(around_join - step_time, std::max(3.0, 4.0 * step_time)) << all;
  EXPECT_EQ(children_of(nodes[survivor]->pid()), workers) << "the join restarted the survivor";

  const auto r = wait_all({nodes[0].get(), nodes[1].get()}, Clock::now() + std::chrono::minutes(4));
  EXPECT_EQ(r[survivor].exit_code, 0) << r[survivor].output;
  EXPECT_EQ(r[victim].exit_code, 0) << r[victim].output;
  EXPECT_EQ(r[victim].output.find("resumed from "), std::string::npos) << r[victim].output;
  EXPECT_NE((r[0].output + r[1].output).find("with every rank (2) holding the same bytes"),
            std::string::npos)
      << r[0].output << r[1].output;
  EXPECT_EQ(memberships(run, m),
            (std::vector<std::pair<int, int>>{{m, 2}, {m + 1, 1}, {m + 2, 2}}));
  // The join cost none.
  expect_only_the_failed_step_twice(run, redone);
  expect_each_example_once_per_epoch(run, kEpochs);
}

// Rank 1's node loses its link (no reset: its peer's collective just waits): the survivor's
// agent finds it silent and ends the round, the survivor abandons the collective and goes on
// alone in its process; once the link is back the node's agent rejoins with new workers, which
// take the state from the survivor.
TEST_F(LabInPlace, ALinkCutAndRestoredDropsTheNodeAndItRejoinsInPlace) {
  auto server = rendezvous_server();
  const std::string run = tmp_.path() + "/run";
  constexpr int kEpochs = 8;
  auto n0 = elastic_node(0, run, kEpochs, "node0.log", kInPlace);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto n1 = elastic_node(1, run, kEpochs, "node1.log", kInPlace);
  const std::optional<BothNodes> met = wait_for_both_nodes(*n0);
  ASSERT_TRUE(met) << n0->output() << n1->output();
  const int m = met->round;
  StepClock clock(run);
  ASSERT_TRUE(wait_for_logged_step(run, 5)) << n0->output() << n1->output();
  const int cut = 1 - met->rank0_node;
  Process& survivor = cut == 1 ? *n0 : *n1;
  const std::vector<pid_t> workers = children_of(survivor.pid());
  ASSERT_EQ(workers.size(), 1u) << survivor.output();
  const size_t from = survivor.output().size();
  const std::vector<int64_t> before = logged_steps(run);
  const auto fault = Clock::now();
  ASSERT_EQ(run_shell("ip -n " + ns(cut) + " link set eth0 down").exit_code, 0);
  int64_t redone = -1;
  expect_in_place_recovery(survivor, workers, clock, fault, from, before.back(),
                           fmt::format("link of node {} cut", cut), redone);
  ASSERT_EQ(run_shell("ip -n " + ns(cut) + " link set eth0 up").exit_code, 0);
  const auto rejoined = wait_for_text(survivor, fmt::format("round {}: 2 node(s)", m + 2), from);
  EXPECT_TRUE(rejoined) << survivor.output() << (cut == 1 ? *n1 : *n0).output();
  EXPECT_EQ(children_of(survivor.pid()), workers) << "the rejoin restarted the survivor";
  const auto r = wait_all({n0.get(), n1.get()}, Clock::now() + std::chrono::minutes(4));
  EXPECT_EQ(r[0].exit_code, 0) << r[0].output;
  EXPECT_EQ(r[1].exit_code, 0) << r[1].output;
  // The node back from the cut rejoined with new workers at once: no round failed for them.
  EXPECT_EQ(memberships(run, m),
            (std::vector<std::pair<int, int>>{{m, 2}, {m + 1, 1}, {m + 2, 2}}));
  for (const auto& node : r)
    EXPECT_EQ(node.output.find("ended with exit status"), std::string::npos) << node.output;
  expect_only_the_failed_step_twice(run, redone);
  expect_each_example_once_per_epoch(run, kEpochs);
}

// PowerSGD in place: rank 1's node killed, the survivor goes on alone, the node started again
// joins. The survivor keeps its process through both regroups, every rank ends with the same
// bytes (PowerSGD's steps and warm start included), and the steps that count towards
// --powersgd-start-step are the run's: the last checkpoint's PowerSGD step count is its step,
// not the steps since the join.
TEST_F(LabInPlace, PowerSgdGoesOnThroughAKillAndAJoinWithTheSameBytesOnEveryRank) {
  auto server = rendezvous_server();
  const std::string run = tmp_.path() + "/run";
  constexpr int kEpochs = 6;
  const std::string powersgd = "--grad-compression powersgd:2 --powersgd-start-step 2";
  std::unique_ptr<Process> nodes[2] = {
      elastic_node(0, run, kEpochs, "node0.log", kInPlace, powersgd)};
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  nodes[1] = elastic_node(1, run, kEpochs, "node1.log", kInPlace, powersgd);
  const std::optional<BothNodes> met = wait_for_both_nodes(*nodes[0]);
  ASSERT_TRUE(met) << nodes[0]->output() << nodes[1]->output();
  const int m = met->round;
  ASSERT_TRUE(wait_for_logged_step(run, 5)) << nodes[0]->output() << nodes[1]->output();
  const int victim = 1 - met->rank0_node;
  const int survivor = 1 - victim;
  const std::vector<pid_t> workers = children_of(nodes[survivor]->pid());
  ASSERT_EQ(workers.size(), 1u) << nodes[survivor]->output();
  const size_t from = nodes[survivor]->output().size();
  kill_every_process_of(victim);
  ASSERT_TRUE(wait_for_text(*nodes[survivor], fmt::format("round {}: 1 node(s)", m + 1), from))
      << nodes[survivor]->output();
  nodes[victim] = elastic_node(victim, run, kEpochs, "back.log", kInPlace, powersgd);
  ASSERT_TRUE(wait_for_text(*nodes[survivor], fmt::format("round {}: 2 node(s)", m + 2), from))
      << nodes[survivor]->output() << nodes[victim]->output();
  EXPECT_EQ(children_of(nodes[survivor]->pid()), workers) << "a regroup restarted the survivor";

  const auto r = wait_all({nodes[0].get(), nodes[1].get()}, Clock::now() + std::chrono::minutes(4));
  EXPECT_EQ(r[survivor].exit_code, 0) << r[survivor].output;
  EXPECT_EQ(r[victim].exit_code, 0) << r[victim].output;
  const std::string all = r[0].output + r[1].output;
  EXPECT_NE(all.find(fmt::format("round {}: every rank took rank ", m + 2)), std::string::npos)
      << all;
  EXPECT_NE(all.find("with every rank (2) holding the same bytes"), std::string::npos) << all;
  EXPECT_EQ(all.find("resumed from "), std::string::npos) << all;
  EXPECT_EQ(all.find("error feedback restart"), std::string::npos) << all;
  EXPECT_EQ(memberships(run, m),
            (std::vector<std::pair<int, int>>{{m, 2}, {m + 1, 1}, {m + 2, 2}}));
  const std::string manifest = newest_step_manifest(run + "/checkpoints");
  ASSERT_FALSE(manifest.empty());
  const auto state =
      nlohmann::json::parse(file_contents(run + "/checkpoints/" + manifest)).at("state");
  ASSERT_TRUE(state.contains("powersgd")) << state.dump();
  EXPECT_EQ(state.at("powersgd").at("world_size"), 2);
  EXPECT_EQ(state.at("powersgd").at("steps"), state.at("global_step")) << state.dump();
  expect_each_example_once_per_epoch(run, kEpochs);
}

// A node joins while the only other one validates an epoch: that node's worker leaves the
// validation at once instead of finishing it, keeping the rows it computed, and the new round's
// validation of the epoch goes on from them: both ranks share out only the examples left. To
// make the round end find it mid-pass, the worker is stopped (SIGSTOP) once it logs the pass's
// fourth batch and continued once its agent has ended the round; a stop that came too late (the
// epoch's record already written) is let go and tried at the next epoch.
TEST_F(LabInPlace, AJoinDuringAValidationEndsItAndTheNewRoundGoesOnWithTheRest) {
  // A validation of several batches: 220 images, four fifths of them held out (and no worker's
  // slice of the rest ends in a batch of one, on one worker or two).
  data_ = tmp_.path() + "/data-val";
  const ProcessResult synth =
      run_shell(chexscale_bin() + " synth --out " + data_ + " --images 220 --size 32 --seed 6");
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  auto server = rendezvous_server();
  const std::string run = tmp_.path() + "/run";
  constexpr int kEpochs = 4;
  const std::string flags = "--val-fraction 0.8";
  auto n0 = elastic_node(0, run, kEpochs, "node0.log", kInPlace, flags, "--log-level debug");
  ASSERT_TRUE(wait_for_text(*n0, "round 0: 1 node(s)")) << n0->output();
  const std::vector<pid_t> workers = children_of(n0->pid());
  ASSERT_EQ(workers.size(), 1u) << n0->output();
  int epoch = 0;
  for (size_t from = 0;; ++epoch) {
    ASSERT_LT(epoch, kEpochs - 1) << "no stop came during a validation\n" << n0->output();
    const std::string start = fmt::format("epoch {}: validating batch 3", epoch);
    ASSERT_TRUE(wait_for_text(*n0, start, from)) << n0->output();
    ASSERT_EQ(::kill(workers[0], SIGSTOP), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a write under way lands
    if (validations(run).count(epoch) == 0) break;
    ASSERT_EQ(::kill(workers[0], SIGCONT), 0);
    from = n0->output().find(start, from) + start.size();
  }
  const size_t from = n0->output().size();
  auto n1 = elastic_node(1, run, kEpochs, "node1.log", kInPlace, flags);
  const auto ended = wait_for_text(*n0, "round 0 ended: 1 node(s) waiting to join", from);
  ::kill(workers[0], SIGCONT);
  ASSERT_TRUE(ended) << n0->output() << n1->output();
  const std::string left = fmt::format("round 0 ended during the validation of epoch {}", epoch);
  EXPECT_TRUE(wait_for_text(*n0, left, from)) << n0->output() << n1->output();
  // Its first step comes after the epoch's validation, done again by both.
  const std::optional<RegroupLine> regroup =
      regroup_line(*n0, from, 1, /*newcomer=*/false, std::chrono::seconds(90));
  ASSERT_TRUE(regroup) << n0->output();
  fmt::print("[in place: node 1 joins during a validation] {}\n", regroup->text);
  EXPECT_EQ(regroup->parts.count("epoch end"), 1u) << regroup->text;  // validated on
  // At least the three batches of four before the stop were kept.
  std::smatch went_on;
  const std::string out = n0->output().substr(from);
  ASSERT_TRUE(std::regex_search(
      out, went_on,
      std::regex(R"(the pass goes on: (\d+) of (\d+) examples computed before, (\d+) left for 2)")))
      << out;
  EXPECT_GE(std::stoi(went_on[1]), 12) << went_on[0];
  const int validation_images = std::stoi(went_on[2]);  // of the 220, held out by patient
  EXPECT_GT(validation_images, 100) << went_on[0];
  EXPECT_GT(std::stoi(went_on[3]), 0) << went_on[0];
  EXPECT_EQ(std::stoi(went_on[1]) + std::stoi(went_on[3]), validation_images) << went_on[0];

  const auto r = wait_all({n0.get(), n1.get()}, Clock::now() + std::chrono::minutes(4));
  EXPECT_EQ(r[0].exit_code, 0) << r[0].output;
  EXPECT_EQ(r[1].exit_code, 0) << r[1].output;
  EXPECT_EQ(memberships(run, 0), (std::vector<std::pair<int, int>>{{0, 1}, {1, 2}}));
  // Every epoch validated once in the records, the interrupted one by the new round.
  std::map<int64_t, int> once;
  for (int64_t e = 0; e < kEpochs; ++e)
    once[e] = 1;
  EXPECT_EQ(validations(run), once);
  // Each over every validation image once, the one gone on with from kept rows too.
  std::istringstream records(file_contents(run + "/metrics.jsonl"));
  for (std::string line; std::getline(records, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.value("type", "") == "epoch") {
      EXPECT_EQ(record.at("val_examples"), validation_images) << line;
    }
  }
  EXPECT_NE((r[0].output + r[1].output).find("with every rank (2) holding the same bytes"),
            std::string::npos)
      << r[0].output << r[1].output;
  expect_each_example_once_per_epoch(run, kEpochs);
}

}  // namespace
}  // namespace chexscale::test_util
