// Progress lines with rate and ETA (see progress.h).
#include "common/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>

namespace chexscale {

ProgressReporter::ProgressReporter(std::string label, int64_t total, std::string unit, FILE* out,
                                   double plain_interval_s)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      out_(out),
      tty_(::isatty(::fileno(out)) != 0),
      interval_s_(plain_interval_s) {}

std::string ProgressReporter::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string ProgressReporter::line(int64_t done, const std::string& suffix) const {
  const double elapsed = clock_.seconds();
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
  std::string s = label_ + " ";
  if (total_ > 0) {
    const double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
    if (tty_) {
      constexpr int kWidth = 24;
      const int filled = static_cast<int>(frac * kWidth);
      s += "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] ";
    }
    const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : NAN;
    s += fmt::format("{}/{} {} ({:.0f}%) {:.1f} {}/s ETA {}", done, total_, unit_, frac * 100, rate,
                     unit_, format_duration(eta));
  } else {
    s += fmt::format("{} {} {:.1f} {}/s", done, unit_, rate, unit_);
  }
  if (!suffix.empty()) s += "  " + suffix;
  return s;
}

void ProgressReporter::update(int64_t done, const std::string& suffix) {
  done_ = done;
  const double now = clock_.seconds();
  if (tty_) {
    if (now - last_print_s_ < 0.2) return;
    fmt::print(out_, "\r\033[K{}", line(done, suffix));
  } else {
    if (now - last_print_s_ < interval_s_) return;
    fmt::print(out_, "{}\n", line(done, suffix));
  }
  std::fflush(out_);
  last_print_s_ = now;
}

void ProgressReporter::finish(const std::string& suffix) {
  fmt::print(out_, "{}{} done in {}\n", tty_ ? "\r\033[K" : "", line(done_, suffix),
             format_duration(clock_.seconds()));
  std::fflush(out_);
}

}  // namespace chexscale
