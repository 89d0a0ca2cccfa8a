// PowerSGD on a real model's gradient buckets (DDP's 25 MiB buckets, first 1 MiB; 14 classes):
// for each approximation rank, the elements and bytes one step sends against plain allreduce, and
// the compute per step on one core in a world of one (no communication): all of PowerSGD's
// arithmetic (median and fastest of the timed steps), and of it the orthogonalisation. Prints the
// sweeps' variant this CPU runs, then one row per architecture and rank (ranks 1 2 4 8; min rate
// 2). With --compare: the sweeps and ATen's tensor operations side by side at rank 4 in
// alternating rounds.
//   bench_powersgd [ARCH...]             (default: densenet121 resnet50)
//   bench_powersgd --compare [ARCH...]   (default: resnet50)
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/openblas_kernels.h"
#include "distributed/bucket_plan.h"
#include "distributed/powersgd.h"
#include "distributed/reducer.h"
#include "models/registry.h"

namespace {

using namespace chexscale;

constexpr int kSteps = 15;  // timed steps (after one untimed that draws the first Q)
constexpr double kMiB = 1024.0 * 1024.0;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Buckets {
  std::vector<torch::Tensor> flats;
  std::vector<std::unique_ptr<distributed::PowerSgdBucket>> powersgd;
  int64_t sent = 0, total = 0;
};

// The model's buckets as the reducer plans them, each with its PowerSGD state; `tensor_operations`:
// ATen's operations instead of the sweeps.
Buckets make_buckets(const std::vector<torch::Tensor>& params, int rank, bool tensor_operations) {
  const auto plan = distributed::plan_buckets(
      params, static_cast<int64_t>(distributed::kDefaultFirstBucketMb * kMiB),
      static_cast<int64_t>(distributed::kDefaultBucketMb * kMiB));
  distributed::PowerSgdOptions options;
  options.rank = rank;
  options.tensor_operations = tensor_operations;
  Buckets b;
  for (const auto& members : plan) {
    int64_t numel = 0;
    std::vector<std::vector<int64_t>> shapes;
    for (size_t i : members) {
      numel += params[i].numel();
      shapes.push_back(params[i].sizes().vec());
    }
    torch::Tensor flat = torch::randn({numel}) * 1e-3;
    std::vector<torch::Tensor> slots;
    int64_t at = 0;
    for (size_t i : members) {
      torch::Tensor slot = torch::empty({0});
      slot.set_(flat.storage(), at, params[i].sizes(), params[i].strides());
      slots.push_back(slot);
      at += params[i].numel();
    }
    const auto volume = distributed::powersgd_volume(shapes, options);
    b.sent += volume.sent;
    b.total += volume.total;
    b.powersgd.push_back(std::make_unique<distributed::PowerSgdBucket>(slots, members, options));
    b.flats.push_back(flat);
  }
  return b;
}

// One step of every bucket's arithmetic in a world of one, in milliseconds; then fresh gradients.
double step_ms(Buckets& b) {
  const auto start = std::chrono::steady_clock::now();
  for (const auto& p : b.powersgd) {
    if (!p->compresses_any()) continue;
    p->first_payload(1.0);
    p->second_payload(1);
    p->finish(1, 1.0);
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (auto& flat : b.flats)
    flat.normal_(0, 1e-3);
  return ms;
}

// --compare: the sweeps against ATen's tensor operations (the arithmetic of gradients off the
// CPU) at rank 4, in rounds that alternate which goes first (A B B A), each a median of its steps;
// then the median of the rounds and the fastest step of each (on a busy machine, the fastest
// step is the one least interrupted).
void compare(const std::string& arch, const std::vector<torch::Tensor>& params) {
  constexpr int kRank = 4, kRounds = 8, kRoundSteps = 9;
  Buckets sweeps = make_buckets(params, kRank, false), tensors = make_buckets(params, kRank, true);
  step_ms(sweeps);  // draws the first Q
  step_ms(tensors);
  std::vector<double> sweep_rounds, tensor_rounds;
  double sweep_fastest = 1e9, tensor_fastest = 1e9;
  for (int round = 0; round < kRounds; ++round) {
    const bool sweeps_first = round % 4 == 0 || round % 4 == 3;
    for (bool run_sweeps : {sweeps_first, !sweeps_first}) {
      std::vector<double> ms;
      for (int i = 0; i < kRoundSteps; ++i)
        ms.push_back(step_ms(run_sweeps ? sweeps : tensors));
      (run_sweeps ? sweep_rounds : tensor_rounds).push_back(median(ms));
      double& fastest = run_sweeps ? sweep_fastest : tensor_fastest;
      fastest = std::min(fastest, *std::min_element(ms.begin(), ms.end()));
    }
    fmt::print("{:<12} round {}  sweeps {:6.1f} ms  tensor operations {:6.1f} ms\n", arch, round,
               sweep_rounds.back(), tensor_rounds.back());
  }
  fmt::print("{:<12} median    sweeps {:6.1f} ms  tensor operations {:6.1f} ms  ({:.2f}x)\n", arch,
             median(sweep_rounds), median(tensor_rounds),
             median(tensor_rounds) / median(sweep_rounds));
  fmt::print("{:<12} fastest   sweeps {:6.1f} ms  tensor operations {:6.1f} ms  ({:.2f}x)\n", arch,
             sweep_fastest, tensor_fastest, tensor_fastest / sweep_fastest);
}

// Seconds every bucket has spent orthogonalising.
double orthogonalize_seconds(const Buckets& b) {
  double seconds = 0;
  for (const auto& p : b.powersgd)
    seconds += p->orthogonalize_seconds();
  return seconds;
}

// One row per rank: sizes, and the median and fastest compute of kSteps steps (after one untimed
// that draws the first Q), with the median orthogonalisation.
void table(const std::string& arch, const std::vector<torch::Tensor>& params) {
  for (int rank : {1, 2, 4, 8}) {
    Buckets b = make_buckets(params, rank, false);
    step_ms(b);
    std::vector<double> compute_ms, orthogonalize_ms;
    for (int step = 0; step < kSteps; ++step) {
      const double before = orthogonalize_seconds(b);
      compute_ms.push_back(step_ms(b));
      orthogonalize_ms.push_back((orthogonalize_seconds(b) - before) * 1e3);
    }
    fmt::print("{:<12} {:>4} {:>8} {:>12.2f} {:>12.3f} {:>7.1f}x {:>12.1f} {:>9.1f} {:>13.2f}\n",
               arch, rank, b.flats.size(), 4.0 * b.total / 1e6, 4.0 * b.sent / 1e6,
               static_cast<double>(b.total) / b.sent, median(compute_ms),
               *std::min_element(compute_ms.begin(), compute_ms.end()), median(orthogonalize_ms));
  }
}

int run(std::vector<std::string> archs) {
  at::set_num_threads(1);
  torch::NoGradGuard no_grad;
  const bool comparing = !archs.empty() && archs.front() == "--compare";
  if (comparing) archs.erase(archs.begin());
  if (archs.empty())
    archs = comparing ? std::vector<std::string>{"resnet50"}
                      : std::vector<std::string>{"densenet121", "resnet50"};
  fmt::print("sweeps: {} (of the variants this CPU runs, the fastest); OpenBLAS kernels: {}\n",
             distributed::fastest_powersgd_kernels().name, openblas_kernels());
  if (!comparing) {
    fmt::print("{:<12} {:>4} {:>8} {:>12} {:>12} {:>8} {:>12} {:>9} {:>13}\n", "arch", "rank",
               "buckets", "plain MB", "powersgd MB", "fewer", "compute ms", "min ms",
               "orthogon. ms");
  }
  for (const auto& arch : archs) {
    models::ModelOptions model_options;
    model_options.arch = arch;
    auto model = models::make_model(model_options);
    if (comparing) {
      compare(arch, model->parameters());
    } else {
      table(arch, model->parameters());
    }
  }
  return 0;
}

constexpr const char* kUsage =
    "usage: bench_powersgd [ARCH...]             rows per rank (default: densenet121 resnet50)\n"
    "       bench_powersgd --compare [ARCH...]   the sweeps against tensor operations at rank 4\n"
    "                                            (default: resnet50)\n";

}  // namespace

int main(int argc, char** argv) {
  chexscale::choose_openblas_kernels();  // as chexscale's main(): ATen's products at full speed
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    fmt::print("{}", kUsage);
    return 0;
  }
  try {
    return run(args);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_powersgd: {}\n{}", e.what(), kUsage);
    return 2;
  }
}
