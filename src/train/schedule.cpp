// Warm-up, linear scaling and ReduceLROnPlateau (see schedule.h).
#include "train/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace chexscale::train {

void ScheduleOptions::validate() const {
  // Written so that NaN fails every check.
  if (!(base_lr > 0) || std::isinf(base_lr)) {
    throw UsageError(fmt::format("base_lr {} must be a positive number", base_lr));
  }
  if (world_size < 1) {
    throw UsageError(fmt::format("world_size must be at least 1, got {}", world_size));
  }
  if (!(warmup_epochs >= 0) || std::isinf(warmup_epochs)) {
    throw UsageError(fmt::format("warmup_epochs {} must be a number >= 0", warmup_epochs));
  }
  if (!(plateau_factor > 0 && plateau_factor < 1)) {
    throw UsageError(fmt::format("plateau_factor {} must be in (0, 1)", plateau_factor));
  }
  if (plateau_patience < 0) {
    throw UsageError(fmt::format("plateau_patience {} must be >= 0", plateau_patience));
  }
}

LrSchedule::LrSchedule(ScheduleOptions options, PlateauState state)
    : options_(options), state_(state) {
  options_.validate();
}

double LrSchedule::target_lr() const {
  return options_.base_lr * (options_.scale_lr ? options_.world_size : 1);
}

double LrSchedule::lr_at(double epoch_progress) const {
  double lr = target_lr();
  if (options_.warmup_epochs > 0 && epoch_progress < options_.warmup_epochs) {
    const double start = options_.scale_lr && options_.world_size > 1 ? options_.base_lr : 0.0;
    lr = start + (lr - start) * std::max(0.0, epoch_progress) / options_.warmup_epochs;
  }
  return std::max(options_.min_lr, lr * state_.factor);
}

bool LrSchedule::observe_val_loss(double loss) {
  if (!state_.best_loss || loss < *state_.best_loss * (1 - options_.plateau_threshold)) {
    state_.best_loss = loss;
    state_.bad_epochs = 0;
    return false;
  }
  if (++state_.bad_epochs <= options_.plateau_patience) return false;
  state_.factor *= options_.plateau_factor;
  state_.bad_epochs = 0;
  return true;
}

}  // namespace chexscale::train
