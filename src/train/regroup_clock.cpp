// The parts of a rank's regroup pause (see regroup_clock.h).
#include "train/regroup_clock.h"

#include <fmt/format.h>

namespace chexscale::train {

void RegroupClock::start() {
  running_ = true;
  parts_.clear();
  total_.reset();
  part_.reset();
}

void RegroupClock::lap(const std::string& name, const std::string& detail) {
  if (!running_) return;
  parts_.push_back({name, part_.seconds(), detail});
  part_.reset();
}

std::string RegroupClock::finish() {
  running_ = false;
  std::string text = fmt::format("{:.2f} s:", total_.seconds());
  for (size_t i = 0; i < parts_.size(); ++i) {
    text += fmt::format("{} {} {:.3f} s", i == 0 ? "" : ",", parts_[i].name, parts_[i].seconds);
    if (!parts_[i].detail.empty()) text += " (" + parts_[i].detail + ")";
  }
  return text;
}

}  // namespace chexscale::train
