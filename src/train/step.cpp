// One training step with a phase breakdown (see step.h).
#include "train/step.h"

#include <torch/cuda.h>

#include <cmath>
#include <string>

#include "common/enum_parse.h"
#include "common/error.h"
#include "common/log.h"
#include "common/timer.h"
#include "distributed/reducer.h"
#include "train/channels_last.h"
#include "train/gradient_check.h"

namespace chexscale::train {

const char* to_string(NonFinitePolicy policy) {
  switch (policy) {
    case NonFinitePolicy::kSkip:
      return "skip";
    case NonFinitePolicy::kIgnore:
      return "ignore";
    case NonFinitePolicy::kStop:
      break;
  }
  return "stop";
}

NonFinitePolicy parse_non_finite_policy(std::string_view name) {
  return parse_enum(name, "non_finite",
                    {NonFinitePolicy::kStop, NonFinitePolicy::kSkip, NonFinitePolicy::kIgnore});
}

void TrainStepOptions::validate() const {
  check_amp_supported(amp, device);
  loss_scaler.validate();
}

TrainStep::TrainStep(models::Classifier model, torch::optim::Optimizer& optimizer,
                     BceWithLogitsLoss loss, distributed::GradientReducer* reducer,
                     TrainStepOptions options)
    : model_(std::move(model)),
      optimizer_(optimizer),
      loss_(std::move(loss)),
      reducer_(reducer),
      options_(options),
      parameters_(model_->parameters()) {
  CHX_CHECK(model_ != nullptr, "TrainStep needs a model");
  options_.validate();
  if (options_.channels_last) convert_to_channels_last(*model_);
  if (options_.amp == AmpMode::kFp16 || options_.loss_scaling) {
    scaler_ = std::make_unique<DynamicLossScaler>(options_.loss_scaler);
  }
  loss_.to(options_.device);
}

void TrainStep::wait_for_device() const {
  // Kernels run asynchronously on a GPU: a phase ends when its kernels have finished.
  if (options_.device.is_cuda()) torch::cuda::synchronize(options_.device.index());
}

TrainStep::DeviceBatch TrainStep::prepare_input(const data::Batch& batch) const {
  CHX_CHECK(batch.images.defined() && batch.labels.defined(), "empty batch");
  CHX_CHECK_EQ(batch.images.size(0), batch.labels.size(0), "images vs labels in a batch");
  // Non-blocking: asynchronous when the loader pinned the batch and the device is a GPU.
  torch::Tensor images = batch.images.to(options_.device, /*non_blocking=*/true);
  if (options_.channels_last) images = to_channels_last(images);
  return {images, batch.labels.to(options_.device, torch::kFloat32, /*non_blocking=*/true)};
}

torch::Tensor TrainStep::forward_loss(const DeviceBatch& input) {
  torch::Tensor logits;
  try {
    const AutocastScope autocast(options_.amp, options_.device);
    logits = model_->forward(input.images);
  } catch (const c10::Error& e) {
    // BatchNorm cannot train on one value per channel: a batch of one image whose features
    // shrink to 1x1 (a small image size). Said in the user's terms, not LibTorch's.
    if (std::string(e.what_without_backtrace()).find("more than 1 value per channel") ==
        std::string::npos) {
      throw;
    }
    throw UsageError(fmt::format(
        "a training batch of {} image(s) of {}x{} px leaves BatchNorm one value per channel, "
        "which it cannot train on; an epoch's last batch on each worker holds the images left "
        "over by the batch size: choose a --batch-size that leaves none or more than one, or a "
        "larger --crop-size",
        input.images.size(0), input.images.size(-2), input.images.size(-1)));
  }
  // The loss in fp32 whatever the forward pass ran in (autocast would run it in fp32 too).
  return loss_(logits.to(torch::kFloat32), input.labels);
}

double TrainStep::backward(const torch::Tensor& loss) {
  if (reducer_ != nullptr) reducer_->prepare_for_backward(scaler_ ? scaler_->current_scale() : 1.0);
  (scaler_ ? scaler_->scale(loss) : loss).backward();
  return reducer_ != nullptr ? reducer_->finish() : 0.0;
}

bool TrainStep::update_allowed(double loss, int64_t step) {
  const bool check = options_.non_finite != NonFinitePolicy::kIgnore;
  if (!check && !scaler_) return true;
  // Skipping must be decided alike on every rank: on the averaged gradients, which are
  // identical everywhere. Stopping may be local (one rank's error ends the job).
  const bool grads_finite = gradients_finite(parameters_);
  if (scaler_) {
    const double scale = scaler_->current_scale();
    scaler_->update(grads_finite);
    if (!grads_finite && std::isfinite(loss)) {
      // An overflow at this scale: the scaler's normal operation, not a bad recipe.
      log::debug(
          "step {}: scaled gradients overflowed at loss scale {}: step skipped, scale now {}", step,
          scale, scaler_->current_scale());
      return false;
    }
    if (!check) return grads_finite;
  }
  const bool use_loss = reducer_ == nullptr || options_.non_finite == NonFinitePolicy::kStop;
  if (grads_finite && (!use_loss || std::isfinite(loss))) return true;
  if (options_.non_finite == NonFinitePolicy::kStop) {
    throw Error(fmt::format(
        "step {}: non-finite loss or gradients (loss {}); lower the learning rate, check the "
        "data, or pass --on-nan skip",
        step, loss));
  }
  log::warn("step {}: non-finite loss or gradients (loss {}): step skipped", step, loss);
  return false;
}

void TrainStep::clear_gradients() {
  // set_to_none (PyTorch's default since 2.0): backward then makes fresh gradients instead of
  // zeroing every gradient and adding into it, two passes over memory fewer; a reducer copies
  // each into its bucket slot in its hook, while it is in cache (distributed/reducer.cpp).
  for (auto& p : parameters_)
    p.mutable_grad().reset();
}

void TrainStep::apply_update() {
  optimizer_.step();
}

void TrainStep::warm_up(const data::Batch& batch) {
  CHX_CHECK(reducer_ == nullptr, "a warm-up step runs without a gradient reducer");
  model_->train();
  clear_gradients();
  backward(forward_loss(prepare_input(batch)));
  wait_for_device();
  clear_gradients();
}

StepResult TrainStep::run(const data::Batch& batch, int64_t step,
                          const std::function<void()>& before_update) {
  StepResult result;
  Stopwatch total;
  model_->train();
  const DeviceBatch input = prepare_input(batch);
  result.images = input.images.size(0);

  Stopwatch phase;
  clear_gradients();
  const torch::Tensor loss = forward_loss(input);
  wait_for_device();
  result.times.forward = phase.seconds();

  phase.reset();
  result.times.comm_exposed = backward(loss);
  wait_for_device();
  result.times.backward = phase.seconds() - result.times.comm_exposed;
  result.loss = loss.item<double>();

  phase.reset();
  if (scaler_) scaler_->unscale(parameters_);
  result.skipped = !update_allowed(result.loss, step);
  if (before_update) before_update();
  if (!result.skipped) apply_update();
  wait_for_device();
  result.times.optimizer = phase.seconds();
  result.times.total = total.seconds();
  return result;
}

}  // namespace chexscale::train
