// PowerSGD in the simulator: the bytes and allreduces of a step equal what the engine's own
// PowerSgdBucket sends for the reducer's buckets of a real model (ResNet-18's shapes), and the
// step's timeline worked out by hand on the three-layer profile ((1280, 2048) matrices, rank 4):
// the engine's order P0, P1, Q0, P2, Q1, Q2, PowerSGD's arithmetic holding backward up, a faster
// step where the link is the bottleneck, and clear errors for profiles that cannot say.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "common/error.h"
#include "distributed/bucket_plan.h"
#include "distributed/powersgd.h"
#include "distributed/reducer.h"
#include "models/registry.h"
#include "simulate/powersgd_cost.h"
#include "simulate/profile_builders.h"
#include "simulate/step_simulator.h"
#include "test_util/error_message.h"

namespace chexscale::simulate {
namespace {

using testing::link_for;
using testing::three_layer_profile;

constexpr double kMiB = 1024.0 * 1024.0;

SimulationSettings powersgd_ten_mib_buckets() {
  SimulationSettings s;
  s.bucket_mb = 10;
  s.first_bucket_mb = 10;
  s.steps = 3;
  s.stragglers = false;
  s.compression = "powersgd:4";
  return s;
}

ComputeProfile with_rate(ComputeProfile p, double flops_per_s) {
  p.powersgd_flops_per_s = flops_per_s;
  return p;
}

TEST(PowerSgdSimulation, BytesAndAllreducesAreTheEnginesForARealModel) {
  models::ModelOptions model_options;
  model_options.arch = "resnet18";
  const std::vector<torch::Tensor> params = models::make_model(model_options)->parameters();
  ComputeProfile profile = with_rate(three_layer_profile(), 1e12);
  profile.parameters.clear();
  for (size_t i = 0; i < params.size(); ++i) {
    const double ready = profile.backward_s * static_cast<double>(params.size() - i) /
                         static_cast<double>(params.size());
    profile.parameters.push_back({params[i].numel() * 4, ready, params[i].sizes().vec()});
  }
  for (int rank : {1, 4}) {
    distributed::ReducerOptions reducer;
    distributed::set_compression(reducer, fmt::format("powersgd:{}", rank));
    distributed::PowerSgdOptions options;
    options.rank = reducer.powersgd_rank;
    options.min_rate = reducer.powersgd_min_rate;
    // The engine: the reducer's buckets, each sent as PowerSgdBucket's two payloads, or as it is
    // when it compresses nothing.
    int64_t engine_bytes = 0;
    size_t engine_allreduces = 0;
    torch::NoGradGuard no_grad;
    for (const auto& members :
         distributed::plan_buckets(params, static_cast<int64_t>(reducer.first_bucket_mb * kMiB),
                                   static_cast<int64_t>(reducer.bucket_mb * kMiB))) {
      std::vector<torch::Tensor> slots;
      int64_t numel = 0;
      for (size_t i : members) {
        slots.push_back(torch::randn(params[i].sizes()));
        numel += params[i].numel();
      }
      distributed::PowerSgdBucket bucket(slots, members, options);
      if (!bucket.compresses_any()) {
        engine_bytes += 4 * numel;
        ++engine_allreduces;
        continue;
      }
      engine_bytes += 4 * bucket.first_payload(1.0).numel();
      engine_bytes += 4 * bucket.second_payload(2).numel();
      engine_allreduces += 2;
    }
    SimulationSettings s;
    s.compression = fmt::format("powersgd:{}", rank);
    s.steps = 1;
    const SimulatedJob job = simulate_job(profile, {link_for(0.04), link_for(0.04)}, {2, 1}, s);
    EXPECT_EQ(job.wire_bytes_per_step, engine_bytes) << "rank " << rank;
    EXPECT_EQ(job.allreduces_per_step, engine_allreduces) << "rank " << rank;
    EXPECT_LT(job.wire_bytes_per_step, 4 * 11'000'000 / 10) << "rank " << rank;
  }
}

TEST(PowerSgdSimulation, SecondAllreducesFollowTheEnginesOrder) {
  // Free arithmetic; 10 MiB takes 0.04 s, so P (1280 x 4 floats) takes tp and Q (2048 x 4) tq.
  // P0 at 0.05; P1 at 0.1, then Q0; P2 at 0.2, then Q1; after backward Q2 waits for Q1 to end:
  // it ends tp + 2 tq after backward.
  const double tp = 0.04 * 1280 * 4 * 4 / (10 * kMiB);
  const double tq = 0.04 * 2048 * 4 * 4 / (10 * kMiB);
  const SimulatedJob job =
      simulate_job(with_rate(three_layer_profile(), 1e30), {link_for(0.04), link_for(0.04)}, {2, 1},
                   powersgd_ten_mib_buckets());
  EXPECT_EQ(job.buckets, 3u);
  EXPECT_EQ(job.allreduces_per_step, 6u);
  EXPECT_EQ(job.wire_bytes_per_step, 3 * (1280 + 2048) * 4 * 4);
  EXPECT_NEAR(job.step.backward, 0.2, 1e-12);
  EXPECT_NEAR(job.step.comm_exposed, tp + 2 * tq, 1e-12);
  EXPECT_NEAR(job.comm_seconds_per_step, 3 * (tp + tq), 1e-12);
}

TEST(PowerSgdSimulation, ItsArithmeticHoldsBackwardUp) {
  // An instant link: only the arithmetic counts. Each bucket's first call (c1) runs when it is
  // ready and the second (c2) of the bucket before it right after, inside backward; after it the
  // last bucket's second call and the three last calls (c3).
  const PowerSgdBucketCost cost = powersgd_bucket_cost({{1280, 2048}}, {4, 2.0, 0});
  const double rate = 1e10;
  const double c1 = cost.first_flops / rate, c2 = cost.second_flops / rate,
               c3 = cost.finish_flops / rate;
  NetworkProfile instant = link_for(1.0);
  instant.bandwidth_bytes_per_s = 1e18;
  const SimulatedJob job = simulate_job(with_rate(three_layer_profile(), rate), {instant, instant},
                                        {2, 1}, powersgd_ten_mib_buckets());
  EXPECT_NEAR(job.step.backward, 0.2 + 3 * c1 + 2 * c2, 1e-9);
  EXPECT_NEAR(job.step.comm_exposed, c2 + 3 * c3, 1e-9);
  EXPECT_NEAR(job.compression_seconds_per_step, 3 * (c1 + c2 + c3), 1e-12);
  // The first call reads a compressed matrix where autograd made it: no copy into the bucket
  // stretches backward (plain allreduce of the same gradients copies all three).
  ComputeProfile copying = with_rate(three_layer_profile(), rate);
  copying.gradient_passes.copy_s = 0.02;
  const SimulatedJob copied =
      simulate_job(copying, {instant, instant}, {2, 1}, powersgd_ten_mib_buckets());
  EXPECT_NEAR(copied.step.backward, job.step.backward, 1e-12);
  SimulationSettings plain = powersgd_ten_mib_buckets();
  plain.compression = "none";
  EXPECT_NEAR(simulate_job(copying, {instant, instant}, {2, 1}, plain).step.backward, 0.22, 1e-9);
  // m n (6 r + 3) + Gram-Schmidt of P and Q: (3 r + 2 r (r - 1)) (m + n).
  const double m = 1280, n = 2048, r = 4;
  EXPECT_NEAR(cost.flops(), m * n * (6 * r + 3) + (3 * r + 2 * r * (r - 1)) * (m + n), 1);
}

TEST(PowerSgdSimulation, FasterWhereTheLinkIsTheBottleneck) {
  // 1 s per 10 MiB: plain allreduce exposes at least the last bucket's second; PowerSGD sends
  // 1/240 of the bytes and does its arithmetic at 10 GFLOP/s.
  const ComputeProfile p = with_rate(three_layer_profile(), 1e10);
  const Links slow{link_for(1.0), link_for(1.0)};
  SimulationSettings plain = powersgd_ten_mib_buckets();
  plain.compression = "none";
  const SimulatedJob uncompressed = simulate_job(p, slow, {4, 1}, plain);
  const SimulatedJob compressed = simulate_job(p, slow, {4, 1}, powersgd_ten_mib_buckets());
  EXPECT_GT(uncompressed.step.total, 1.0);
  EXPECT_LT(compressed.step.total, 0.5);
  EXPECT_GT(compressed.images_per_sec, 2 * uncompressed.images_per_sec);
  // On one worker nothing is sent and PowerSGD does not run.
  EXPECT_NEAR(simulate_job(p, slow, {1, 1}, powersgd_ten_mib_buckets()).step.total, 0.35, 1e-12);
}

TEST(PowerSgdSimulation, ProfilesThatCannotSayAreClearErrors) {
  const Links links{link_for(0.04), link_for(0.04)};
  ComputeProfile no_rate = three_layer_profile();
  EXPECT_NE(test_util::message_of<UsageError>([&] {
              simulate_job(no_rate, links, {2, 1}, powersgd_ten_mib_buckets());
            }).find("lacks: write it again with `chexscale bench --workers 1 --profile FILE`"),
            std::string::npos);
  ComputeProfile no_shapes = with_rate(three_layer_profile(), 1e10);
  no_shapes.parameters[1].shape.clear();
  EXPECT_NE(test_util::message_of<UsageError>([&] {
              simulate_job(no_shapes, links, {2, 1}, powersgd_ten_mib_buckets());
            }).find("needs the parameters' shapes"),
            std::string::npos);
  SimulationSettings s = powersgd_ten_mib_buckets();
  s.compression = "powersgd:0";
  EXPECT_THROW(s.validate(), UsageError);
  s.compression = "powersgd";
  s.powersgd_min_rate = -1;
  EXPECT_THROW(s.validate(), UsageError);
}

}  // namespace
}  // namespace chexscale::simulate
