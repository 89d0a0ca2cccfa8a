// Building a compute profile from a profiled bench run (see profile_run.h).
#include "measure/profile_run.h"

#include <c10/util/accumulate.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>

#include "common/cpu_quota.h"
#include "common/error.h"
#include "common/timer.h"
#include "distributed/bucket_plan.h"
#include "distributed/powersgd.h"
#include "distributed/reducer.h"
#include "simulate/powersgd_cost.h"

namespace chexscale::measure {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

constexpr double kMiB = 1024.0 * 1024.0;
constexpr int kPowerSgdSteps = 3;  // timed, after one that draws the first Q
constexpr int kPassRepeats = 5;    // timed repetitions of each gradient pass, after one

// The reducer's default bucket plan of float32 gradients of these shapes.
std::vector<std::vector<size_t>> default_buckets(const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<int64_t> bytes;
  for (const auto& shape : shapes)
    bytes.push_back(4 * c10::multiply_integers(shape));
  return distributed::plan_buckets_by_size(
      bytes, std::vector<int>(bytes.size(), 0),
      static_cast<int64_t>(distributed::kDefaultFirstBucketMb * kMiB),
      static_cast<int64_t>(distributed::kDefaultBucketMb * kMiB));
}

// Median seconds of `pass` over kPassRepeats runs after an untimed one.
template <typename Pass>
double median_seconds(Pass&& pass) {
  pass();
  std::vector<double> seconds;
  for (int i = 0; i < kPassRepeats; ++i) {
    Stopwatch watch;
    pass();
    seconds.push_back(watch.seconds());
  }
  return median(seconds);
}

}  // namespace

double measure_powersgd_flops_per_s(const std::vector<std::vector<int64_t>>& shapes) {
  torch::NoGradGuard no_grad;
  const auto plan = default_buckets(shapes);
  distributed::PowerSgdOptions options;
  options.rank = distributed::kDefaultPowerSgdRank;
  options.min_rate = distributed::kDefaultPowerSgdMinRate;
  std::vector<std::unique_ptr<distributed::PowerSgdBucket>> buckets;
  double flops = 0;
  for (const auto& members : plan) {
    std::vector<torch::Tensor> slots;
    std::vector<std::vector<int64_t>> bucket_shapes;
    for (size_t i : members) {
      slots.push_back(torch::randn(shapes[i]) * 1e-3);
      bucket_shapes.push_back(shapes[i]);
    }
    const simulate::PowerSgdBucketCost cost =
        simulate::powersgd_bucket_cost(bucket_shapes, options);
    if (!cost.compressed) continue;
    flops += cost.flops();
    buckets.push_back(std::make_unique<distributed::PowerSgdBucket>(slots, members, options));
  }
  if (buckets.empty()) return 0;
  std::vector<double> seconds;
  for (int step = 0; step <= kPowerSgdSteps; ++step) {
    Stopwatch watch;
    for (const auto& b : buckets) {
      b->first_payload(1.0);
      b->second_payload(1);
      b->finish(1, 1.0);
    }
    if (step > 0) seconds.push_back(watch.seconds());
  }
  return flops / median(seconds);
}

simulate::GradientPasses measure_gradient_passes(const std::vector<std::vector<int64_t>>& shapes) {
  torch::NoGradGuard no_grad;
  struct Bucket {
    torch::Tensor flat, wire;
    std::vector<torch::Tensor> slots, fresh;  // the slots, and a new gradient for each
  };
  std::vector<Bucket> buckets;
  for (const auto& members : default_buckets(shapes)) {
    int64_t numel = 0;
    for (size_t i : members)
      numel += c10::multiply_integers(shapes[i]);
    Bucket b;
    b.flat = torch::zeros({numel});
    b.wire = torch::empty({numel}, torch::kHalf);
    int64_t offset = 0;
    for (size_t i : members) {
      const int64_t n = c10::multiply_integers(shapes[i]);
      b.slots.push_back(b.flat.narrow(0, offset, n).view(shapes[i]));
      b.fresh.push_back(torch::randn(shapes[i]) * 1e-3);
      offset += n;
    }
    buckets.push_back(std::move(b));
  }
  simulate::GradientPasses passes;
  passes.copy_s = median_seconds([&] {  // autograd's gradients into their slots
    for (Bucket& b : buckets)
      for (size_t k = 0; k < b.slots.size(); ++k)
        b.slots[k].copy_(b.fresh[k]);
  });
  passes.average_s = median_seconds([&] {
    for (Bucket& b : buckets)
      b.flat.div_(2.0);
  });
  passes.casts_s = median_seconds([&] {
    for (Bucket& b : buckets) {
      b.wire.copy_(b.flat);
      b.flat.copy_(b.wire);
    }
  });
  return passes;
}

simulate::ComputeProfile make_compute_profile(const report::BenchResult& result,
                                              const GradientReadyLog& log) {
  CHX_CHECK(result.world_size == 1, "a compute profile is of one worker, not {}",
            result.world_size);
  CHX_CHECK(!log.ready_us.empty() && log.ready_us.size() == log.backward_start_us.size() &&
                log.step_seconds.size() == log.ready_us.size(),
            "the gradient-ready log has {} steps, {} step times", log.ready_us.size(),
            log.step_seconds.size());
  simulate::ComputeProfile p;
  p.arch = result.arch;
  p.image_size = result.image_size;
  p.batch_per_worker = result.batch_per_worker;
  p.threads_per_worker = result.threads_per_worker;
  p.cpu_quota_cores = cgroup_cpu_quota_cores();
  p.device = result.device;
  p.amp = result.amp;
  p.channels_last = result.channels_last;
  p.data_wait_s = result.breakdown.data_wait;
  p.forward_s = result.breakdown.forward;
  p.backward_s = result.breakdown.backward;
  p.optimizer_s = result.breakdown.optimizer;
  p.step_s = median(log.step_seconds);
  for (double s : log.step_seconds)
    p.step_spread.push_back(s / p.step_s);
  for (size_t i = 0; i < log.parameter_bytes.size(); ++i) {
    std::vector<double> ready;
    for (size_t k = 0; k < log.ready_us.size(); ++k) {
      const int64_t at = log.ready_us[k][i];
      if (at == 0) continue;  // no gradient this step (a frozen or unused parameter)
      ready.push_back(std::max(0.0, static_cast<double>(at - log.backward_start_us[k]) * 1e-6));
    }
    simulate::GradientReady g;
    g.bytes = log.parameter_bytes[i];
    g.ready_s = ready.empty() ? p.backward_s : std::min(median(ready), p.backward_s);
    if (i < log.parameter_shapes.size()) g.shape = log.parameter_shapes[i];
    p.parameters.push_back(g);
  }
  if (p.device == "cpu" && p.has_shapes()) {
    p.powersgd_flops_per_s = measure_powersgd_flops_per_s(log.parameter_shapes);
    p.gradient_passes = measure_gradient_passes(log.parameter_shapes);
  }
  return p;
}

}  // namespace chexscale::measure
