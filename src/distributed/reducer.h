// Bucketed, overlapped gradient averaging (DDP's reducer): gradients are packed into buckets of
// about bucket_mb in reverse registration order; a bucket's allreduce starts from autograd hooks
// as soon as its last gradient is ready, overlapping the rest of backward. finish() waits and
// averages (never before the wait).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string_view>
#include <vector>

#include "distributed/context.h"

namespace chexscale {
class TimelineWriter;  // common/timeline.h: optional Chrome-trace of bucket allreduces
}  // namespace chexscale

namespace chexscale::distributed {

// The payload type of a gradient bucket on the wire: as computed, or halved to fp16 / bf16.
enum class Compression { kNone, kFp16, kBf16 };

const char* to_string(Compression compression);        // "none", "fp16", "bf16"
Compression parse_compression(std::string_view text);  // UsageError naming the valid values

// DDP's bucket sizes (c10d's kDefaultBucketBytesCap and kDefaultFirstBucketBytes).
inline constexpr double kDefaultBucketMb = 25.0;
inline constexpr double kDefaultFirstBucketMb = 1.0;

struct ReducerOptions {
  double bucket_mb = kDefaultBucketMb;
  double first_bucket_mb = kDefaultFirstBucketMb;
  bool overlap = true;  // false: one allreduce pass after backward (for comparison)
  Compression compression = Compression::kNone;

  // Throws UsageError naming the field for a bucket size that is not > 0, so a job of one rank
  // (which builds no reducer) refuses the values a job of several would.
  void validate() const;
};

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
