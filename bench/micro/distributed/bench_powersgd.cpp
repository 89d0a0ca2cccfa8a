// PowerSGD on a real model's gradient buckets (DDP's 25 MiB buckets, first 1 MiB; 14 classes):
// for each approximation rank, the elements and bytes one step sends against plain allreduce, and
// the compute per step on one core in a world of one (no communication): all of PowerSGD's
// arithmetic, and of it the orthogonalisation. Prints one row per architecture and rank.
//   bench_powersgd [ARCH...]   (default: densenet121 resnet50; ranks 1 2 4 8; min rate 2)
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "distributed/bucket_plan.h"
#include "distributed/powersgd.h"
#include "distributed/reducer.h"
#include "models/registry.h"

namespace {

using namespace chexscale;

constexpr int kSteps = 7;  // timed steps (after one untimed that draws the first Q)
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

Buckets make_buckets(const std::vector<torch::Tensor>& params, int rank) {
  const auto plan = distributed::plan_buckets(
      params, static_cast<int64_t>(distributed::kDefaultFirstBucketMb * kMiB),
      static_cast<int64_t>(distributed::kDefaultBucketMb * kMiB));
  distributed::PowerSgdOptions options;
  options.rank = rank;
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

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  torch::NoGradGuard no_grad;
  std::vector<std::string> archs(argv + 1, argv + argc);
  if (archs.empty()) archs = {"densenet121", "resnet50"};
  fmt::print("{:<12} {:>4} {:>8} {:>12} {:>12} {:>8} {:>14} {:>14}\n", "arch", "rank", "buckets",
             "plain MB", "powersgd MB", "fewer", "compute ms", "orthogon. ms");
  for (const auto& arch : archs) {
    models::ModelOptions model_options;
    model_options.arch = arch;
    auto model = models::make_model(model_options);
    const std::vector<torch::Tensor> params = model->parameters();
    for (int rank : {1, 2, 4, 8}) {
      Buckets b = make_buckets(params, rank);
      std::vector<double> compute_ms, orthogonalize_ms;
      for (int step = 0; step <= kSteps; ++step) {
        double orthogonalize_before = 0;
        for (const auto& p : b.powersgd)
          orthogonalize_before += p->orthogonalize_seconds();
        const auto start = std::chrono::steady_clock::now();
        for (const auto& p : b.powersgd) {
          if (!p->compresses_any()) continue;
          p->first_payload(1.0);
          p->second_payload(1);
          p->finish(1, 1.0);
        }
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        double orthogonalize_after = 0;
        for (const auto& p : b.powersgd)
          orthogonalize_after += p->orthogonalize_seconds();
        if (step == 0) continue;
        compute_ms.push_back(ms);
        orthogonalize_ms.push_back((orthogonalize_after - orthogonalize_before) * 1e3);
        for (auto& flat : b.flats)
          flat.normal_(0, 1e-3);
      }
      fmt::print("{:<12} {:>4} {:>8} {:>12.2f} {:>12.3f} {:>7.1f}x {:>14.1f} {:>14.1f}\n", arch,
                 rank, b.flats.size(), 4.0 * b.total / 1e6, 4.0 * b.sent / 1e6,
                 static_cast<double>(b.total) / b.sent, median(compute_ms),
                 median(orthogonalize_ms));
    }
  }
  return 0;
}
