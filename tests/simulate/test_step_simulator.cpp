// The step simulator against steps worked out by hand on the three-layer profile (10 MiB
// gradients ready at 0.05, 0.1 and 0.2 s into a 0.2 s backward; 10 MiB buckets; 0.04 s per
// bucket allreduce on 2 nodes): overlap, no overlap, fp16, the bucket plan, CPU contention with
// and without a spare core (backward stretched, transfers inside it slowed), the reducer's
// gradient passes, stragglers, determinism.
#include <gtest/gtest.h>

#include "common/error.h"
#include "simulate/profile_builders.h"
#include "simulate/step_simulator.h"

namespace chexscale::simulate {
namespace {

using testing::link_for;
using testing::three_layer_profile;

SimulationSettings ten_mib_buckets() {
  SimulationSettings s;
  s.bucket_mb = 10;
  s.first_bucket_mb = 10;
  s.steps = 10;
  return s;
}

Links links_of(const NetworkProfile& n) {
  return {n, n};
}

TEST(StepSimulator, OverlapExposesOnlyTheLastBucket) {
  const SimulatedJob job =
      simulate_job(three_layer_profile(), links_of(link_for(0.04)), {2, 1}, ten_mib_buckets());
  // Buckets start at 0.05, 0.1, 0.2 and take 0.04 s each: the last ends 0.04 s after backward.
  EXPECT_EQ(job.buckets, 3u);
  EXPECT_NEAR(job.step.comm_exposed, 0.04, 1e-12);
  EXPECT_NEAR(job.step.backward, 0.2, 1e-12);
  EXPECT_NEAR(job.step.total, 0.1 + 0.2 + 0.04 + 0.05, 1e-12);
  EXPECT_NEAR(job.images_per_sec, 2 * 8 / 0.39, 1e-9);
  EXPECT_EQ(job.wire_bytes_per_step, 30 * testing::kMiB);
  EXPECT_NEAR(job.comm_seconds_per_step, 0.12, 1e-12);
}

TEST(StepSimulator, QueuedBucketsWaitForTheChannel) {
  // 0.08 s per bucket: 0.05-0.13, then 0.13-0.21 (queued behind the first), then 0.21-0.29.
  const SimulatedJob job =
      simulate_job(three_layer_profile(), links_of(link_for(0.08)), {2, 1}, ten_mib_buckets());
  EXPECT_NEAR(job.step.comm_exposed, 0.09, 1e-12);
}

TEST(StepSimulator, WithoutOverlapEveryBucketIsExposed) {
  SimulationSettings s = ten_mib_buckets();
  s.overlap = false;
  const SimulatedJob job = simulate_job(three_layer_profile(), links_of(link_for(0.04)), {2, 1}, s);
  EXPECT_NEAR(job.step.comm_exposed, 0.12, 1e-12);
}

TEST(StepSimulator, Fp16HalvesTheBytesOnTheWire) {
  SimulationSettings s = ten_mib_buckets();
  s.compression = "fp16";
  const SimulatedJob job = simulate_job(three_layer_profile(), links_of(link_for(0.04)), {2, 1}, s);
  EXPECT_EQ(job.wire_bytes_per_step, 15 * testing::kMiB);
  EXPECT_NEAR(job.step.comm_exposed, 0.02, 1e-12);
}

TEST(StepSimulator, BucketsFollowTheReducersPlan) {
  // 25 MiB buckets, first 1 MiB: the first bucket takes parameter 2 alone (10 MiB > 1 MiB), the
  // second parameters 1 and 0 (20 MiB <= 25): two allreduces, the big one after backward.
  SimulationSettings s = ten_mib_buckets();
  s.bucket_mb = 25;
  s.first_bucket_mb = 1;
  const SimulatedJob job = simulate_job(three_layer_profile(), links_of(link_for(0.04)), {2, 1}, s);
  EXPECT_EQ(job.buckets, 2u);
  // 0.05-0.09 for the first; the second is ready at 0.2 and takes 0.08.
  EXPECT_NEAR(job.step.comm_exposed, 0.08, 1e-12);
}

TEST(StepSimulator, OneWorkerHasNoCommunication) {
  const SimulatedJob job =
      simulate_job(three_layer_profile(), links_of(link_for(0.04)), {1, 1}, ten_mib_buckets());
  EXPECT_EQ(job.step.comm_exposed, 0.0);
  EXPECT_NEAR(job.images_per_sec, 8 / 0.35, 1e-9);
}

TEST(StepSimulator, CommunicationCpuStretchesBackwardOnlyWithoutASpareCore) {
  NetworkProfile n = link_for(0.04);
  n.cpu_s_per_byte = 0.01 / (20.0 * testing::kMiB);  // 0.01 CPU s per 10 MiB allreduce (n = 2)
  const SimulatedJob busy =
      simulate_job(three_layer_profile(), links_of(n), {2, 1}, ten_mib_buckets());
  EXPECT_GT(busy.step.backward, 0.2 + 0.015);  // at least the CPU of the first two buckets
  EXPECT_LT(busy.step.backward, 0.2 + 0.03 + 1e-9);
  SimulationSettings spare = ten_mib_buckets();
  spare.cores_per_worker = 2;  // one core beside the compute thread
  const SimulatedJob free = simulate_job(three_layer_profile(), links_of(n), {2, 1}, spare);
  EXPECT_NEAR(free.step.backward, 0.2, 1e-12);
  EXPECT_NEAR(free.comm_cpu_seconds_per_step, 0.03, 1e-12);
}

TEST(StepSimulator, AQuotaBelowAThreadsCoreIsSharedWithCommunication) {
  // 0.04 s per bucket alone, 0.01 of it CPU (u = 0.25 core). At a quota of 0.5 core both run
  // at 0.5 / 0.75 of their pace inside backward: the first bucket runs 0.05s to 0.05s + 0.06,
  // the second from 0.1s, both inside backward; their 0.02 CPU s stretch backward by
  // 0.02 / 0.5: s = 1.2 (one core: 0.02 / 1, s = 1.1), and the third runs after it.
  NetworkProfile n = link_for(0.04);
  n.cpu_s_per_byte = 0.01 / (20.0 * testing::kMiB);
  ComputeProfile quota = three_layer_profile();
  quota.cpu_quota_cores = 0.5;
  const SimulatedJob profiled = simulate_job(quota, links_of(n), {2, 1}, ten_mib_buckets());
  EXPECT_NEAR(profiled.step.backward, 0.24, 1e-12);
  EXPECT_NEAR(profiled.step.comm_exposed, 0.04, 1e-12);
  const SimulatedJob core =
      simulate_job(three_layer_profile(), links_of(n), {2, 1}, ten_mib_buckets());
  EXPECT_NEAR(core.step.backward, 0.22, 1e-12);
  // --cores-per-worker says the same of a profile without its quota, and overrides one.
  SimulationSettings half = ten_mib_buckets();
  half.cores_per_worker = 0.5;
  EXPECT_NEAR(simulate_job(three_layer_profile(), links_of(n), {2, 1}, half).step.backward, 0.24,
              1e-12);
  SimulationSettings spare = ten_mib_buckets();
  spare.cores_per_worker = 1.5;  // half a core beside the compute thread: 0.02 CPU s fit
  EXPECT_NEAR(simulate_job(quota, links_of(n), {2, 1}, spare).step.backward, 0.2, 1e-12);
}

TEST(StepSimulator, TransfersInsideBackwardSlowDownWithoutASpareCore) {
  // 0.08 s per bucket alone, half of it CPU: inside backward the transfer and the one compute
  // thread share its core and each runs at 1 / 1.5 of its pace.
  NetworkProfile n = link_for(0.08);
  n.cpu_s_per_byte = 0.04 / (20.0 * testing::kMiB);
  SimulationSettings spare = ten_mib_buckets();
  spare.cores_per_worker = 2;
  const SimulatedJob free = simulate_job(three_layer_profile(), links_of(n), {2, 1}, spare);
  EXPECT_NEAR(free.step.comm_exposed, 0.09, 1e-12);  // queued, at full pace
  const SimulatedJob busy =
      simulate_job(three_layer_profile(), links_of(n), {2, 1}, ten_mib_buckets());
  // Backward stretched by s: the first bucket runs 0.05s-0.05s+0.12; the second does
  // (0.15s - 0.12) / 1.5 of its work inside backward (0.2s), so the CPU inside it is
  // 0.04 + 0.5 (0.1s - 0.08) = 0.05s and s = 1 + 0.05s / 0.2: s = 4/3. The second ends
  // 0.16 - 0.1s = 0.0267 s after backward and the third 0.08 s later: 0.1067 s exposed (the
  // fixed-point iteration gets within 1e-3 of it).
  EXPECT_NEAR(busy.step.backward, 0.2 * 4 / 3, 1e-3);
  EXPECT_NEAR(busy.step.comm_exposed, 0.16 - 0.4 / 3 + 0.08, 1e-3);
}

TEST(StepSimulator, GradientPassesJoinOnlyAStepOfSeveralWorkers) {
  ComputeProfile p = three_layer_profile();
  p.gradient_passes = {0.02, 0.03, 0.04};  // copy, average, casts
  // Copying into the slots stretches backward to 0.22 s (ready at 0.055, 0.11, 0.22; allreduces
  // end 0.095, 0.15, 0.26); each bucket's averaging (0.01 s, a third of the bytes) follows its
  // wait: 0.23, 0.24, then 0.26 + 0.01 = 0.27, 0.05 s after backward. Forward is as profiled.
  const SimulatedJob two = simulate_job(p, links_of(link_for(0.04)), {2, 1}, ten_mib_buckets());
  EXPECT_NEAR(two.step.forward, 0.1, 1e-12);
  EXPECT_NEAR(two.step.backward, 0.22, 1e-12);
  EXPECT_NEAR(two.step.comm_exposed, 0.05, 1e-12);
  EXPECT_NEAR(two.step.total, 0.1 + 0.22 + 0.05 + 0.05, 1e-12);
  // fp16: the cast to the wire (0.04 / 2 / 3 s a bucket) holds backward up at each launch
  // (buckets sent at 0.0617, 0.1233, 0.24; 0.02 s each); the cast back joins the averaging.
  SimulationSettings fp16 = ten_mib_buckets();
  fp16.compression = "fp16";
  const SimulatedJob half = simulate_job(p, links_of(link_for(0.04)), {2, 1}, fp16);
  EXPECT_NEAR(half.step.backward, 0.24, 1e-12);
  EXPECT_NEAR(half.step.comm_exposed, 0.29 - 0.24, 1e-12);
  // One worker has no reducer: the profile's step as it is.
  const SimulatedJob one = simulate_job(p, links_of(link_for(0.04)), {1, 1}, ten_mib_buckets());
  EXPECT_NEAR(one.step.total, 0.35, 1e-12);
}

TEST(StepSimulator, EachStepWaitsForTheSlowestWorker) {
  ComputeProfile p = three_layer_profile();
  p.step_spread = {1.0, 1.5};
  SimulationSettings s = ten_mib_buckets();
  s.steps = 100;
  NetworkProfile fast = link_for(1e-6);
  // 1,024 workers: every step draws at least one 1.5 (chance 2^-1024 otherwise).
  const SimulatedJob many = simulate_job(p, links_of(fast), {1024, 1}, s);
  EXPECT_NEAR(many.step.forward, 0.15, 1e-12);
  EXPECT_NEAR(many.step.backward, 0.3, 1e-12);
  // One worker: half the steps are slow on average.
  const SimulatedJob one = simulate_job(p, links_of(fast), {1, 1}, s);
  EXPECT_GT(one.step.total, 0.35 * 1.1);
  EXPECT_LT(one.step.total, 0.35 * 1.4);
  s.stragglers = false;
  EXPECT_NEAR(simulate_job(p, links_of(fast), {1024, 1}, s).step.forward, 0.1, 1e-12);
}

TEST(StepSimulator, SameSeedSameResult) {
  ComputeProfile p = three_layer_profile();
  p.step_spread = {0.9, 1.0, 1.2, 1.6};
  SimulationSettings s = ten_mib_buckets();
  const SimulatedJob a = simulate_job(p, links_of(link_for(0.04)), {1, 1}, s);
  const SimulatedJob b = simulate_job(p, links_of(link_for(0.04)), {1, 1}, s);
  EXPECT_EQ(a.step.total, b.step.total);
  s.seed = 2;
  const SimulatedJob c = simulate_job(p, links_of(link_for(0.04)), {1, 1}, s);
  EXPECT_NE(a.step.total, c.step.total);
}

TEST(StepSimulator, BadSettingsAreUsageErrors) {
  SimulationSettings s;
  s.bucket_mb = 0;
  EXPECT_THROW(s.validate(), UsageError);
  s = {};
  s.compression = "zip";
  EXPECT_THROW(s.validate(), UsageError);
  s = {};
  s.steps = 0;
  EXPECT_THROW(s.validate(), UsageError);
  EXPECT_THROW(simulate_job(three_layer_profile(), links_of(link_for(0.04)), {0, 1}, {}),
               UsageError);
}

}  // namespace
}  // namespace chexscale::simulate
