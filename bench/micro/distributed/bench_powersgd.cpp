// PowerSGD on a real model's gradient buckets (DDP's 25 MiB buckets, first 1 MiB; 14 classes):
// for each approximation rank, the elements and bytes one step sends against plain allreduce, and
// the compute per step on one core in a world of one (no communication): all of PowerSGD's
// arithmetic (median and fastest of the timed steps), and of it the orthogonalisation. Prints the
// sweeps' variant this CPU runs, then one row per architecture and rank (ranks 1 2 4 8; min rate
// 2). With --compare: at rank 4, side by side in rounds that rotate which goes first, the sweeps
// as training runs them (each matrix's first sweep in its gradient hook, on a gradient just
// written, as autograd leaves it: `hook`), the same sweeps on gradients in the bucket buffer,
// written before the step (`bucket`), and ATen's tensor operations (`tensor`).
//   bench_powersgd [--bucket-mb MB] [ARCH...]             (default: densenet121 resnet50)
//   bench_powersgd [--bucket-mb MB] --compare [ARCH...]   (default: resnet50)
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
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
  std::vector<std::vector<torch::Tensor>> fresh;  // per bucket, a gradient for each slot
  std::vector<std::unique_ptr<distributed::PowerSgdBucket>> powersgd;
  int64_t sent = 0, total = 0;
};

// The model's buckets as the reducer plans them, each with its PowerSGD state; `tensor_operations`:
// ATen's operations instead of the sweeps.
Buckets make_buckets(const std::vector<torch::Tensor>& params, double bucket_mb, int rank,
                     bool tensor_operations) {
  const auto plan = distributed::plan_buckets(
      params, static_cast<int64_t>(distributed::kDefaultFirstBucketMb * kMiB),
      static_cast<int64_t>(bucket_mb * kMiB));
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
    std::vector<torch::Tensor> slots, fresh;
    int64_t at = 0;
    for (size_t i : members) {
      torch::Tensor slot = torch::empty({0});
      slot.set_(flat.storage(), at, params[i].sizes(), params[i].strides());
      slots.push_back(slot);
      fresh.push_back(torch::empty_like(slot));
      at += params[i].numel();
    }
    const auto volume = distributed::powersgd_volume(shapes, options);
    b.sent += volume.sent;
    b.total += volume.total;
    b.powersgd.push_back(std::make_unique<distributed::PowerSgdBucket>(slots, members, options));
    b.flats.push_back(flat);
    b.fresh.push_back(std::move(fresh));
  }
  return b;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// A bucket's two payloads and finish in a world of one (the sums are the inputs).
void payloads_and_finish(distributed::PowerSgdBucket& p) {
  p.first_payload(1.0);
  p.second_payload(1);
  p.finish(1, 1.0);
}

// One step of every bucket's arithmetic in a world of one, in milliseconds; then fresh gradients.
double step_ms(Buckets& b) {
  const auto start = std::chrono::steady_clock::now();
  for (const auto& p : b.powersgd) {
    if (p->compresses_any()) payloads_and_finish(*p);
  }
  const double ms = ms_since(start);
  for (auto& flat : b.flats)
    flat.normal_(0, 1e-3);
  return ms;
}

// The same step as training runs it: each gradient written just before its hook hands it to the
// first sweep (as autograd leaves it: in cache as far as it fits), then the payloads and finish.
// Only the arithmetic is timed.
double hook_step_ms(Buckets& b) {
  double ms = 0;
  for (size_t k = 0; k < b.powersgd.size(); ++k) {
    distributed::PowerSgdBucket& p = *b.powersgd[k];
    if (!p.compresses_any()) continue;
    p.begin_step();
    for (size_t slot = 0; slot < b.fresh[k].size(); ++slot) {
      torch::Tensor& gradient = b.fresh[k][slot];
      gradient.normal_(0, 1e-3);
      const auto start = std::chrono::steady_clock::now();
      p.project_early(slot, gradient, 1.0);
      ms += ms_since(start);
    }
    const auto start = std::chrono::steady_clock::now();
    payloads_and_finish(p);
    ms += ms_since(start);
  }
  return ms;
}

// --compare: the sweeps as training runs them (hook), on gradients in the bucket (bucket) and
// ATen's tensor operations (tensor: the arithmetic of gradients off the CPU) at rank 4, in rounds
// that rotate which goes first, each a median of its steps; then the median of the rounds and the
// fastest step of each (on a busy machine, the fastest step is the one least interrupted).
void compare(const std::string& arch, const std::vector<torch::Tensor>& params, double bucket_mb) {
  constexpr int kRank = 4, kRounds = 9, kRoundSteps = 9;
  struct Variant {
    const char* name;
    Buckets buckets;
    double (*step)(Buckets&);
    std::vector<double> rounds;
    double fastest = 1e9;
  };
  std::vector<Variant> variants;
  variants.push_back({"hook", make_buckets(params, bucket_mb, kRank, false), hook_step_ms, {}});
  variants.push_back({"bucket", make_buckets(params, bucket_mb, kRank, false), step_ms, {}});
  variants.push_back({"tensor", make_buckets(params, bucket_mb, kRank, true), step_ms, {}});
  for (Variant& v : variants)
    v.step(v.buckets);  // draws the first Q
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < variants.size(); ++i) {
      Variant& v = variants[(i + round) % variants.size()];
      std::vector<double> ms;
      for (int s = 0; s < kRoundSteps; ++s)
        ms.push_back(v.step(v.buckets));
      v.rounds.push_back(median(ms));
      v.fastest = std::min(v.fastest, *std::min_element(ms.begin(), ms.end()));
    }
    fmt::print("{:<12} round {}", arch, round);
    for (const Variant& v : variants)
      fmt::print("  {} {:6.1f} ms", v.name, v.rounds.back());
    fmt::print("\n");
  }
  for (const bool fastest : {false, true}) {
    fmt::print("{:<12} {:<9}", arch, fastest ? "fastest" : "median");
    const double hook = fastest ? variants[0].fastest : median(variants[0].rounds);
    for (const Variant& v : variants) {
      const double ms = fastest ? v.fastest : median(v.rounds);
      fmt::print("  {} {:6.1f} ms ({:.2f}x)", v.name, ms, ms / hook);
    }
    fmt::print("\n");
  }
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
void table(const std::string& arch, const std::vector<torch::Tensor>& params, double bucket_mb) {
  for (int rank : {1, 2, 4, 8}) {
    Buckets b = make_buckets(params, bucket_mb, rank, false);
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
  double bucket_mb = distributed::kDefaultBucketMb;
  if (!archs.empty() && archs.front() == "--bucket-mb") {
    if (archs.size() < 2) throw std::invalid_argument("--bucket-mb needs a size in MiB");
    bucket_mb = std::stod(archs[1]);
    if (!(bucket_mb > 0)) throw std::invalid_argument("--bucket-mb must be > 0");
    archs.erase(archs.begin(), archs.begin() + 2);
  }
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
      compare(arch, model->parameters(), bucket_mb);
    } else {
      table(arch, model->parameters(), bucket_mb);
    }
  }
  return 0;
}

constexpr const char* kUsage =
    "usage: bench_powersgd [--bucket-mb MB] [ARCH...]   rows per rank (default: densenet121\n"
    "                                                   resnet50)\n"
    "       bench_powersgd [--bucket-mb MB] --compare [ARCH...]\n"
    "                      at rank 4: the sweeps as training runs them (first in the gradient's\n"
    "                      hook), on gradients in the bucket, and tensor operations (default:\n"
    "                      resnet50)\n"
    "  --bucket-mb MB      bucket size in MiB (default 25, as the reducer's)\n";

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
