// Dynamic loss scaling (see loss_scaler.h).
#include "train/loss_scaler.h"

#include <fmt/format.h>

#include "common/error.h"
#include "train/gradient_check.h"

namespace chexscale::train {

void LossScalerOptions::validate() const {
  if (!(init_scale > 0)) {
    throw UsageError(fmt::format("init_scale {} must be > 0", init_scale));
  }
  if (!(growth_factor > 1)) {
    throw UsageError(fmt::format("growth_factor {} must be > 1", growth_factor));
  }
  if (!(backoff_factor > 0 && backoff_factor < 1)) {
    throw UsageError(fmt::format("backoff_factor {} must be in (0, 1)", backoff_factor));
  }
  if (growth_interval < 1) {
    throw UsageError(fmt::format("growth_interval {} must be >= 1", growth_interval));
  }
}

DynamicLossScaler::DynamicLossScaler(LossScalerOptions options) : options_(options) {
  options_.validate();
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
