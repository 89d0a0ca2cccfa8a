// Line splitting and rank prefixes for worker output (see line_prefixer.h).
#include "launch/line_prefixer.h"

namespace chexscale::launch {

void LinePrefixer::feed(const char* data, size_t size, std::string& out) {
  pending_.append(data, size);
  size_t start = 0;
  for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
    out += prefix_;
    out.append(pending_, start, nl + 1 - start);
  }
  pending_.erase(0, start);
  if (pending_.size() > kMaxPending) flush(out);
}

void LinePrefixer::flush(std::string& out) {
  if (pending_.empty()) return;
  out += prefix_ + pending_ + "\n";
  pending_.clear();
}

}  // namespace chexscale::launch
