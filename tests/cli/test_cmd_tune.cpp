// `chexscale tune` with real ranks through the launcher (Gloo over loopback, tiny ResNet-18):
// successive halving runs every candidate, then runs the fastest 1/eta on to eta times the steps
// (their earlier steps count), and chooses the fastest of the last round over all its steps; the
// full grid measures every candidate once at the last round's steps; tuned.yaml is a config file
// `bench --config` applies; mistakes are usage errors.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "common/atomic_file.h"
#include "test_util/chexscale_cli.h"
#include "test_util/temp_dir.h"
#include "test_util/tuned_yaml.h"

namespace chexscale {
namespace {

using test_util::chosen_line;
using test_util::trial_lines;
using test_util::TrialLine;

const std::string kTune =
    "launch --nproc-per-node 2 -- tune --arch resnet18 --image-size 32 --batch-size 2 "
    "--threads 1 --bucket-mb-candidates 1,4,25 --allow-compression fp16 --overlap-only "
    "--first-round-steps 1 --warmup-steps 1";

// Round 0 of `trials` (its first `n`), fastest first.
std::vector<TrialLine> fastest_first(const std::vector<TrialLine>& trials, size_t n) {
  std::vector<TrialLine> first(trials.begin(), trials.begin() + static_cast<ptrdiff_t>(n));
  std::stable_sort(first.begin(), first.end(), [](const TrialLine& a, const TrialLine& b) {
    return a.images_per_sec > b.images_per_sec;
  });
  return first;
}

// Runs kTune with `extra` flags, writing DIR/tuned.yaml; that file's text ("" when tune failed).
std::string tune_yaml(const test_util::TempDir& dir, const std::string& extra) {
  const std::string out = dir.path() + "/tuned.yaml";
  const auto r = test_util::run_chexscale(kTune + " " + extra + " --out " + out);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? read_file(out) : "";
}

TEST(TuneCli, SuccessiveHalvingKeepsTheFastestThirdAndWritesAConfigBenchApplies) {
  test_util::TempDir dir;
  const std::string yaml = tune_yaml(dir, "");
  const auto trials = trial_lines(yaml);
  // 6 candidates (buckets 1, 4 and 25 MiB x none and fp16), eta 3: 6 trials of 1 step, then the
  // ceil(6/3) = 2 fastest run 2 more steps, to 3 in all.
  ASSERT_EQ(trials.size(), 8u) << yaml;
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(trials[i].round, 0);
    EXPECT_EQ(trials[i].steps, 1);
    EXPECT_NEAR(trials[i].so_far, trials[i].images_per_sec, 0.01) << yaml;
  }
  const std::vector<TrialLine> first = fastest_first(trials, 6);
  std::set<std::string> kept{trials[6].candidate, trials[7].candidate};
  EXPECT_EQ(kept, (std::set<std::string>{first[0].candidate, first[1].candidate})) << yaml;
  for (size_t i = 6; i < 8; ++i) {
    EXPECT_EQ(trials[i].round, 1);
    EXPECT_EQ(trials[i].steps, 2);
    // Pooled over 3 steps: 3 / (1 / round 0's rate + 2 / this trial's rate).
    const TrialLine& before = *std::find_if(trials.begin(), trials.begin() + 6, [&](const auto& t) {
      return t.candidate == trials[i].candidate;
    });
    const double pooled = 3 / (1 / before.images_per_sec + 2 / trials[i].images_per_sec);
    EXPECT_NEAR(trials[i].so_far, pooled, 0.01 + 0.002 * pooled) << yaml;
  }
  const TrialLine& winner = trials[6].so_far >= trials[7].so_far ? trials[6] : trials[7];
  EXPECT_EQ(chosen_line(yaml), winner.candidate) << yaml;

  // The chosen settings as bench.json reports them when the file is its config.
  const auto b = test_util::run_chexscale(
      "launch --nproc-per-node 2 -- bench --config " + dir.path() + "/tuned.yaml" +
      " --arch resnet18 --image-size 32 --batch-size 2 --steps 1 --warmup-steps 0 --threads 1 "
      "--out " +
      dir.path() + "/bench");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const nlohmann::json bench = nlohmann::json::parse(read_file(dir.path() + "/bench/bench.json"));
  const std::string expected =
      fmt::format("bucket {} MiB, {}, overlap", bench["bucket_mb"].get<double>(),
                  bench["compression"].get<std::string>());
  EXPECT_EQ(expected, winner.candidate) << yaml;
}

TEST(TuneCli, EtaTwoKeepsTheFasterHalfEachRound) {
  test_util::TempDir dir;
  const std::string yaml = tune_yaml(dir, "--eta 2");
  const auto trials = trial_lines(yaml);
  // 6 -> 3 -> 2 -> 1, to 1, 2 and 4 steps in all: 6 trials of 1 step, 3 of 1, 2 of 2.
  ASSERT_EQ(trials.size(), 11u) << yaml;
  const std::vector<TrialLine> first = fastest_first(trials, 6);
  std::vector<TrialLine> second;
  for (size_t i = 6; i < 9; ++i) {
    EXPECT_EQ(trials[i].round, 1);
    EXPECT_EQ(trials[i].steps, 1);
    second.push_back(trials[i]);
  }
  EXPECT_EQ((std::set<std::string>{second[0].candidate, second[1].candidate, second[2].candidate}),
            (std::set<std::string>{first[0].candidate, first[1].candidate, first[2].candidate}))
      << yaml;
  // Round 2 holds the two best of round 1 by their pooled rate.
  std::stable_sort(second.begin(), second.end(),
                   [](const TrialLine& a, const TrialLine& b) { return a.so_far > b.so_far; });
  EXPECT_EQ((std::set<std::string>{trials[9].candidate, trials[10].candidate}),
            (std::set<std::string>{second[0].candidate, second[1].candidate}))
      << yaml;
  EXPECT_EQ(trials[9].steps, 2);
  EXPECT_EQ(trials[10].round, 2);
}

TEST(TuneCli, FullGridMeasuresEveryCandidateAtTheLastRoundsSteps) {
  test_util::TempDir dir;
  const std::string yaml = tune_yaml(dir, "--full-grid");
  const auto trials = trial_lines(yaml);
  ASSERT_EQ(trials.size(), 6u) << yaml;
  const TrialLine* best = &trials[0];
  for (const TrialLine& t : trials) {
    EXPECT_EQ(t.steps, 3);
    if (t.images_per_sec > best->images_per_sec) best = &t;
  }
  EXPECT_EQ(chosen_line(yaml), best->candidate);
  EXPECT_NE(yaml.find("full grid"), std::string::npos);
}

TEST(TuneCli, MistakesAreUsageErrors) {
  auto r = test_util::run_chexscale("tune --arch resnet18 --image-size 32");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(">= 2 ranks"), std::string::npos) << r.output;
  r = test_util::run_chexscale("tune --allow-compression zip");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--allow-compression 'zip': choose none, fp16 or powersgd"),
            std::string::npos)
      << r.output;
  r = test_util::run_chexscale("tune --eta 1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--eta 1 must be >= 2"), std::string::npos) << r.output;
  r = test_util::run_chexscale("tune --bucket-mb-candidates 0,25");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--bucket-mb-candidates"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace chexscale
