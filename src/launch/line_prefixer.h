// Splits one worker stream into lines and prefixes each with the worker's rank ("[rank 3] "), so
// the interleaved output of many workers stays readable; a partial line waits for its end.
#pragma once

#include <string>

namespace chexscale::launch {

class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}

  // Appends the complete lines of `data` (prefixed) to `out`; keeps the unfinished tail.
  void feed(const char* data, size_t size, std::string& out);
  // Appends the unfinished tail, if any, as a last line (the stream ended).
  void flush(std::string& out);

 private:
  static constexpr size_t kMaxPending = 64 * 1024;  // a longer line is cut, not buffered forever
  std::string prefix_;
  std::string pending_;
};

}  // namespace chexscale::launch
