// The cost of the digest that every rank computes after an in-place regroup: the training state
// of a model (weights, buffers, Adam's two moments, the RNG; ResNet-18's is 134 MB) hashed by
// state_digest (XXH64) beside the same bytes hashed with FNV-1a one 64-bit word at a time, and
// beside a plain memcpy of them (the memory's speed), interleaved round by round on one core.
//   build/bench/micro/train/bench_state_digest [--arch resnet18] [--rounds 7]
// Prints each round's GB/s per variant, then the medians and the ratios.
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "train/regroup_state.h"
#include "training_state.h"

namespace {

using namespace chexscale;
using Clock = std::chrono::steady_clock;

// FNV-1a over 64-bit words: one multiply per word, each waiting for the one before.
uint64_t fnv1a_words(const std::vector<models::NamedTensor>& tensors) {
  uint64_t h = 14695981039346656037ull;
  for (const models::NamedTensor& t : tensors) {
    const auto* p = static_cast<const unsigned char*>(t.tensor.data_ptr());
    const size_t bytes = t.tensor.nbytes();
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
      uint64_t word = 0;
      std::memcpy(&word, p + i, 8);
      h = (h ^ word) * 1099511628211ull;
    }
    for (; i < bytes; ++i)
      h = (h ^ p[i]) * 1099511628211ull;
  }
  return h;
}

// A copy of every tensor's bytes into one buffer (as the state's broadcast packs them).
uint64_t copy_all(const std::vector<models::NamedTensor>& tensors, std::vector<char>& out) {
  size_t at = 0;
  for (const models::NamedTensor& t : tensors) {
    std::memcpy(out.data() + at, t.tensor.data_ptr(), t.tensor.nbytes());
    at += t.tensor.nbytes();
  }
  return static_cast<uint64_t>(out[at / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string arch = "resnet18";
  int rounds = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--arch") {
      arch = argv[i + 1];
    } else if (flag == "--rounds") {
      rounds = std::max(1, std::stoi(argv[i + 1]));
    } else {
      fmt::print(stderr, "usage: bench_state_digest [--arch NAME] [--rounds N]\n");
      return 2;
    }
  }
  at::set_num_threads(1);
  const auto tensors = bench::training_state(arch);
  size_t bytes = 0;
  for (const auto& t : tensors)
    bytes += t.tensor.nbytes();
  std::vector<char> buffer(bytes);
  fmt::print("{} state: {} tensors, {:.1f} MB; GB/s per round (xxh64 digest, fnv-1a, memcpy)\n",
             arch, tensors.size(), static_cast<double>(bytes) / 1e6);
  std::vector<double> xxh, fnv, copy;
  uint64_t sink = 0;
  const auto rate = [&](auto&& work) {
    const auto start = Clock::now();
    sink ^= work();
    return static_cast<double>(bytes) / 1e9 /
           std::chrono::duration<double>(Clock::now() - start).count();
  };
  for (int r = 0; r < rounds + 1; ++r) {  // the first round warms the caches: not counted
    const double x = rate([&] { return train::state_digest(tensors, nlohmann::json::object()); });
    const double f = rate([&] { return fnv1a_words(tensors); });
    const double c = rate([&] { return copy_all(tensors, buffer); });
    if (r == 0) continue;
    xxh.push_back(x);
    fnv.push_back(f);
    copy.push_back(c);
    fmt::print("round {}: {:6.2f} {:6.2f} {:6.2f}\n", r, x, f, c);
  }
  fmt::print(
      "median GB/s: digest (xxh64) {:.2f}, fnv-1a {:.2f}, memcpy {:.2f}; digest / fnv-1a {:.2f}x, "
      "digest / memcpy {:.2f}x (sink {:x})\n",
      bench::median(xxh), bench::median(fnv), bench::median(copy),
      bench::median(xxh) / bench::median(fnv), bench::median(xxh) / bench::median(copy),
      sink & 0xF);
  return 0;
}
