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

// The table prints rates to 0.01 images/s and the tool ranks on the unrounded rates, so two
// candidates within a printed unit may rank either way: each candidate kept from `pool` must be at
// least as fast (by `rate`) as each one dropped, give or take half a printed unit.
constexpr double kHalfPrintedUnit = 0.005 + 1e-9;

void expect_kept_are_the_fastest(const std::vector<TrialLine>& pool,
                                 const std::set<std::string>& kept, size_t count,
                                 double TrialLine::*rate, const std::string& yaml) {
  EXPECT_EQ(kept.size(), count) << yaml;
  const size_t in_pool = std::count_if(
      pool.begin(), pool.end(), [&](const TrialLine& t) { return kept.count(t.candidate) != 0; });
  EXPECT_EQ(in_pool, count) << yaml;
  for (const TrialLine& k : pool) {
    if (kept.count(k.candidate) == 0) continue;
    for (const TrialLine& d : pool) {
      if (kept.count(d.candidate) != 0) continue;
      EXPECT_GE(k.*rate, d.*rate - kHalfPrintedUnit)
          << k.candidate << " kept over " << d.candidate << "\n"
          << yaml;
    }
  }
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
  const std::vector<TrialLine> first(trials.begin(), trials.begin() + 6);
  expect_kept_are_the_fastest(first, {trials[6].candidate, trials[7].candidate}, 2,
                              &TrialLine::images_per_sec, yaml);
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
  // The chosen one is the faster of round 1 over all its steps.
  const std::string chosen = chosen_line(yaml);
  expect_kept_are_the_fastest({trials[6], trials[7]}, {chosen}, 1, &TrialLine::so_far, yaml);

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
  EXPECT_EQ(expected, chosen) << yaml;
}

TEST(TuneCli, EtaTwoKeepsTheFasterHalfEachRound) {
  test_util::TempDir dir;
  const std::string yaml = tune_yaml(dir, "--eta 2");
  const auto trials = trial_lines(yaml);
  // 6 -> 3 -> 2 -> 1, to 1, 2 and 4 steps in all: 6 trials of 1 step, 3 of 1, 2 of 2.
  ASSERT_EQ(trials.size(), 11u) << yaml;
  const std::vector<TrialLine> first(trials.begin(), trials.begin() + 6);
  const std::vector<TrialLine> second(trials.begin() + 6, trials.begin() + 9);
  for (const TrialLine& t : second) {
    EXPECT_EQ(t.round, 1);
    EXPECT_EQ(t.steps, 1);
  }
  expect_kept_are_the_fastest(first,
                              {second[0].candidate, second[1].candidate, second[2].candidate}, 3,
                              &TrialLine::images_per_sec, yaml);
  // Round 2 holds the two best of round 1 by their pooled rate.
  expect_kept_are_the_fastest(second, {trials[9].candidate, trials[10].candidate}, 2,
                              &TrialLine::so_far, yaml);
  EXPECT_EQ(trials[9].steps, 2);
  EXPECT_EQ(trials[10].round, 2);
}

TEST(TuneCli, FullGridMeasuresEveryCandidateAtTheLastRoundsSteps) {
  test_util::TempDir dir;
  const std::string yaml = tune_yaml(dir, "--full-grid");
  const auto trials = trial_lines(yaml);
  ASSERT_EQ(trials.size(), 6u) << yaml;
  for (const TrialLine& t : trials)
    EXPECT_EQ(t.steps, 3);
  expect_kept_are_the_fastest(trials, {chosen_line(yaml)}, 1, &TrialLine::images_per_sec, yaml);
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
