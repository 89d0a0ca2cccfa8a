// The schedule and the choice of --hierarchical=auto (hierarchical_trial.h).
#include "distributed/hierarchical_trial.h"

#include "common/error.h"

namespace chexscale::distributed {
namespace {

// The path of each trial step: a warm-up step on each path (untimed), then flat, hierarchical,
// hierarchical, flat.
constexpr std::array<bool, HierarchicalTrial::kSteps> kSchedule{false, true, false,
                                                                true,  true, false};

}  // namespace

bool HierarchicalTrial::next_hierarchical() const {
  if (choice_) return *choice_;
  return kSchedule[static_cast<size_t>(step_ < kSteps ? step_ : kSteps - 1)];
}

bool HierarchicalTrial::record(double seconds) {
  if (choice_ || step_ >= kSteps) return false;
  const bool hierarchical = kSchedule[static_cast<size_t>(step_)];
  if (step_ >= kWarmSteps) totals_[hierarchical ? 1 : 0] += seconds;
  return ++step_ == kSteps;
}

void HierarchicalTrial::decide(double flat_s, double hierarchical_s) {
  if (step_ < kSteps) throw Error("HierarchicalTrial: decide() before the trial's last step");
  choice_ = hierarchical_s < (1 - kMarginPercent / 100.0) * flat_s;
}

}  // namespace chexscale::distributed
