// Medians per size and their isotonic (non-decreasing) fit by pool-adjacent-violators (see
// monotone_times.h).
#include "simulate/monotone_times.h"

#include <algorithm>
#include <map>

namespace chexscale::simulate {

std::vector<AllreduceSample> median_per_size(const std::vector<AllreduceSample>& samples) {
  std::map<int64_t, std::vector<double>> by_size;
  for (const AllreduceSample& s : samples)
    by_size[s.bytes].push_back(s.seconds);
  std::vector<AllreduceSample> medians;
  for (auto& [bytes, seconds] : by_size) {
    std::sort(seconds.begin(), seconds.end());
    const size_t n = seconds.size();
    medians.push_back({bytes, n % 2 ? seconds[n / 2] : (seconds[n / 2 - 1] + seconds[n / 2]) / 2});
  }
  return medians;
}

MonotoneTimes monotone_times(const std::vector<AllreduceSample>& medians) {
  // Blocks of adjacent sizes: their mean time and how many sizes they hold. A block below the one
  // before merges into it, until the means do not decrease.
  struct Block {
    double mean;
    size_t count;
  };
  std::vector<Block> blocks;
  for (const AllreduceSample& m : medians) {
    blocks.push_back({m.seconds, 1});
    while (blocks.size() > 1 && blocks[blocks.size() - 2].mean > blocks.back().mean) {
      const Block last = blocks.back();
      blocks.pop_back();
      Block& into = blocks.back();
      into.mean = (into.mean * into.count + last.mean * last.count) / (into.count + last.count);
      into.count += last.count;
    }
  }
  MonotoneTimes out;
  size_t i = 0;
  for (const Block& b : blocks) {
    for (size_t k = 0; k < b.count; ++k, ++i) {
      out.fitted.push_back({medians[i].bytes, b.mean});
      if (b.count > 1) out.distrusted.push_back(medians[i]);
    }
  }
  return out;
}

}  // namespace chexscale::simulate
