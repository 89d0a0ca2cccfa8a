// Multi-process resume through the CLI: a 2-worker run stopped mid-epoch continues on 1 worker
// and then on 2 again (position kept, each epoch laid out for the world size that runs it), two
// changes of world size inside one epoch train each of its examples exactly once, and a
// 2-worker resume where only rank 0 has the run directory (it reads the checkpoint and sends it
// to rank 1) ends with exactly the bytes of an uninterrupted run. The uninterrupted run also
// checks --timeline: the merged trace holds each rank's step phases and bucket allreduces.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "data/datasets/chestxray14_dataset.h"
#include "distributed/rendezvous.h"
#include "e2e/metrics_records.h"
#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

namespace fs = std::filesystem;
using test_util::run_chexscale;

constexpr int kBatch = 4;  // per worker

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

struct Data {
  std::string dir;
  int64_t train_examples = 0;
};

Data make_data(const test_util::TempDir& tmp) {
  Data d{tmp.path() + "/data"};
  const auto r = run_chexscale("synth --out " + d.dir + " --images 64 --size 32 --seed 6");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  data::DataIssues issues;
  for (const auto& e : data::index_chestxray14(d.dir, {}, issues))  // train's default splits
    d.train_examples += e.split == data::Split::kTrain ? 1 : 0;
  // BatchNorm cannot train on one image whose 32 px shrink to 1x1 features: no last batch of 1.
  EXPECT_NE(d.train_examples % kBatch, 1) << d.train_examples;
  EXPECT_NE(ceil_div(d.train_examples, 2) % kBatch, 1) << d.train_examples;
  return d;
}

std::string train_args(const Data& d, const std::string& out, int epochs) {
  return fmt::format(
      "train --data {} --out {} --arch resnet18 --image-size 32 --crop-size 32 --batch-size {} "
      "--epochs {} --no-augment --loader-threads 1 --val-threads 1 --intra-op-threads 1 "
      "--seed 3 --log-every 1 --collective-timeout 60",
      d.dir, out, kBatch, epochs);
}

// Runs a 2-worker job whose ranks get their own arguments (e.g. their own run directory, as on
// nodes without a shared file system); returns each rank's exit status and output.
std::vector<test_util::ProcessResult> run_two_ranks(const std::vector<std::string>& args,
                                                    const std::string& log_prefix) {
  const int port = distributed::pick_free_port();
  std::vector<std::unique_ptr<test_util::Process>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::make_unique<test_util::Process>(test_util::chexscale_command(
        fmt::format("{} --rank {} --world-size 2 --local-rank {} --local-world-size 2 "
                    "--master-addr 127.0.0.1 --master-port {}",
                    args[r], r, r, port),
        log_prefix + std::to_string(r) + ".log")));
  }
  return test_util::wait_all({ranks[0].get(), ranks[1].get()},
                             std::chrono::steady_clock::now() + std::chrono::minutes(3));
}

// The epoch records' steps, by epoch.
std::map<int64_t, int64_t> epoch_end_steps(const std::string& run) {
  std::map<int64_t, int64_t> steps;
  for (const auto& e : test_util::metrics_records(run + "/metrics.jsonl", "epoch"))
    steps[e.at("epoch").get<int64_t>()] = e.at("step").get<int64_t>();
  return steps;
}

nlohmann::json manifest_state(const std::string& path) {
  return nlohmann::json::parse(test_util::file_contents(path)).at("state");
}

TEST(ResumeWorldE2E, TwoWorkersThenOneThenTwoKeepThePositionAndTheNewLayout) {
  test_util::TempDir tmp;
  const Data d = make_data(tmp);
  const int64_t bpe1 = ceil_div(d.train_examples, kBatch);               // one worker
  const int64_t bpe2 = ceil_div(ceil_div(d.train_examples, 2), kBatch);  // two workers
  ASSERT_GT(bpe2, 3) << "the first run must stop mid-epoch";
  const std::string run = tmp.path() + "/run";

  // 2 workers, stopped after 3 steps: 3 x 8 samples of epoch 0's permutation consumed.
  const auto first =
      run_chexscale("launch --nproc-per-node 2 -- " + train_args(d, run, 3) + " --max-steps 3");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto stopped = manifest_state(run + "/checkpoints/step-000000003.json");
  EXPECT_EQ(stopped.at("world_size"), 2);
  EXPECT_EQ(stopped.at("epoch"), 0);
  EXPECT_EQ(stopped.at("samples_done"), 3 * 2 * kBatch);

  // 1 worker: epoch 0 continues after the 24 samples with a pass over the rest, epoch 1 is laid
  // out for 1 worker.
  const auto second = run_chexscale(train_args(d, run, 2) + " --resume auto");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find(fmt::format("resuming a 2-worker run (batch 4) with 1 workers "
                                           "(batch 4): epoch 0 continues after 24 of its {} "
                                           "samples",
                                           d.train_examples)),
            std::string::npos)
      << second.output;
  const auto steps = test_util::metrics_records(run + "/metrics.jsonl", "step");
  const auto resumed_first = std::find_if(steps.begin(), steps.end(), [](const auto& s) {
    return s.at("step").template get<int64_t>() == 4;
  });
  ASSERT_NE(resumed_first, steps.end());
  EXPECT_EQ(resumed_first->at("epoch"), 0);
  EXPECT_EQ(resumed_first->at("batch"), 1);  // of the new pass
  auto ends = epoch_end_steps(run);
  ASSERT_EQ(ends.size(), 2u) << second.output;
  EXPECT_EQ(ends.at(0), 3 + ceil_div(d.train_examples - 24, kBatch));
  EXPECT_EQ(ends.at(1), ends.at(0) + bpe1);

  // 2 workers again, and only rank 0 sees the run directory: epoch 2 in the 2-worker layout.
  const std::string elsewhere = tmp.path() + "/rank1_dir";
  const auto third = run_two_ranks(
      {train_args(d, run, 3) + " --resume auto", train_args(d, elsewhere, 3) + " --resume auto"},
      tmp.path() + "/third.rank");
  ASSERT_EQ(third[0].exit_code, 0) << third[0].output << third[1].output;
  ASSERT_EQ(third[1].exit_code, 0) << third[1].output;
  EXPECT_NE(third[0].output.find("resuming a 1-worker run (batch 4) with 2 workers (batch 4): "
                                 "epoch 2 continues after 0 of its"),
            std::string::npos)
      << third[0].output;
  const std::string resumed_from =
      fmt::format("resumed from {}/checkpoints/step-{:09d}.json", run, ends.at(1));
  EXPECT_NE(third[1].output.find(resumed_from), std::string::npos) << third[1].output;
  ends = epoch_end_steps(run);
  ASSERT_EQ(ends.size(), 3u);
  EXPECT_EQ(ends.at(2), ends.at(1) + bpe2);
  EXPECT_EQ(manifest_state(fmt::format("{}/checkpoints/step-{:09d}.json", run, ends.at(2)))
                .at("world_size"),
            2);
  EXPECT_FALSE(fs::exists(elsewhere + "/checkpoints")) << "rank 1 wrote checkpoints";
}

// One step's record from a --record-examples file ("<round> <epoch> <step> <index>...").
struct StepExamples {
  int64_t epoch = 0;
  int64_t step = 0;
  std::vector<int64_t> indices;
};

// Every step recorded in <prefix>.rank<r> for the first `ranks` ranks.
std::vector<StepExamples> recorded_examples(const std::string& prefix, int ranks) {
  std::vector<StepExamples> steps;
  for (int rank = 0; rank < ranks; ++rank) {
    std::istringstream in(test_util::file_contents(fmt::format("{}.rank{}", prefix, rank)));
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      StepExamples s;
      int64_t round = 0;
      fields >> round >> s.epoch >> s.step;
      for (int64_t index = 0; fields >> index;)
        s.indices.push_back(index);
      steps.push_back(std::move(s));
    }
  }
  return steps;
}

// 2 workers for 2 steps (16 samples of epoch 0), 1 worker for 1 more (to 20), 2 workers to the
// end: each change starts a pass exactly where the last stopped, so epoch 0 trains every example
// and none twice but the sampler's padding. Here that is the rule against a last batch of one:
// 26 left would be 13 per worker (3 batches of 4 and 1), so each worker's slice is padded by the
// rest's first example of its own (trained at the pass's first step and again at its last).
// Epoch 1 on 2 workers trains each example once. The warm-up's epoch fraction follows the samples.
TEST(ResumeWorldE2E, TwoChangesOfWorldSizeInAnEpochTrainEachExampleOnce) {
  test_util::TempDir tmp;
  const Data d = make_data(tmp);
  const int64_t n = d.train_examples;
  ASSERT_EQ(n % 2, 0) << "epoch 1 would pad";
  ASSERT_EQ((n - 20) / 2 % kBatch, 1) << "the last pass would not pad against a batch of one";
  const std::string run = tmp.path() + "/run", examples = tmp.path() + "/examples";
  const std::string args =
      train_args(d, run, 2) + " --warmup-epochs 4 --resume auto --record-examples " + examples;
  const auto first = run_chexscale("launch --nproc-per-node 2 -- " + args + " --max-steps 2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto second = run_chexscale(args + " --max-steps 3");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find(fmt::format("epoch 0 continues after 16 of its {} samples", n)),
            std::string::npos)
      << second.output;
  const auto third = run_chexscale("launch --nproc-per-node 2 -- " + args);
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_NE(third.output.find(fmt::format("epoch 0 continues after 20 of its {} samples", n)),
            std::string::npos)
      << third.output;
  const int64_t last_pass = ceil_div((n - 20) / 2 + 1, kBatch);
  const auto ends = epoch_end_steps(run);
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends.at(0), 3 + last_pass);
  EXPECT_EQ(ends.at(1), ends.at(0) + ceil_div(n / 2, kBatch));
  // The warm-up (lr 1e-3 x epochs done / 4) follows the samples: a pass from offset o of n
  // starts at o / n and spreads the rest over its own steps.
  std::map<int64_t, double> lr;
  for (const auto& r : test_util::metrics_records(run + "/metrics.jsonl", "step"))
    lr[r.at("step").get<int64_t>()] = r.at("lr").get<double>();
  const auto warm = [&](double epochs) { return 1e-3 * epochs / 4; };
  const auto share = [&](int64_t offset) { return static_cast<double>(offset) / n; };
  EXPECT_DOUBLE_EQ(lr.at(1), warm(1.0 / ceil_div(n / 2, kBatch)));
  EXPECT_DOUBLE_EQ(lr.at(3), warm(share(16) + (1 - share(16)) / ceil_div(n - 16, kBatch)));
  EXPECT_DOUBLE_EQ(lr.at(4), warm(share(20) + (1 - share(20)) / last_pass));
  EXPECT_DOUBLE_EQ(lr.at(3 + last_pass), warm(1.0));

  std::map<int64_t, std::multiset<int64_t>> trained;  // by epoch
  std::set<int64_t> padded;  // each worker's first example of the last pass of epoch 0
  for (const StepExamples& s : recorded_examples(examples, 2)) {
    trained[s.epoch].insert(s.indices.begin(), s.indices.end());
    if (s.step == 3) padded.insert(s.indices.at(0));  // the step counter before the step
  }
  ASSERT_EQ(trained.size(), 2u);
  ASSERT_EQ(padded.size(), 2u);
  for (const auto& [epoch, indices] : trained) {
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    const std::set<int64_t> distinct(indices.begin(), indices.end());
    EXPECT_EQ(static_cast<int64_t>(distinct.size()), n) << "examples left out";
    EXPECT_EQ(*distinct.begin(), 0);
    EXPECT_EQ(*distinct.rbegin(), n - 1);
    std::set<int64_t> twice;
    for (int64_t index : distinct)
      if (indices.count(index) > 1) twice.insert(index);
    EXPECT_EQ(twice, epoch == 0 ? padded : std::set<int64_t>{}) << "trained twice";
    EXPECT_EQ(indices.size(), distinct.size() + twice.size());
  }
}

// Every step phase and bucket allreduce of one rank in the job's merged trace.
void expect_rank_timeline(const std::string& path, int rank, int64_t steps) {
  SCOPED_TRACE(path + " rank " + std::to_string(rank));
  nlohmann::json trace;
  ASSERT_NO_THROW(trace = nlohmann::json::parse(test_util::file_contents(path)));
  std::map<std::string, std::set<int64_t>> phase_steps;
  int64_t allreduces = 0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("pid") != rank) continue;
    EXPECT_GE(e.at("dur").get<int64_t>(), 0);
    const std::string name = e.at("name").get<std::string>();
    if (e.at("cat") == "step") phase_steps[name].insert(e.at("args").at("step").get<int64_t>());
    if (e.at("cat") == "allreduce" && name.rfind("allreduce bucket ", 0) == 0) {
      EXPECT_GT(e.at("args").at("bytes").get<int64_t>(), 0);
      ++allreduces;
    }
  }
  for (const char* phase : {"data_wait", "forward", "backward", "comm_exposed", "optimizer"}) {
    ASSERT_EQ(phase_steps[phase].size(), static_cast<size_t>(steps)) << phase;
    EXPECT_EQ(*phase_steps[phase].begin(), 0) << phase;
    EXPECT_EQ(*phase_steps[phase].rbegin(), steps - 1) << phase;
  }
  // ResNet-18's 45 MB of gradients fill at least two buckets (25 MiB cap) every step.
  EXPECT_GE(allreduces, 2 * steps);
}

TEST(ResumeWorldE2E, RankZeroSendsTheCheckpointAndTheResumeIsExact) {
  test_util::TempDir tmp;
  const Data d = make_data(tmp);
  const int64_t bpe2 = ceil_div(ceil_div(d.train_examples, 2), kBatch);
  const std::string whole = tmp.path() + "/whole";
  const auto w = run_chexscale("launch --nproc-per-node 2 -- " + train_args(d, whole, 1) +
                               " --timeline " + whole + "/timeline.json");
  ASSERT_EQ(w.exit_code, 0) << w.output;
  expect_rank_timeline(whole + "/timeline.json", 0, bpe2);  // rank 0 merged rank 1's file
  expect_rank_timeline(whole + "/timeline.json", 1, bpe2);
  EXPECT_FALSE(fs::exists(whole + "/timeline.rank1.json"));

  const std::string run = tmp.path() + "/run";
  const auto stopped =
      run_chexscale("launch --nproc-per-node 2 -- " + train_args(d, run, 1) + " --max-steps 3");
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
  const std::string elsewhere = tmp.path() + "/rank1_dir";
  const auto resumed = run_two_ranks(
      {train_args(d, run, 1) + " --resume auto", train_args(d, elsewhere, 1) + " --resume auto"},
      tmp.path() + "/resumed.rank");
  ASSERT_EQ(resumed[0].exit_code, 0) << resumed[0].output << resumed[1].output;
  ASSERT_EQ(resumed[1].exit_code, 0) << resumed[1].output;
  EXPECT_NE(resumed[1].output.find("resumed from " + run + "/checkpoints/step-000000003.json"),
            std::string::npos)
      << resumed[1].output;
  EXPECT_FALSE(fs::exists(elsewhere + "/checkpoints"));

  const std::string last = fmt::format("step-{:09d}", bpe2);
  for (const std::string& file :
       {last + ".safetensors", last + ".json", std::string("best.safetensors")}) {
    const std::string a = test_util::file_contents(whole + "/checkpoints/" + file);
    const std::string b = test_util::file_contents(run + "/checkpoints/" + file);
    ASSERT_FALSE(a.empty()) << file;
    EXPECT_TRUE(a == b) << file << " differs between the uninterrupted and resumed runs";
  }
}

TEST(ResumeWorldE2E, ACheckpointRankZeroCannotReadStopsEveryRankWithItsError) {
  test_util::TempDir tmp;
  const Data d = make_data(tmp);
  const std::string manifest = tmp.path() + "/damaged.json";
  std::ofstream(manifest) << "{\"format\": \"chexscale-checkpoint\", \"vers";
  const std::string resume = " --resume " + manifest;
  const auto r = run_two_ranks({train_args(d, tmp.path() + "/run", 1) + resume,
                                train_args(d, tmp.path() + "/run1", 1) + resume},
                               tmp.path() + "/rank");
  EXPECT_EQ(r[0].exit_code, 1) << r[0].output;
  EXPECT_EQ(r[1].exit_code, 1) << r[1].output;
  EXPECT_NE(r[0].output.find(manifest + ": not a checkpoint manifest"), std::string::npos)
      << r[0].output;
  EXPECT_NE(r[1].output.find("rank 0 could not read the checkpoint: " + manifest +
                             ": not a checkpoint manifest"),
            std::string::npos)
      << r[1].output;
}

}  // namespace
}  // namespace chexscale
