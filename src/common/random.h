// Small, platform-independent random numbers for everything that must be reproducible from a
// seed (splits, sampler permutations, augmentation): SplitMix64 and helpers.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

namespace chexscale {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (n > 0); the tiny modulo bias is irrelevant here.
  uint64_t below(uint64_t n) { return next() % n; }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// One seed from several values (seed, epoch, index, ...), well mixed.
inline uint64_t mix_seed(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x243F6A8885A308D3ULL;
  for (uint64_t p : parts)
    h = SplitMix64(h ^ p).next();
  return h;
}

// Fisher-Yates shuffle driven by SplitMix64 (std::shuffle's algorithm is not specified).
template <typename T>
void shuffle_in_place(std::vector<T>& v, uint64_t seed) {
  SplitMix64 rng(seed);
  for (size_t i = v.size(); i > 1; --i) {
    const size_t j = rng.below(i);
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace chexscale
