// Dynamic loss scaling for fp16 training (torch.cuda.amp.GradScaler's rules): the loss is
// multiplied by a scale before backward so that small fp16 gradients do not flush to zero; the
// gradients are divided by it before the update; a step whose gradients overflowed is skipped and
// the scale halved; after `growth_interval` good steps in a row the scale doubles.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace chexscale::train {

struct LossScalerOptions {
  double init_scale = 65536.0;  // 2^16, GradScaler's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // good steps in a row before the scale grows

  // UsageError naming the field of the first value out of range.
  void validate() const;
};

// The scaler's state, for checkpoints.
struct LossScalerState {
  double scale = 0;
  int64_t good_steps = 0;  // since the last growth or backoff
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(LossScalerOptions options = {});

  // loss * scale, the tensor to call backward() on.
  torch::Tensor scale(const torch::Tensor& loss) const;
  // Divides every defined gradient of `params` by the scale, in place. Overflowed gradients stay
  // inf/nan, so a finiteness check afterwards sees them.
  void unscale(const std::vector<torch::Tensor>& params) const;
  // Records whether the step's (unscaled) gradients were all finite: false halves the scale and
  // restarts the count of good steps; the growth_interval-th good step in a row doubles it.
  // With data parallelism every rank must pass the same value (decide on averaged gradients).
  void update(bool gradients_finite);

  double current_scale() const { return state_.scale; }
  LossScalerState state() const { return state_; }
  void set_state(const LossScalerState& state);

 private:
  LossScalerOptions options_;
  LossScalerState state_;
};

}  // namespace chexscale::train
