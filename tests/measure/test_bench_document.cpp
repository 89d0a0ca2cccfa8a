// bench.json and sweep.json documents: every derived number follows from the measurements.
#include <gtest/gtest.h>

#include "common/error.h"
#include "measure/bench_document.h"

namespace chexscale::measure {
namespace {

using nlohmann::json;
using report::BenchResult;

StepTimes step(double wait, double fwd, double bwd, double comm, double opt, double total) {
  StepTimes t;
  t.data_wait = wait;
  t.forward = fwd;
  t.backward = bwd;
  t.comm_exposed = comm;
  t.optimizer = opt;
  t.total = total;
  return t;
}

report::BenchConfig two_workers_three_steps() {
  report::BenchConfig c;
  c.label = "bare-metal";
  c.world_size = 2;
  c.batch_per_worker = 16;
  c.steps = 3;
  c.warmup_steps = 1;
  c.backend = "gloo";
  return c;
}

TEST(BenchDocument, ThroughputStepTimesAndBreakdownFollowFromRanks) {
  RankMeasurement r0{
      4.0,
      {step(0, 1, 2, 0.1, 0.2, 3.5), step(0, 1, 2, 0.0, 0.2, 3.3), step(0, 1, 1, 0.0, 0.1, 2.2)}};
  RankMeasurement r1{
      4.8,
      {step(0.1, 1, 2, 0.2, 0.2, 3.6), step(0, 1, 3, 0.0, 0.2, 4.4), step(0, 1, 1, 0.0, 0.1, 2.4)}};
  const BenchResult doc = bench_document(two_workers_three_steps(), {r0, r1});
  EXPECT_EQ(doc.label, "bare-metal");
  EXPECT_EQ(doc.backend, "gloo");
  EXPECT_DOUBLE_EQ(doc.elapsed_s, 4.8);                    // the slowest rank
  EXPECT_DOUBLE_EQ(doc.images_per_sec, 2 * 16 * 3 / 4.8);  // 20
  EXPECT_DOUBLE_EQ(doc.images_per_sec_per_worker, 10.0);
  // Per-step mean over ranks: 3.55, 3.85, 2.3.
  EXPECT_DOUBLE_EQ(doc.step_time_s.median, 3.55);
  EXPECT_DOUBLE_EQ(doc.step_time_s.mean, (3.55 + 3.85 + 2.3) / 3);
  EXPECT_DOUBLE_EQ(doc.step_time_s.p90, 3.55 + 0.8 * (3.85 - 3.55));
  // Median steps: rank 0's second (total 3.3), rank 1's first (total 3.6); then their mean.
  EXPECT_DOUBLE_EQ(doc.breakdown.total, (3.3 + 3.6) / 2);
  EXPECT_DOUBLE_EQ(doc.breakdown.comm_exposed, (0.0 + 0.2) / 2);
  EXPECT_DOUBLE_EQ(doc.breakdown.data_wait, (0.0 + 0.1) / 2);
  EXPECT_DOUBLE_EQ(doc.breakdown.backward, 2.0);
  EXPECT_TRUE(doc.has_breakdown);
  ASSERT_EQ(doc.per_rank.size(), 2u);
  EXPECT_EQ(doc.per_rank[1].rank, 1);
  EXPECT_DOUBLE_EQ(doc.per_rank[0].images_per_sec, 16 * 3 / 4.0);
  EXPECT_DOUBLE_EQ(doc.per_rank[1].breakdown.total, 3.6);
  EXPECT_DOUBLE_EQ(doc.per_rank[1].breakdown.data_wait, 0.1);
  EXPECT_FALSE(doc.torch_version.empty());
  EXPECT_FALSE(doc.hostname.empty());
  EXPECT_EQ(doc.timestamp.size(), std::string("2026-11-29T15:40:00Z").size());

  // The written document: every field of docs/bench-format.md, with its schema.
  const json j = report::to_json(doc);
  EXPECT_EQ(j["schema"], "chexscale.bench/1");
  for (const char* key : {"label",
                          "arch",
                          "image_size",
                          "batch_per_worker",
                          "world_size",
                          "nnodes",
                          "backend",
                          "hierarchical",
                          "hierarchical_auto",
                          "shared_memory",
                          "overlap",
                          "compression",
                          "bucket_mb",
                          "data",
                          "threads_per_worker",
                          "device",
                          "amp",
                          "channels_last",
                          "warmup_steps",
                          "steps",
                          "elapsed_s",
                          "images_per_sec",
                          "images_per_sec_per_worker",
                          "step_time_s",
                          "breakdown_s",
                          "per_rank",
                          "torch_version",
                          "hostname",
                          "timestamp"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.size(), 30u);
  EXPECT_EQ(j["hierarchical"], false);
  EXPECT_EQ(j["hierarchical_auto"], false);
  EXPECT_EQ(j["shared_memory"], false);
  EXPECT_DOUBLE_EQ(j["breakdown_s"]["comm_exposed"], 0.1);
  EXPECT_DOUBLE_EQ(j["per_rank"][1]["breakdown_s"]["total"], 3.6);
}

TEST(BenchDocument, RejectsRanksWithDifferentStepCounts) {
  RankMeasurement full{1.0,
                       {step(0, 1, 1, 0, 0, 2), step(0, 1, 1, 0, 0, 2), step(0, 1, 1, 0, 0, 2)}};
  RankMeasurement short_rank{1.0, {step(0, 1, 1, 0, 0, 2)}};
  EXPECT_THROW(bench_document(two_workers_three_steps(), {full, short_rank}), Error);
  EXPECT_THROW(bench_document(two_workers_three_steps(), {full}), Error);
}

BenchResult run(int workers, double images_per_sec) {
  BenchResult r;
  r.world_size = workers;
  r.images_per_sec = images_per_sec;
  return r;
}

TEST(SweepDocument, EfficiencyIsThroughputOverWorkersTimesSingleWorker) {
  const SweepResult sweep = sweep_document("k8s", {run(1, 10.0), run(2, 19.0), run(4, 30.0)});
  EXPECT_EQ(sweep.label, "k8s");
  ASSERT_EQ(sweep.runs.size(), 3u);
  EXPECT_EQ(sweep.runs[1].images_per_sec, 19.0);
  ASSERT_EQ(sweep.scaling.size(), 3u);
  EXPECT_DOUBLE_EQ(sweep.scaling[0].efficiency, 1.0);
  EXPECT_DOUBLE_EQ(sweep.scaling[1].efficiency, 0.95);
  EXPECT_DOUBLE_EQ(sweep.scaling[2].efficiency, 0.75);
  EXPECT_EQ(sweep.scaling[2].workers, 4);

  const json j = to_json(sweep);
  EXPECT_EQ(j["schema"], "chexscale.sweep/1");
  EXPECT_EQ(j["label"], "k8s");
  ASSERT_EQ(j["runs"].size(), 3u);
  EXPECT_EQ(j["runs"][1], report::to_json(sweep.runs[1]));
  EXPECT_EQ(j["scaling"][2]["workers"], 4);
  EXPECT_DOUBLE_EQ(j["scaling"][1]["efficiency"], 0.95);
  EXPECT_DOUBLE_EQ(j["scaling"][1]["images_per_sec"], 19.0);
}

TEST(SweepDocument, WithoutOneWorkerTheSmallestCountIsTheBaseline) {
  const auto points = scaling({run(4, 36.0), run(2, 20.0)});
  ASSERT_EQ(points.size(), 2u);
  EXPECT_DOUBLE_EQ(points[0].efficiency, 36.0 * 2 / (4 * 20.0));  // 0.9
  EXPECT_DOUBLE_EQ(points[1].efficiency, 1.0);
}

}  // namespace
}  // namespace chexscale::measure
