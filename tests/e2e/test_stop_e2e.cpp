// Stopping on request through the CLI: SIGTERM to `chexscale train` (one worker, or one of two
// under `chexscale launch`) stops every rank at one agreed step with a checkpoint there and exit
// 75, and `--resume auto` then ends with checkpoints byte-identical to an uninterrupted run's; a
// second SIGTERM ends at once with exit 1 and leaves no partial checkpoint file. Ctrl-C (SIGINT)
// to a 2-worker launch stops it the same way.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

namespace fs = std::filesystem;
using test_util::run_chexscale;

constexpr int kExitPreempted = 75;
constexpr int kExitFailure = 1;

// Waits (up to 10 s) until signal `sig` is no longer pending in process `pid` (its handler has
// taken it): a second one sent before that would merge with it. False if it stays pending.
bool wait_until_taken(pid_t pid, int sig) {
  const unsigned long long bit = 1ull << (sig - 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream status(fmt::format("/proc/{}/status", pid));
    unsigned long long pending = 0;
    for (std::string line; std::getline(status, line);)
      if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0)
        pending |= std::stoull(line.substr(7), nullptr, 16);
    if ((pending & bit) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// `batch_size` leaves no batch of one image (BatchNorm refuses it) on one worker or two.
std::string flags(const std::string& data, const std::string& out, int batch_size = 8) {
  return fmt::format(
      "train --data {} --out {} --arch resnet18 --image-size 32 --crop-size 32 --batch-size {} "
      "--epochs 2 --checkpoint-every 4 --keep-checkpoints 3 --loader-threads 1 --val-threads 1 "
      "--intra-op-threads 1 --seed 5",
      data, out, batch_size);
}

std::string synth(const test_util::TempDir& dir) {
  const std::string data = dir.path() + "/data";
  EXPECT_EQ(run_chexscale("synth --out " + data + " --images 160 --size 32 --seed 4").exit_code, 0);
  return data;
}

std::vector<std::string> checkpoint_files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string newest_step_manifest(const std::string& dir) {
  std::string newest;
  for (const std::string& n : checkpoint_files(dir)) {
    if (n.rfind("step-", 0) == 0 && fs::path(n).extension() == ".json") newest = n;
  }
  return newest;
}

void wait_for(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!fs::exists(path) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// The step named by the stop line ("stopping at step N on SIGTERM: checkpoint written to ..."),
// -1 when there is none for `signal`.
int64_t stop_step(const std::string& output, const std::string& signal = "SIGTERM") {
  std::smatch m;
  if (!std::regex_search(output, m,
                         std::regex("stopping at step ([0-9]+) on " + signal +
                                    ": checkpoint written to (\\S+), exit 75 \\(resume with "
                                    "--resume auto\\)"))) {
    return -1;
  }
  return std::stoll(m[1]);
}

// The run's final checkpoints equal the reference run's, byte for byte.
void expect_same_final_checkpoints(const std::string& reference, const std::string& run) {
  const std::string last = newest_step_manifest(reference + "/checkpoints");
  ASSERT_FALSE(last.empty());
  EXPECT_EQ(newest_step_manifest(run + "/checkpoints"), last);
  for (const std::string& file : {last, fs::path(last).replace_extension(".safetensors").string(),
                                  std::string("best.safetensors")}) {
    const std::string a = test_util::file_contents(reference + "/checkpoints/" + file);
    const std::string b = test_util::file_contents(run + "/checkpoints/" + file);
    ASSERT_FALSE(a.empty()) << file;
    EXPECT_TRUE(a == b) << file << " differs between the uninterrupted and the stopped runs";
  }
}

// SIGTERM to `pid` once the run's step-4 checkpoint exists; the stopped run's result.
test_util::ProcessResult stop_after_step_4(test_util::Process& run, const std::string& out,
                                           pid_t pid) {
  wait_for(out + "/checkpoints/step-000000004.json");
  ::kill(pid, SIGTERM);
  return run.wait(std::chrono::seconds(120));
}

void expect_stopped_and_resumes(const test_util::ProcessResult& stopped, const std::string& out,
                                const std::string& resume_command,
                                const std::string& signal = "SIGTERM") {
  ASSERT_EQ(stopped.exit_code, kExitPreempted) << stopped.output;
  const int64_t step = stop_step(stopped.output, signal);
  ASSERT_GE(step, 4) << stopped.output;
  const std::string manifest = fmt::format("{}/checkpoints/step-{:09d}.json", out, step);
  EXPECT_NE(stopped.output.find(manifest), std::string::npos) << stopped.output;
  EXPECT_EQ(newest_step_manifest(out + "/checkpoints"), fs::path(manifest).filename().string());
  const auto resumed = run_chexscale(resume_command);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + manifest), std::string::npos) << resumed.output;
}

TEST(StopE2E, SigtermStopsOneWorkerWithACheckpointThatResumesToTheSameBytes) {
  test_util::TempDir dir;
  const std::string data = synth(dir);
  const std::string a = dir.path() + "/a";
  const auto full = run_chexscale(flags(data, a));
  ASSERT_EQ(full.exit_code, 0) << full.output;

  const std::string b = dir.path() + "/b";
  test_util::Process run_b(test_util::chexscale_command(flags(data, b)));
  const auto stopped = stop_after_step_4(run_b, b, run_b.pid());
  expect_stopped_and_resumes(stopped, b, flags(data, b) + " --resume auto");
  expect_same_final_checkpoints(a, b);
}

TEST(StopE2E, SigtermToOneOfTwoWorkersStopsBothAtOneStep) {
  test_util::TempDir dir;
  const std::string data = synth(dir);
  const std::string launch = "launch --nproc-per-node 2 -- ";
  const auto two_workers = [&](const std::string& out) { return launch + flags(data, out, 6); };
  const std::string a = dir.path() + "/a";
  const auto full = run_chexscale(two_workers(a));
  ASSERT_EQ(full.exit_code, 0) << full.output;

  const std::string b = dir.path() + "/b";
  test_util::Process run_b(test_util::chexscale_command(two_workers(b)));
  wait_for(b + "/checkpoints/step-000000004.json");
  const std::vector<pid_t> workers = test_util::children_of(run_b.pid());
  ASSERT_EQ(workers.size(), 2u);
  // Rank 1 writes no checkpoint: rank 0 learns of the stop through the step's collective only.
  const auto stopped = stop_after_step_4(run_b, b, workers.back());
  expect_stopped_and_resumes(stopped, b, two_workers(b) + " --resume auto");
  expect_same_final_checkpoints(a, b);
}

// Ctrl-C: SIGINT to the launcher's process group (the workers have their own groups), which
// forwards it; both workers stop at one step, the checkpoint there holds the 2-worker state, and
// the run resumes from it.
TEST(StopE2E, SigintToTheLauncherStopsBothWorkersWithACheckpoint) {
  test_util::TempDir dir;
  const std::string data = synth(dir);
  const std::string out = dir.path() + "/run";
  const std::string two_workers = "launch --nproc-per-node 2 -- " + flags(data, out, 6);
  test_util::Process run(test_util::chexscale_command(two_workers));
  wait_for(out + "/checkpoints/step-000000004.json");
  ASSERT_EQ(test_util::children_of(run.pid()).size(), 2u);
  ::kill(-run.pid(), SIGINT);
  const auto stopped = run.wait(std::chrono::seconds(120));
  ASSERT_EQ(stopped.exit_code, kExitPreempted) << stopped.output;
  const int64_t step = stop_step(stopped.output, "SIGINT");
  ASSERT_GE(step, 4) << stopped.output;
  const auto state = nlohmann::json::parse(test_util::file_contents(fmt::format(
                                               "{}/checkpoints/step-{:09d}.json", out, step)))
                         .at("state");
  EXPECT_EQ(state.at("world_size"), 2);
  EXPECT_EQ(state.at("global_step"), step);
  expect_stopped_and_resumes(stopped, out, two_workers + " --resume auto", "SIGINT");
}

TEST(StopE2E, SecondSigtermEndsAtOnceWithoutPartialFiles) {
  test_util::TempDir dir;
  const std::string data = synth(dir);
  const std::string out = dir.path() + "/run";
  test_util::Process run(test_util::chexscale_command(flags(data, out)));
  wait_for(out + "/checkpoints/step-000000004.json");
  run.send_signal(SIGTERM);
  // Two pending SIGTERMs are one: the second must come once the first was taken (on a loaded
  // machine a fixed pause can end before the process was even scheduled).
  ASSERT_TRUE(wait_until_taken(run.pid(), SIGTERM));
  run.send_signal(SIGTERM);
  const auto ended = run.wait(std::chrono::seconds(60));
  ASSERT_EQ(ended.exit_code, kExitFailure) << ended.output;
  EXPECT_NE(ended.output.find("second stop signal: ending now"), std::string::npos) << ended.output;
  const auto files = checkpoint_files(out + "/checkpoints");
  for (const std::string& f : files) {
    EXPECT_EQ(f.find(".tmp"), std::string::npos) << "partial file " << f;
    if (fs::path(f).extension() == ".safetensors") {
      EXPECT_TRUE(std::count(files.begin(), files.end(),
                             fs::path(f).replace_extension(".json").string()) == 1)
          << f << " has no manifest";
    }
  }
  EXPECT_GE(newest_step_manifest(out + "/checkpoints"), std::string("step-000000004.json"));
}

}  // namespace
}  // namespace chexscale
