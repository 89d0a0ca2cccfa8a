// Sets measured in rounds (bench-w<N>-r<K>.json): medians, gaps paired round by round, the
// exposed-communication penalty, and how report.md and report.json list the rounds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "report/bench_fixture.h"
#include "report/compare.h"
#include "report/rounds.h"
#include "report/text.h"

namespace chexscale::report {
namespace {

using test_util::BenchSpec;
using test_util::run_spec;
using test_util::TempDir;
using test_util::write_bench_round;

constexpr double kBareComm = 0.02;
// The default spec's phases: data wait 0.001, forward 0.4, backward 0.8, optimizer 0.05.
constexpr double kBareStep = 0.001 + 0.4 + 0.8 + kBareComm + 0.05;

BenchSpec round_spec(int workers, double images_per_sec, double comm_exposed) {
  BenchSpec s = run_spec(workers, images_per_sec);
  s.comm_exposed = comm_exposed;
  return s;
}

// Three rounds, 2 workers. Bare metal drifts (20, 10, 15 img/s); Kubernetes is 50 %, 5 % and 2 %
// slower than bare metal in the same round. Median of the per-round gaps: 5 %. A gap of the two
// medians (15 vs 10) would be 33.3 %; pairing the rounds sorted by speed would give 26.5 %.
// Kubernetes also has a round 4 that bare metal lacks.
std::vector<ResultSet> drifting_rounds(const TempDir& dir) {
  const double bare[] = {20.0, 10.0, 15.0};
  const double k8s[] = {10.0, 9.5, 14.7, 30.0};
  const double k8s_comm[] = {0.10, 0.03, 0.05, 0.02};
  for (int r = 1; r <= 3; ++r) {
    write_bench_round(dir, "bm", round_spec(1, 10.0, 0.0), r);
    write_bench_round(dir, "bm", round_spec(2, bare[r - 1], kBareComm), r);
  }
  for (int r = 1; r <= 4; ++r)
    write_bench_round(dir, "k8s", round_spec(2, k8s[r - 1], k8s_comm[r - 1]), r);
  return {load_result_set("bare-metal/fp16", dir.path() + "/bm"),
          load_result_set("kubernetes/fp16", dir.path() + "/k8s")};
}

TEST(ReportRounds, SpreadOfOddAndEvenCounts) {
  const Spread odd = spread_of({3.0, 1.0, 2.0});
  EXPECT_DOUBLE_EQ(odd.median, 2.0);
  EXPECT_DOUBLE_EQ(odd.min, 1.0);
  EXPECT_DOUBLE_EQ(odd.max, 3.0);
  EXPECT_DOUBLE_EQ(spread_of({4.0, 1.0, 3.0, 2.0}).median, 2.5);
  EXPECT_DOUBLE_EQ(spread_of({7.0}).median, 7.0);
  EXPECT_THROW(spread_of({}), Error);
}

TEST(ReportRounds, SetHoldsTheMedianRunAndEveryRound) {
  TempDir dir;
  const auto sets = drifting_rounds(dir);
  const ResultSet& bm = sets[0];
  ASSERT_EQ(bm.runs.size(), 2u);
  ASSERT_EQ(bm.round_runs.size(), 6u);
  const BenchRun* two = bm.run_with(2);
  ASSERT_NE(two, nullptr);
  EXPECT_DOUBLE_EQ(two->images_per_sec, 15.0);
  EXPECT_DOUBLE_EQ(two->images_per_sec_per_worker, 7.5);
  EXPECT_NE(two->file.find("3 rounds"), std::string::npos) << two->file;
  const auto rounds = bm.rounds_with(2);
  ASSERT_EQ(rounds.size(), 3u);
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(rounds[r].round, r + 1);
  EXPECT_DOUBLE_EQ(rounds[1].images_per_sec, 10.0);
  // Kubernetes' exposed communication per round: 0.10, 0.03, 0.05, 0.02 -> median 0.04.
  EXPECT_NEAR(sets[1].run_with(2)->breakdown.comm_exposed, 0.04, 1e-12);
}

TEST(ReportRounds, GapIsTheMedianOfGapsPairedByRound) {
  TempDir dir;
  const Comparison cmp = compare_result_sets(drifting_rounds(dir), {});
  const RunComparison& k2 = cmp.sets[1].runs.at(0);
  ASSERT_EQ(k2.workers, 2);
  EXPECT_EQ(k2.rounds, 4);
  ASSERT_EQ(k2.round_gaps.size(), 3u);  // round 4 has no bare-metal partner
  EXPECT_NEAR(k2.round_gaps[0].gap_pct, 50.0, 1e-9);
  EXPECT_NEAR(k2.round_gaps[1].gap_pct, 5.0, 1e-9);
  EXPECT_NEAR(k2.round_gaps[2].gap_pct, 2.0, 1e-9);
  EXPECT_NEAR(*k2.gap_pct, 5.0, 1e-9);

  ASSERT_EQ(cmp.variant_gaps.size(), 1u);
  const VariantGap& g = cmp.variant_gaps[0];
  EXPECT_EQ(g.reference, "bare-metal · fp16");
  EXPECT_NEAR(g.gap_pct, 5.0, 1e-9);
  ASSERT_TRUE(g.gap_spread.has_value());
  EXPECT_NEAR(g.gap_spread->min, 2.0, 1e-9);
  EXPECT_NEAR(g.gap_spread->max, 50.0, 1e-9);
  // Exposed communication over bare metal's, in % of bare metal's step, per round: +0.08 s,
  // +0.01 s, +0.03 s -> median +0.03 s.
  ASSERT_TRUE(g.comm_penalty_pct.has_value());
  EXPECT_NEAR(g.round_gaps[0].comm_penalty_pct, 100 * 0.08 / kBareStep, 1e-9);
  EXPECT_NEAR(*g.comm_penalty_pct, 100 * 0.03 / kBareStep, 1e-9);
  EXPECT_NEAR(g.comm_penalty_spread->min, 100 * 0.01 / kBareStep, 1e-9);
  EXPECT_NEAR(g.comm_penalty_spread->max, 100 * 0.08 / kBareStep, 1e-9);
}

TEST(ReportRounds, SingleRunsKeepTheGapOfTheirThroughputs) {
  TempDir dir;
  const auto bm = test_util::write_bench(dir, "bm", round_spec(2, 20.0, kBareComm));
  const auto k8s = test_util::write_bench(dir, "k8s", round_spec(2, 19.0, 0.0835));
  const Comparison cmp = compare_result_sets(
      {load_result_set("bare-metal", bm), load_result_set("kubernetes", k8s)}, {});
  const VariantGap& g = cmp.variant_gaps.at(0);
  EXPECT_NEAR(g.gap_pct, 5.0, 1e-9);
  EXPECT_TRUE(g.round_gaps.empty());
  EXPECT_FALSE(g.gap_spread.has_value());
  EXPECT_NEAR(*g.comm_penalty_pct, 100 * 0.0635 / kBareStep, 1e-9);
  EXPECT_EQ(format_markdown_report(cmp).find("## Rounds"), std::string::npos);
}

TEST(ReportRounds, SingleRunAndRoundsOfOneWorkerCountAreRefused) {
  TempDir dir;
  test_util::write_bench(dir, "mixed", run_spec(2, 10.0));
  write_bench_round(dir, "mixed", run_spec(2, 11.0), 1);
  try {
    load_result_set("mixed", dir.path() + "/mixed");
    FAIL() << "a single run and a round of 2 workers were accepted";
  } catch (const DataError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bench-w2.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bench-w2-r1.json"), std::string::npos) << msg;
  }
}

TEST(ReportRounds, MarkdownTerminalAndJsonListEveryRound) {
  TempDir dir;
  const Comparison cmp = compare_result_sets(drifting_rounds(dir), {});
  const std::string md = format_markdown_report(cmp);
  EXPECT_NE(md.find("## Rounds"), std::string::npos) << md;
  EXPECT_NE(md.find("| kubernetes · fp16 | bare-metal · fp16 | 2 | 3 | +50.0 +5.0 +2.0 | "
                    "+5.0 % (+2.0 .. +50.0) |"),
            std::string::npos)
      << md;
  const std::string table = format_terminal_report(cmp);
  EXPECT_NE(table.find("gap median +5.0 % (+2.0 .. +50.0), per round +50.0 +5.0 +2.0"),
            std::string::npos)
      << table;
  const auto j = nlohmann::json::parse(format_json_report(cmp));
  const auto& g = j.at("variant_gaps").at(0);
  EXPECT_NEAR(g.at("gap_spread").at("median").get<double>(), 5.0, 1e-9);
  EXPECT_NEAR(g.at("gap_spread").at("max").get<double>(), 50.0, 1e-9);
  ASSERT_EQ(g.at("round_gaps").size(), 3u);
  EXPECT_EQ(g.at("round_gaps").at(2).at("round"), 3);
  EXPECT_NEAR(g.at("round_gaps").at(2).at("comm_penalty_pct").get<double>(), 100 * 0.03 / kBareStep,
              1e-9);
  const auto& run = j.at("sets").at(1).at("runs").at(0);
  EXPECT_EQ(run.at("rounds"), 4);
  EXPECT_NEAR(run.at("gap_pct").get<double>(), 5.0, 1e-9);
  // Bare metal's 2-worker rounds (20, 10, 15): the median and the range beside it.
  EXPECT_NE(md.find("| bare-metal · fp16 | 2 | 2 | 15.00 | 10.00-20.00 (3 rounds) |"),
            std::string::npos)
      << md;
  const auto& bare = j.at("sets").at(0).at("runs").at(1);
  EXPECT_NEAR(bare.at("images_per_sec_min").get<double>(), 10.0, 1e-9);
  EXPECT_NEAR(bare.at("images_per_sec_max").get<double>(), 20.0, 1e-9);
}

}  // namespace
}  // namespace chexscale::report
