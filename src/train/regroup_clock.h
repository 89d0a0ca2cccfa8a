// Where one rank's pause in an in-place regroup goes (--elastic in-place): the time of each part,
// from leaving a round to the end of the first step in the next, for the line each regroup logs.
#pragma once

#include <string>
#include <vector>

#include "common/timer.h"

namespace chexscale::train {

class RegroupClock {
 public:
  // The rank leaves its round (a newcomer: is ready in standby); the parts start afresh.
  void start();
  // The part `name` (with `detail`, e.g. "134.2 MB") ends now; it began when the one before
  // ended. Nothing when the clock is not running (a run's first round).
  void lap(const std::string& name, const std::string& detail = "");
  bool running() const { return running_; }
  double seconds() const { return total_.seconds(); }
  // "1.23 s: place 0.10 s, group 0.20 s, state 0.30 s (134.2 MB), ...", and the clock stops.
  std::string finish();

 private:
  struct Part {
    std::string name;
    double seconds = 0;
    std::string detail;
  };
  bool running_ = false;
  Stopwatch total_;
  Stopwatch part_;
  std::vector<Part> parts_;
};

}  // namespace chexscale::train
