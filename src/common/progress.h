// Progress for long work: a redrawn bar on a terminal, periodic plain lines otherwise.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/timer.h"

namespace chexscale {

class ProgressReporter {
 public:
  // `total` may be 0 when unknown. `unit` names what is counted ("images", "steps").
  ProgressReporter(std::string label, int64_t total, std::string unit, FILE* out = stderr,
                   double plain_interval_s = 10.0);

  // Sets the count done so far and an optional suffix ("loss 0.231").
  void update(int64_t done, const std::string& suffix = "");
  // Prints the final line (always, on a terminal or not).
  void finish(const std::string& suffix = "");

  // "1h02m", "3m05s", "12s".
  static std::string format_duration(double seconds);

 private:
  std::string line(int64_t done, const std::string& suffix) const;

  std::string label_;
  int64_t total_;
  std::string unit_;
  FILE* out_;
  bool tty_;
  double interval_s_;
  double last_print_s_ = -1e9;
  int64_t done_ = 0;
  Stopwatch clock_;
};

}  // namespace chexscale
