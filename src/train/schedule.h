// The learning-rate schedule: linear scaling with the world size and warm-up over the first
// epochs (Horovod's recipe), times a ReduceLROnPlateau factor driven by the validation loss
// (CheXNet's recipe: divide by 10 when the loss stops improving).
#pragma once

#include <cstdint>
#include <optional>

#include "train/optimizer.h"

namespace chexscale::train {

struct ScheduleOptions {
  double base_lr = kDefaultLearningRate;  // per-worker learning rate (the single-worker recipe's)
  bool scale_lr = false;                  // multiply by the world size (linear scaling rule)
  int world_size = 1;
  double warmup_epochs = 0;         // ramp to the target lr over this many epochs (0 = none)
  double plateau_factor = 0.1;      // multiply the lr by this when the val loss plateaus
  int plateau_patience = 1;         // epochs without improvement tolerated before reducing
  double plateau_threshold = 1e-4;  // relative improvement that counts (PyTorch's default)
  double min_lr = 0;

  // UsageError naming the field of the first value out of range (NaN included).
  void validate() const;
};

// Plateau state, saved in checkpoints so a resumed run reduces the lr at the same epochs.
struct PlateauState {
  std::optional<double> best_loss;
  int bad_epochs = 0;
  double factor = 1.0;  // product of the reductions so far
};

class LrSchedule {
 public:
  explicit LrSchedule(ScheduleOptions options, PlateauState state = {});

  // The lr after the warm-up: base_lr, times the world size when scaling.
  double target_lr() const;
  // The lr for an optimizer step taken at `epoch_progress` epochs into training (fractional;
  // e.g. 2.5 = half-way through the third epoch, counted after the step). Horovod's warm-up
  // starts from the unscaled lr when scaling with more than one worker, else from 0.
  double lr_at(double epoch_progress) const;
  // Records an epoch's validation loss; returns true when the lr was reduced.
  bool observe_val_loss(double loss);

  const PlateauState& state() const { return state_; }

 private:
  ScheduleOptions options_;
  PlateauState state_;
};

}  // namespace chexscale::train
