// One data-parallel training step, shared by the trainer and `chexscale bench`: forward, loss,
// backward with overlapped gradient averaging, optimizer update, and where the time went.
//
// Options: mixed precision (--amp: autocast around the forward pass; fp16 adds a dynamic loss
// scaler around backward and the update) and channels-last layout of the model and its input.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "common/step_times.h"
#include "data/batch.h"
#include "models/classifier.h"
#include "train/loss.h"
#include "train/loss_scaler.h"
#include "train/precision.h"

namespace chexscale::distributed {
class GradientReducer;
}  // namespace chexscale::distributed

namespace chexscale::train {

// What to do when a step's loss or averaged gradients are not finite.
enum class NonFinitePolicy {
  kStop,   // throw an Error naming the step (default: a NaN usually means a bad recipe)
  kSkip,   // leave the weights untouched and carry on; counted in StepResult::skipped
  kIgnore  // no check at all (no extra pass over the gradients; benchmarks)
};

const char* to_string(NonFinitePolicy policy);
// "stop" | "skip" | "ignore"; UsageError naming `non_finite` for anything else.
NonFinitePolicy parse_non_finite_policy(std::string_view name);

struct TrainStepOptions {
  NonFinitePolicy non_finite = NonFinitePolicy::kStop;
  torch::Device device{torch::kCPU};  // where the model lives; batches are moved there
  AmpMode amp = AmpMode::kOff;        // autocast of forward (fp16: with loss scaling)
  bool channels_last = false;         // NHWC model and input (the constructor converts the model)
  bool loss_scaling = false;          // dynamic loss scaling; always on with fp16
  LossScalerOptions loss_scaler;

  // UsageError naming the field: `amp` that cannot run on `device`, or a bad loss_scaler value.
  void validate() const;
};

struct StepResult {
  double loss = 0;       // this rank's mean loss on its batch
  bool skipped = false;  // non-finite, weights not updated (kSkip, or an fp16 overflow)
  int64_t images = 0;    // examples in this rank's batch
  StepTimes times;       // data_wait is left 0: the caller owns the loader
};

class TrainStep {
 public:
  // `reducer` may be null (world size 1, or benchmarks of the local step). The model, optimizer
  // and reducer must outlive the TrainStep. The model must already be on options.device.
  // Throws UsageError when `options` are refused by TrainStepOptions::validate().
  TrainStep(models::Classifier model, torch::optim::Optimizer& optimizer, BceWithLogitsLoss loss,
            distributed::GradientReducer* reducer, TrainStepOptions options = {});

  // Runs one step on `batch`; `step` (global, 0-based) only names the step in errors.
  // `before_update`, if given, runs after the gradients are reduced and before the update (the
  // trainer waits there for the previous checkpoint's write).
  // With a reducer, every rank must call run() the same number of times.
  StepResult run(const data::Batch& batch, int64_t step,
                 const std::function<void()>& before_update = nullptr);
  // One forward and backward pass on `batch` without an update, the gradients dropped after:
  // kernels, allocator and autograd's threads warmed before a first step. Only without a
  // reducer (its hooks would start collectives). BatchNorm's running statistics move: the
  // caller puts them back if they count.
  void warm_up(const data::Batch& batch);

  const TrainStepOptions& options() const { return options_; }
  // The dynamic loss scaler (null without loss scaling), e.g. for checkpoints.
  DynamicLossScaler* loss_scaler() { return scaler_.get(); }

 private:
  struct DeviceBatch {
    torch::Tensor images;
    torch::Tensor labels;
  };
  DeviceBatch prepare_input(const data::Batch& batch) const;
  torch::Tensor forward_loss(const DeviceBatch& input);
  // Backward with the reducer's hooks armed; returns the exposed communication seconds.
  double backward(const torch::Tensor& loss);
  // Whether to apply this step's update, by the non-finite policy and, with fp16, the loss
  // scaler (which it updates); throws for kStop. Decided on the averaged gradients, identical on
  // every rank after the reducer, so that every rank decides alike.
  bool update_allowed(double loss, int64_t step);
  // Before forward: gradients zeroed in place with a reducer, else released (set_to_none).
  void clear_gradients();
  void apply_update();
  void wait_for_device() const;

  models::Classifier model_;
  torch::optim::Optimizer& optimizer_;
  BceWithLogitsLoss loss_;
  distributed::GradientReducer* reducer_;
  TrainStepOptions options_;
  std::vector<torch::Tensor> parameters_;
  std::unique_ptr<DynamicLossScaler> scaler_;
};

}  // namespace chexscale::train
