// Bucketed, overlapped gradient averaging (DDP's reducer): gradients are packed into buckets of
// about bucket_mb in reverse registration order; a bucket's allreduce starts from autograd hooks
// as soon as its last gradient is ready, overlapping the rest of backward. finish() waits and
// averages (never before the wait).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "distributed/context.h"

namespace chexscale {
class TimelineWriter;  // common/timeline.h: optional Chrome-trace of bucket allreduces
}  // namespace chexscale

namespace chexscale::distributed {

struct ReducerOptions {
  double bucket_mb = 25.0;
  double first_bucket_mb = 1.0;
  bool overlap = true;               // false: one allreduce pass after backward (for comparison)
  std::string compression = "none";  // none | fp16 | bf16
};

// Throws UsageError naming the flag for a bucket size <= 0 or an unknown compression, so a job
// of one rank (which builds no reducer) refuses the values a job of several would.
void check_reducer_options(const ReducerOptions& options);

class GradientReducer {
 public:
  GradientReducer(std::shared_ptr<DistContext> ctx, std::vector<torch::Tensor> parameters,
                  ReducerOptions options, TimelineWriter* timeline = nullptr);
  ~GradientReducer();

  // Call before loss.backward(): arms the hooks for this iteration.
  void prepare_for_backward();
  // Call after loss.backward(): waits for every bucket, writes averaged gradients into .grad().
  // Returns the seconds spent waiting here (exposed communication).
  double finish();

  size_t num_buckets() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chexscale::distributed
