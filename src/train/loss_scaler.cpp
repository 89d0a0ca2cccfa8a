// Dynamic loss scaling (see loss_scaler.h).
#include "train/loss_scaler.h"

#include <fmt/format.h>

#include "common/error.h"
#include "train/gradient_check.h"

namespace chexscale::train {

DynamicLossScaler::DynamicLossScaler(LossScalerOptions options) : options_(options) {
  if (!(options_.init_scale > 0)) {
    throw UsageError(fmt::format("loss scale {} must be > 0", options_.init_scale));
  }
  if (!(options_.growth_factor > 1)) {
    throw UsageError(
        fmt::format("loss-scale growth factor {} must be > 1", options_.growth_factor));
  }
  if (!(options_.backoff_factor > 0 && options_.backoff_factor < 1)) {
    throw UsageError(
        fmt::format("loss-scale backoff factor {} must be in (0, 1)", options_.backoff_factor));
  }
  if (options_.growth_interval < 1) {
    throw UsageError(
        fmt::format("loss-scale growth interval {} must be >= 1", options_.growth_interval));
  }
  state_.scale = options_.init_scale;
}

torch::Tensor DynamicLossScaler::scale(const torch::Tensor& loss) const {
  return loss * state_.scale;
}

void DynamicLossScaler::unscale(const std::vector<torch::Tensor>& params) const {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads = defined_gradients(params);
  // One fused multi-tensor kernel where the device has one; the reciprocal is computed in
  // double and applied as a scalar, so a power-of-two scale unscales exactly.
  if (!grads.empty()) torch::_foreach_mul_(grads, 1.0 / state_.scale);
}

void DynamicLossScaler::update(bool gradients_finite) {
  if (!gradients_finite) {
    state_.scale *= options_.backoff_factor;
    state_.good_steps = 0;
    return;
  }
  if (++state_.good_steps >= options_.growth_interval) {
    state_.scale *= options_.growth_factor;
    state_.good_steps = 0;
  }
}

void DynamicLossScaler::set_state(const LossScalerState& state) {
  if (!(state.scale > 0) || state.good_steps < 0) {
    throw DataError(fmt::format("invalid loss-scaler state (scale {}, good steps {})", state.scale,
                                state.good_steps));
  }
  state_ = state;
}

}  // namespace chexscale::train
