// What a checkpoint costs the training thread: a model's whole training state (weights, Adam's
// moments, the RNG; ResNet-18's is 134 MB) saved the old way, written and synced before the call
// returns (CheckpointStore::save), beside the CheckpointWriter's save, which returns once the
// bytes are copied and writes on its own thread (its whole write timed apart, to its wait()).
// Alternating which goes first, round by round, into a folder on the file system given.
//   build/bench/micro/train/bench_checkpoint_save [--arch resnet18] [--rounds 7] [--dir /var/tmp]
// Prints each round's seconds, then the medians and the ratio.
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "train/checkpoint.h"
#include "train/checkpoint_writer.h"
#include "training_state.h"

namespace {

using namespace chexscale;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string arch = "resnet18";
  std::string parent = "/var/tmp";
  int rounds = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--arch") {
      arch = argv[i + 1];
    } else if (flag == "--rounds") {
      rounds = std::max(1, std::stoi(argv[i + 1]));
    } else if (flag == "--dir") {
      parent = argv[i + 1];
    } else {
      fmt::print(stderr, "usage: bench_checkpoint_save [--arch NAME] [--rounds N] [--dir PATH]\n");
      return 2;
    }
  }
  at::set_num_threads(1);
  const auto tensors = bench::training_state(arch);
  size_t bytes = 0;
  for (const auto& t : tensors)
    bytes += t.tensor.nbytes();
  const std::string dir =
      (std::filesystem::path(parent) / fmt::format("bench-checkpoint-save-{}", ::getpid()))
          .string();
  train::CheckpointStore store(dir, 2);
  train::CheckpointWriter writer(store);
  fmt::print(
      "{} state: {:.1f} MB into {}; seconds per round (save and sync, writer's save, "
      "writer's whole write)\n",
      arch, static_cast<double>(bytes) / 1e6, dir);
  std::vector<double> sync_s, returned_s, written_s;
  int64_t step = 0;
  for (int r = 0; r < rounds + 1; ++r) {  // the first round warms the caches: not counted
    double sync = 0, returned = 0, written = 0;
    const auto timed_sync = [&] {
      const auto start = Clock::now();
      store.save(++step, {{"step", step}}, tensors);
      sync = seconds_since(start);
    };
    const auto timed_writer = [&] {
      const auto start = Clock::now();
      writer.save(++step, false, {{"step", step}}, tensors);
      returned = seconds_since(start);
      writer.wait();
      written = seconds_since(start);
    };
    if (r % 2 == 0) {
      timed_sync();
      timed_writer();
    } else {
      timed_writer();
      timed_sync();
    }
    if (r == 0) continue;
    sync_s.push_back(sync);
    returned_s.push_back(returned);
    written_s.push_back(written);
    fmt::print("round {}: {:.3f} {:.3f} {:.3f}\n", r, sync, returned, written);
  }
  std::filesystem::remove_all(dir);
  fmt::print(
      "median s: save and sync {:.3f}, writer's save returns {:.3f} ({:.1f}x less on the training "
      "thread), writer's whole write {:.3f}\n",
      bench::median(sync_s), bench::median(returned_s),
      bench::median(sync_s) / bench::median(returned_s), bench::median(written_s));
  return 0;
}
