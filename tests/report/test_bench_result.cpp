// bench.json as BenchResult: to_json then from_json gives back every field (each a different
// value, so a swapped or renamed field shows), files the peer writes read with their fallbacks,
// and a bad field is named with its file.
#include <gtest/gtest.h>

#include "common/error.h"
#include "report/bench_fixture.h"
#include "report/bench_result.h"

namespace chexscale::report {
namespace {

using nlohmann::json;

StepTimes distinct_steps(double base) {
  StepTimes t;
  t.data_wait = base + 0.01;
  t.forward = base + 0.02;
  t.backward = base + 0.03;
  t.comm_exposed = base + 0.04;
  t.optimizer = base + 0.05;
  t.total = base + 0.06;
  return t;
}

BenchResult distinct_result() {
  BenchResult r;
  r.label = "bare-metal";
  r.arch = "resnet50";
  r.image_size = 224;
  r.batch_per_worker = 32;
  r.world_size = 4;
  r.nnodes = 2;
  r.backend = "gloo";
  r.overlap = false;
  r.compression = "fp16";
  r.bucket_mb = 12.5;
  r.data = "/data/shards";
  r.threads_per_worker = 3;
  r.device = "cuda";
  r.amp = "bf16";
  r.channels_last = true;
  r.warmup_steps = 5;
  r.steps = 40;
  r.elapsed_s = 61.5;
  r.images_per_sec = 83.25;
  r.images_per_sec_per_worker = 20.8125;
  r.step_time_s = {1.5, 1.25, 1.75, 1.625};
  r.breakdown = distinct_steps(1.0);
  for (int k = 0; k < 2; ++k) {
    RankResult rank;
    rank.rank = k;
    rank.images_per_sec = 20.0 + k;
    rank.breakdown = distinct_steps(2.0 + k);
    r.per_rank.push_back(rank);
  }
  r.torch_version = "1.13.1";
  r.hostname = "node-a";
  r.timestamp = "2026-11-29T15:40:00Z";
  return r;
}

void expect_same_steps(const StepTimes& a, const StepTimes& b) {
  for (const StepPhase& p : kStepPhases)
    EXPECT_EQ(a.*p.seconds, b.*p.seconds) << p.name;
  EXPECT_EQ(a.total, b.total);
}

TEST(BenchResult, RoundTripKeepsEveryField) {
  const BenchResult in = distinct_result();
  const json j = to_json(in);
  EXPECT_EQ(j["schema"], kBenchSchema);
  EXPECT_EQ(j["breakdown_s"]["comm_exposed"], 1.04);
  EXPECT_EQ(j["step_time_s"]["p90"], 1.75);
  const BenchResult out = from_json(j, "bench.json");
  EXPECT_EQ(out.label, in.label);
  EXPECT_EQ(out.arch, in.arch);
  EXPECT_EQ(out.image_size, in.image_size);
  EXPECT_EQ(out.batch_per_worker, in.batch_per_worker);
  EXPECT_EQ(out.world_size, in.world_size);
  EXPECT_EQ(out.nnodes, in.nnodes);
  EXPECT_EQ(out.backend, in.backend);
  EXPECT_EQ(out.overlap, in.overlap);
  EXPECT_EQ(out.compression, in.compression);
  EXPECT_EQ(out.bucket_mb, in.bucket_mb);
  EXPECT_EQ(out.data, in.data);
  EXPECT_EQ(out.threads_per_worker, in.threads_per_worker);
  EXPECT_EQ(out.device, in.device);
  EXPECT_EQ(out.amp, in.amp);
  EXPECT_EQ(out.channels_last, in.channels_last);
  EXPECT_EQ(out.warmup_steps, in.warmup_steps);
  EXPECT_EQ(out.steps, in.steps);
  EXPECT_EQ(out.elapsed_s, in.elapsed_s);
  EXPECT_EQ(out.images_per_sec, in.images_per_sec);
  EXPECT_EQ(out.images_per_sec_per_worker, in.images_per_sec_per_worker);
  EXPECT_EQ(out.step_time_s.median, in.step_time_s.median);
  EXPECT_EQ(out.step_time_s.p10, in.step_time_s.p10);
  EXPECT_EQ(out.step_time_s.p90, in.step_time_s.p90);
  EXPECT_EQ(out.step_time_s.mean, in.step_time_s.mean);
  EXPECT_TRUE(out.has_breakdown);
  expect_same_steps(out.breakdown, in.breakdown);
  ASSERT_EQ(out.per_rank.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(out.per_rank[k].rank, in.per_rank[k].rank);
    EXPECT_EQ(out.per_rank[k].images_per_sec, in.per_rank[k].images_per_sec);
    EXPECT_TRUE(out.per_rank[k].has_breakdown);
    expect_same_steps(out.per_rank[k].breakdown, in.per_rank[k].breakdown);
  }
  EXPECT_EQ(out.torch_version, in.torch_version);
  EXPECT_EQ(out.hostname, in.hostname);
  EXPECT_EQ(out.timestamp, in.timestamp);
  // Written again, it is the same document: a sweep can carry runs it read back unchanged.
  EXPECT_EQ(to_json(out).dump(2), j.dump(2));
}

TEST(BenchResult, PeerFileWithoutBreakdownReadsWithFallbacks) {
  json peer = test_util::bench_object(test_util::run_spec(2, 18.0));
  for (const char* key : {"breakdown_s", "nnodes", "backend", "label", "hostname"})
    peer.erase(key);
  peer["per_rank"] = {{{"rank", 0}, {"images_per_sec", 9.0}}};
  const BenchResult r = from_json(peer, "peer.json");
  EXPECT_FALSE(r.has_breakdown);
  EXPECT_EQ(r.breakdown.total, r.step_time_s.median);  // all of the step is "other"
  EXPECT_EQ(r.breakdown.forward, 0.0);
  EXPECT_EQ(r.nnodes, 1);
  EXPECT_EQ(r.backend, "");
  EXPECT_EQ(r.label, "");
  ASSERT_EQ(r.per_rank.size(), 1u);
  EXPECT_FALSE(r.per_rank[0].has_breakdown);
  EXPECT_EQ(r.per_rank[0].images_per_sec, 9.0);
  const json again = to_json(r);
  EXPECT_FALSE(again.contains("breakdown_s"));
  EXPECT_FALSE(again["per_rank"][0].contains("breakdown_s"));
}

TEST(BenchResult, BadPerRankEntryNamesTheFileEntryAndField) {
  json doc = to_json(distinct_result());
  doc["per_rank"][1].erase("images_per_sec");
  try {
    from_json(doc, "w4.json");
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("w4.json (per_rank[1]): missing field 'images_per_sec'"),
              std::string::npos)
        << e.what();
  }
  doc["per_rank"] = 3;
  EXPECT_THROW(from_json(doc, "w4.json"), DataError);
  EXPECT_THROW(from_json(json::array(), "w4.json"), DataError);
}

}  // namespace
}  // namespace chexscale::report
