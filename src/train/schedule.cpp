// Warm-up, linear scaling and ReduceLROnPlateau (see schedule.h).
#include "train/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace chexscale::train {

LrSchedule::LrSchedule(ScheduleOptions options, PlateauState state)
    : options_(options), state_(state) {
  // Written so that NaN fails every check.
  if (!(options_.base_lr > 0) || std::isinf(options_.base_lr)) {
    throw UsageError(fmt::format("--lr {} must be a positive number", options_.base_lr));
  }
  if (options_.world_size < 1) throw UsageError("world size must be at least 1");
  if (!(options_.warmup_epochs >= 0) || std::isinf(options_.warmup_epochs)) {
    throw UsageError(
        fmt::format("--warmup-epochs {} must be a number >= 0", options_.warmup_epochs));
  }
  if (!(options_.plateau_factor > 0 && options_.plateau_factor < 1)) {
    throw UsageError("the plateau factor must be in (0, 1)");
  }
  if (options_.plateau_patience < 0) throw UsageError("the plateau patience must be >= 0");
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
