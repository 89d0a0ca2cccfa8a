// One training step with a phase breakdown (see step.h).
#include "train/step.h"

#include <torch/cuda.h>

#include <cmath>

#include "common/error.h"
#include "common/log.h"
#include "common/timer.h"
#include "dist/reducer.h"

namespace chexscale::train {

TrainStep::TrainStep(models::Classifier model, torch::optim::Optimizer& optimizer,
                     BceWithLogitsLoss loss, dist::GradientReducer* reducer,
                     TrainStepOptions options)
    : model_(std::move(model)),
      optimizer_(optimizer),
      loss_(std::move(loss)),
      reducer_(reducer),
      options_(options),
      parameters_(model_->parameters()) {
  CHX_CHECK(model_ != nullptr, "TrainStep needs a model");
  loss_.to(options_.device);
}

void TrainStep::wait_for_device() const {
  // Kernels run asynchronously on a GPU: a phase ends when its kernels have finished.
  if (options_.device.is_cuda()) torch::cuda::synchronize(options_.device.index());
}

TrainStep::DeviceBatch TrainStep::prepare_input(const data::Batch& batch) const {
  CHX_CHECK(batch.images.defined() && batch.labels.defined(), "empty batch");
  CHX_CHECK_EQ(batch.images.size(0), batch.labels.size(0), "images vs labels in a batch");
  return {batch.images.to(options_.device, /*non_blocking=*/true),
          batch.labels.to(options_.device, torch::kFloat32, /*non_blocking=*/true)};
}

torch::Tensor TrainStep::forward_loss(const DeviceBatch& input) {
  return loss_(model_->forward(input.images), input.labels);
}

double TrainStep::backward(const torch::Tensor& loss) {
  if (reducer_ != nullptr) reducer_->prepare_for_backward();
  loss.backward();
  return reducer_ != nullptr ? reducer_->finish() : 0.0;
}

bool TrainStep::gradients_finite() const {
  std::vector<torch::Tensor> sums;
  sums.reserve(parameters_.size());
  for (const auto& p : parameters_) {
    if (p.grad().defined()) sums.push_back(p.grad().sum());
  }
  if (sums.empty()) return true;
  return torch::stack(sums).sum().isfinite().item<bool>();
}

void TrainStep::apply_update() {
  optimizer_.step();
}

StepResult TrainStep::run(const data::Batch& batch, int64_t step) {
  StepResult result;
  Stopwatch total;
  model_->train();
  const DeviceBatch input = prepare_input(batch);
  result.images = input.images.size(0);

  Stopwatch phase;
  optimizer_.zero_grad();
  const torch::Tensor loss = forward_loss(input);
  wait_for_device();
  result.times.forward = phase.seconds();

  phase.reset();
  result.times.comm_exposed = backward(loss);
  wait_for_device();
  result.times.backward = phase.seconds() - result.times.comm_exposed;
  result.loss = loss.item<double>();

  phase.reset();
  if (options_.non_finite != NonFinitePolicy::kIgnore) {
    // Skipping must be decided alike on every rank: on the averaged gradients, which are
    // identical everywhere. Stopping may be local (one rank's error ends the job).
    const bool use_loss = reducer_ == nullptr || options_.non_finite == NonFinitePolicy::kStop;
    const bool finite = gradients_finite() && (!use_loss || std::isfinite(result.loss));
    if (!finite) {
      if (options_.non_finite == NonFinitePolicy::kStop) {
        throw Error(fmt::format(
            "step {}: non-finite loss or gradients (loss {}); lower the learning rate, check the "
            "data, or pass --on-nan skip",
            step, result.loss));
      }
      log::warn("step {}: non-finite loss or gradients (loss {}): step skipped", step, result.loss);
      result.skipped = true;
    }
  }
  if (!result.skipped) apply_update();
  wait_for_device();
  result.times.optimizer = phase.seconds();
  result.times.total = total.seconds();
  return result;
}

}  // namespace chexscale::train
