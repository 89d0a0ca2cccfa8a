// Comparison maths (gap %, efficiency, attribution), references of variants, mismatch errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "report/bench_fixture.h"
#include "report/compare.h"
#include "report/comparison_fixture.h"
#include "report/text.h"

namespace chexscale::report {
namespace {

using test_util::bare_metal_and_kubernetes;
using test_util::BenchSpec;
using test_util::run_spec;
using test_util::TempDir;

TEST(ReportMaths, GapAndEfficiencyDefinitions) {
  EXPECT_DOUBLE_EQ(gap_percent(100.0, 92.0), 8.0);
  EXPECT_DOUBLE_EQ(gap_percent(100.0, 110.0), -10.0);
  EXPECT_DOUBLE_EQ(scaling_efficiency(19.0, 2, 10.0, 1), 0.95);
  EXPECT_DOUBLE_EQ(scaling_efficiency(30.0, 4, 10.0, 1), 0.75);
  EXPECT_DOUBLE_EQ(scaling_efficiency(30.0, 4, 18.0, 2), 30.0 * 2 / (4 * 18.0));
  EXPECT_THROW(gap_percent(0.0, 1.0), Error);
}

TEST(ReportCompare, GapEfficiencyAndAttribution) {
  TempDir dir;
  const Comparison cmp = compare_result_sets(bare_metal_and_kubernetes(dir), {});
  ASSERT_EQ(cmp.sets.size(), 2u);
  EXPECT_EQ(cmp.baseline, "bare-metal");
  EXPECT_EQ(cmp.sets[0].reference, "");
  EXPECT_EQ(cmp.sets[1].reference, "bare-metal");
  const RunComparison& bm2 = cmp.sets[0].runs[1];
  EXPECT_FALSE(bm2.gap_pct.has_value());
  EXPECT_NEAR(bm2.efficiency, 0.95, 1e-12);
  const RunComparison& k1 = cmp.sets[1].runs[0];
  EXPECT_NEAR(*k1.gap_pct, 0.0, 1e-12);
  const RunComparison& k2 = cmp.sets[1].runs[1];
  EXPECT_NEAR(*k2.gap_pct, 8.0, 1e-9);
  EXPECT_NEAR(k2.efficiency, 0.874, 1e-9);
  EXPECT_NEAR(k2.gap_split->comm_exposed, 0.15, 1e-9);
  EXPECT_NEAR(k2.gap_split->compute, 0.01, 1e-9);
  EXPECT_NEAR(k2.gap_split->data_wait, 0.0, 1e-12);
  EXPECT_NEAR(k2.gap_split->total, 0.16, 1e-9);
  ASSERT_EQ(cmp.variant_gaps.size(), 1u);
  EXPECT_EQ(cmp.variant_gaps[0].workers, 2);
  EXPECT_NEAR(cmp.variant_gaps[0].gap_pct, 8.0, 1e-9);
  EXPECT_EQ(cmp.variant_gaps[0].dominant_phase, "comm_exposed");
  EXPECT_TRUE(cmp.notes.empty());
}

// A faster set is explained by the phase that shrank most, not by one that grew a little.
TEST(ReportCompare, FasterSetIsAttributedToThePhaseThatShrank) {
  TempDir dir;
  write_bench(dir, "bm", run_spec(1, 10.0));
  BenchSpec bm2 = run_spec(2, 17.0);
  bm2.comm_exposed = 0.15;
  const std::string bm = write_bench(dir, "bm", bm2);
  write_bench(dir, "hostnet", run_spec(1, 10.0));
  BenchSpec h2 = run_spec(2, 19.0);
  h2.comm_exposed = 0.02;
  h2.backward = 0.81;  // compute grew a little, communication shrank a lot
  const std::string hostnet = write_bench(dir, "hostnet", h2);
  const Comparison cmp = compare_result_sets(
      {load_result_set("bare-metal", bm), load_result_set("kubernetes/hostnet", hostnet)}, {});
  ASSERT_EQ(cmp.variant_gaps.size(), 1u);
  EXPECT_LT(cmp.variant_gaps[0].gap_pct, 0.0);
  EXPECT_LT(cmp.variant_gaps[0].gap_split.total, 0.0);
  EXPECT_EQ(cmp.variant_gaps[0].dominant_phase, "comm_exposed");
}

TEST(ReportCompare, SplitPutsUnaccountedTimeInOther) {
  StepTimes t;
  t.forward = 0.1;
  t.backward = 0.2;
  t.optimizer = 0.05;
  t.data_wait = 0.01;
  t.comm_exposed = 0.03;
  t.total = 0.40;
  const PhaseSplit s = split_phases(t);
  EXPECT_NEAR(s.compute, 0.35, 1e-12);
  EXPECT_NEAR(s.other, 0.01, 1e-12);
}

TEST(ReportCompare, VariantsAreComparedWithTheBaselineSystemOfTheSameVariant) {
  TempDir dir;
  const auto add = [&](const std::string& label, double ips) {
    return load_result_set(label, write_bench(dir, label, run_spec(2, ips)));
  };
  const Comparison cmp =
      compare_result_sets({add("bare-metal", 20), add("kubernetes", 18), add("bare-metal/fp16", 21),
                           add("kubernetes/fp16", 20.79), add("kubernetes/hostnet", 19.8)},
                          {});
  EXPECT_EQ(cmp.sets[1].reference, "bare-metal");
  EXPECT_EQ(cmp.sets[2].reference, "bare-metal");
  EXPECT_EQ(cmp.sets[3].reference, "bare-metal · fp16");
  EXPECT_EQ(cmp.sets[4].reference, "bare-metal");
  ASSERT_EQ(cmp.variant_gaps.size(), 4u);
  EXPECT_NEAR(cmp.variant_gaps[0].gap_pct, 10.0, 1e-9);
  EXPECT_NEAR(cmp.variant_gaps[1].gap_pct, -5.0, 1e-9);
  EXPECT_NEAR(cmp.variant_gaps[2].gap_pct, 1.0, 1e-9);
  EXPECT_NEAR(cmp.variant_gaps[3].gap_pct, 1.0, 1e-9);
  // Only a 2-worker run: it is its own scaling baseline.
  EXPECT_DOUBLE_EQ(cmp.sets[0].runs[0].efficiency, 1.0);
}

TEST(ReportCompare, MismatchedRunsAreRejectedUnlessForced) {
  TempDir dir;
  BenchSpec other = run_spec(2, 9.0);
  other.arch = "resnet50";
  other.batch = 32;
  const auto sets = std::vector<ResultSet>{
      load_result_set("bare-metal", write_bench(dir, "bm", run_spec(2, 10.0))),
      load_result_set("kubernetes", write_bench(dir, "k8s", other))};
  try {
    compare_result_sets(sets, {});
    FAIL() << "mismatch accepted";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("arch differs"), std::string::npos) << msg;
    EXPECT_NE(msg.find("densenet121"), std::string::npos) << msg;
    EXPECT_NE(msg.find("resnet50"), std::string::npos) << msg;
    EXPECT_NE(msg.find("batch_per_worker differs"), std::string::npos) << msg;
    EXPECT_NE(msg.find(dir.path() + "/k8s/bench-w2.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--force"), std::string::npos) << msg;
  }
  const Comparison forced = compare_result_sets(sets, {true});
  EXPECT_TRUE(forced.forced);
  ASSERT_EQ(forced.notes.size(), 2u);
  EXPECT_NE(forced.notes[0].find("forced: arch differs"), std::string::npos);
  EXPECT_NEAR(forced.variant_gaps.at(0).gap_pct, 10.0, 1e-9);
}

TEST(ReportCompare, ImageSizeOrThreadsMismatchAndBadSetLists) {
  TempDir dir;
  BenchSpec small = run_spec(1);
  small.image_size = 64;
  BenchSpec threads = run_spec(1);
  threads.threads = 2;
  const ResultSet a = load_result_set("a", write_bench(dir, "a", run_spec(1)));
  EXPECT_THROW(compare_result_sets({a, load_result_set("b", write_bench(dir, "b", small))}, {}),
               UsageError);
  EXPECT_THROW(compare_result_sets({a, load_result_set("c", write_bench(dir, "c", threads))}, {}),
               UsageError);
  EXPECT_THROW(compare_result_sets({a}, {}), UsageError);
  EXPECT_THROW(compare_result_sets({a, a}, {}), UsageError);  // duplicate label
}

TEST(ReportCompare, ResultWithoutBreakdownIsComparedAndNoted) {
  TempDir dir;
  auto peer = test_util::bench_object(run_spec(2, 18.0));
  peer.erase("breakdown_s");  // as the PyTorch DDP peer script writes it
  peer["step_time_s"]["median"] = 0.9;
  dir.write("peer/bench-w2.json", peer.dump());
  const Comparison cmp =
      compare_result_sets({load_result_set("chexscale", write_bench(dir, "cx", run_spec(2, 20.0))),
                           load_result_set("pytorch-ddp", dir.path() + "/peer")},
                          {});
  EXPECT_NEAR(cmp.variant_gaps.at(0).gap_pct, 10.0, 1e-9);
  const PhaseSplit& split = cmp.sets[1].runs[0].split;
  EXPECT_DOUBLE_EQ(split.total, 0.9);
  EXPECT_DOUBLE_EQ(split.other, 0.9);
  EXPECT_DOUBLE_EQ(split.compute, 0.0);
  ASSERT_EQ(cmp.notes.size(), 1u);
  EXPECT_NE(cmp.notes[0].find("pytorch-ddp"), std::string::npos);
  EXPECT_NE(cmp.notes[0].find("no step breakdown"), std::string::npos);
}

}  // namespace
}  // namespace chexscale::report
