// Bucketed, overlapped gradient averaging (DDP's reducer): gradients are packed into buckets of
// about bucket_mb in reverse registration order; a bucket's allreduce starts from autograd hooks
// as soon as its last gradient is ready, overlapping the rest of backward. finish() waits and
// averages (never before the wait).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "distributed/context.h"
#include "distributed/reducer_defaults.h"

namespace chexscale {
class TimelineWriter;  // common/timeline.h: optional Chrome-trace of bucket allreduces
}  // namespace chexscale

namespace chexscale::distributed {

// What a gradient bucket sends: as computed, halved to fp16 / bf16, or PowerSGD's low-rank
// factors with error feedback (see powersgd.h).
enum class Compression { kNone, kFp16, kBf16, kPowerSgd };

const char* to_string(Compression compression);        // "none", "fp16", "bf16", "powersgd"
Compression parse_compression(std::string_view text);  // UsageError naming the valid values

struct ReducerOptions {
  double bucket_mb = kDefaultBucketMb;
  double first_bucket_mb = kDefaultFirstBucketMb;
  bool overlap = true;  // false: one allreduce pass after backward (for comparison)
  // Allreduce the buckets through node shared memory when every rank is on one node (Gloo on
  // CPU; shared_memory_allreduce.h); false: over the process group (for comparison).
  bool shared_memory = true;
  Compression compression = Compression::kNone;
  // PowerSGD only: the rank of each matrix's approximation, the steps of plain allreduce before
  // compressing, and the compression rate (elements / (rows + cols) * rank) below which a matrix
  // travels uncompressed.
  int powersgd_rank = kDefaultPowerSgdRank;
  int64_t powersgd_start_step = kDefaultPowerSgdStartStep;
  double powersgd_min_rate = kDefaultPowerSgdMinRate;

  // Throws UsageError naming the field for a bucket size that is not > 0 or a PowerSGD setting
  // out of range, so a job of one rank (which builds no reducer) refuses the values a job of
  // several would.
  void validate() const;
};

// Sets compression (and powersgd_rank) from "none", "fp16", "bf16", "powersgd" or
// "powersgd:RANK"; UsageError naming `compression` for anything else.
void set_compression(ReducerOptions& options, std::string_view text);
// The text set_compression() reads back to the same options: "powersgd:4", "fp16", ...
std::string compression_spec(const ReducerOptions& options);

// PowerSGD's state, for a checkpoint (see GradientReducer::compression_state()).
struct CompressionState {
  int64_t steps = 0;  // reducer steps finished (plain allreduce ones included)
  int world_size = 0;
  int rank = 0;  // the approximation rank
  // "q.<parameter index>" (the warm start, equal on every rank) and
  // "residual.<rank>.<parameter index>" (each rank's error feedback), in the parameters' shapes.
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
};

class GradientReducer {
 public:
  GradientReducer(std::shared_ptr<DistContext> ctx, std::vector<torch::Tensor> parameters,
                  ReducerOptions options, TimelineWriter* timeline = nullptr);
  ~GradientReducer();
  // Stops filling buckets from backward (its hooks removed) while the buffers stay: a reducer
  // whose collective failed is kept this way until the process ends, since the lost process
  // group's threads may still hold its buffers (--elastic in-place).
  void detach();

  // Call before loss.backward(): arms the hooks for this iteration. `loss_scale` is the factor the
  // loss is multiplied by before backward (AMP's loss scaler), so that PowerSGD's residuals stay
  // in unscaled units when the scale changes.
  void prepare_for_backward(double loss_scale = 1.0);
  // Call after loss.backward(): waits for every bucket, writes averaged gradients into .grad().
  // Returns the seconds spent waiting here (exposed communication).
  double finish();

  size_t num_buckets() const;
  // True when the buckets are allreduced through node shared memory.
  bool shared_memory() const;

  // PowerSGD only (nullopt otherwise). Collective: every rank calls it after the same step; rank 0
  // gets every rank's residuals, the others their own.
  std::optional<CompressionState> compression_state();
  // PowerSGD only (nullopt otherwise): the part of its state that every rank holds alike (the
  // steps and each started matrix's warm start Q, no residuals). Not collective: for the proof
  // that the ranks agree (--elastic in-place).
  std::optional<CompressionState> common_compression_state() const;
  // Puts a checkpoint's state back (every rank, before the first step). From another world size
  // or approximation rank only the step count is kept: the warm start and the residuals restart,
  // and a warning says so.
  void restore_compression_state(const CompressionState& state);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chexscale::distributed
