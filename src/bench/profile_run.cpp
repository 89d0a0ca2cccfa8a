// Building a compute profile from a profiled bench run (see profile_run.h).
#include "bench/profile_run.h"

#include <algorithm>

#include "common/error.h"

namespace chexscale::bench {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

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
    p.parameters.push_back(g);
  }
  return p;
}

}  // namespace chexscale::bench
