// The cost of train's per-step stop check: with several workers every step first agrees, in one
// small allreduce, on whether any rank's batch lost every image and whether any rank got a stop
// signal (and which), before the gradient step. This runs the real training step (TrainStep with
// the GradientReducer, Gloo) on a fixed synthetic batch under three agreements, rotated round by
// round so that every variant sees the same machine: none, the empty-batch flag alone (1 value),
// and train's (3 values: empty batch, stop asked, signal). Run it as the ranks of a job:
//   chexscale launch --nproc-per-node 2 --program build/microbench/train/bench_stop_flag --
//       [--arch resnet18] [--size 32] [--batch 4] [--rounds 6] [--steps 30] [--warmup 5]
// Rank 0 prints each round's median step time per variant and the agreement allreduce's own
// median time, then the medians over the rounds and the allreduce's latency with the ranks in
// step.
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "distributed/context.h"
#include "distributed/metrics.h"
#include "distributed/reducer.h"
#include "models/registry.h"
#include "train/optimizer.h"
#include "train/step.h"

namespace {

using namespace chexscale;
using Clock = std::chrono::steady_clock;

enum class Agreement { kNone, kEmptyFlag, kTrain };
constexpr Agreement kAgreements[] = {Agreement::kNone, Agreement::kEmptyFlag, Agreement::kTrain};

struct Args {
  std::string arch = "resnet18";
  int size = 32;
  int batch = 4;
  int rounds = 6;
  int steps = 30;
  int warmup = 5;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    const std::string value = argv[i + 1];
    if (flag == "--arch") {
      a.arch = value;
    } else if (flag == "--size" || flag == "--batch" || flag == "--rounds" || flag == "--steps" ||
               flag == "--warmup") {
      const int n = std::stoi(value);
      if (n < 1) throw std::invalid_argument(flag + " must be at least 1");
      (flag == "--size"     ? a.size
       : flag == "--batch"  ? a.batch
       : flag == "--rounds" ? a.rounds
       : flag == "--steps"  ? a.steps
                            : a.warmup) = n;
    } else {
      throw std::invalid_argument("unknown flag " + flag);
    }
  }
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Step and agreement times of one variant in one round, milliseconds.
struct Timing {
  std::vector<double> step_ms;
  std::vector<double> agree_ms;
};

int run(const Args& a) {
  at::set_num_threads(1);
  const auto ctx = distributed::DistContext::init(distributed::DistOptions{});
  if (ctx->world_size() < 2) throw std::invalid_argument("run it as two or more ranks");
  torch::manual_seed(1);
  models::ModelOptions model_options;
  model_options.arch = a.arch;
  models::Classifier model = models::make_model(model_options);
  distributed::broadcast_module(*ctx, *model);
  train::OptimizerOptions optimizer_options;
  const auto optimizer = train::make_optimizer(model->parameters(), optimizer_options);
  distributed::GradientReducer reducer(ctx, model->parameters(), distributed::ReducerOptions{});
  train::TrainStepOptions step_options;
  step_options.non_finite = train::NonFinitePolicy::kSkip;  // train's --on-nan default is stop
  train::TrainStep step(model, *optimizer, train::BceWithLogitsLoss(), &reducer, step_options);
  data::Batch batch;
  batch.images = torch::randn({a.batch, 3, a.size, a.size});
  batch.labels = torch::randint(0, 2, {a.batch, data::kNumPathologies}).to(torch::kFloat);
  batch.indices.resize(static_cast<size_t>(a.batch));
  std::iota(batch.indices.begin(), batch.indices.end(), int64_t{0});
  std::atomic<int> stop_request{0};  // as train's: set by its signal handler, never here

  // train's agreement (trainer.cpp, run_step), or a part of it.
  const auto agree = [&](Agreement g) {
    if (g == Agreement::kNone) return;
    const int stop_here = stop_request.load();
    std::vector<double> flags{batch.indices.empty() ? 1.0 : 0.0};
    if (g == Agreement::kTrain) {
      flags.push_back(stop_here != 0 ? 1.0 : 0.0);
      flags.push_back(static_cast<double>(stop_here));
    }
    flags = distributed::average_across_ranks(*ctx, flags);
    for (double& sum : flags)
      sum *= static_cast<double>(ctx->world_size());
    if (std::lround(flags[0]) != 0 || (flags.size() > 1 && std::lround(flags[1]) != 0)) {
      throw std::logic_error("a flag was raised");
    }
  };
  int64_t global_step = 0;
  for (int i = 0; i < a.warmup; ++i) {
    agree(Agreement::kTrain);
    step.run(batch, global_step++);
  }
  const auto ms = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
  };
  const bool main = ctx->rank() == 0;
  if (main) {
    fmt::print("{} at {} px, batch {} per worker, {} workers, {} steps per variant and round\n",
               a.arch, a.size, a.batch, ctx->world_size(), a.steps);
    fmt::print(
        "| round | order | none (ms) | 1 flag (ms) | train's 3 (ms) | 3 vs none | 3 vs 1 | "
        "allreduce of 3 (ms) |\n|---|---|---|---|---|---|---|---|\n");
  }
  std::vector<double> vs_none, vs_one, agree_share, agree_all;
  std::vector<double> steps_all[3];
  for (int round = 0; round < a.rounds; ++round) {
    Timing timing[3];
    std::string order;
    for (int k = 0; k < 3; ++k) {
      const int v = (round + k) % 3;
      order += std::to_string(v);
      ctx->barrier();
      for (int i = 0; i < a.steps; ++i) {
        const auto start = Clock::now();
        agree(kAgreements[v]);
        const auto agreed = Clock::now();
        step.run(batch, global_step++);
        const auto done = Clock::now();
        timing[v].step_ms.push_back(ms(start, done));
        timing[v].agree_ms.push_back(ms(start, agreed));
      }
    }
    double step_median[3];
    for (int v = 0; v < 3; ++v) {
      step_median[v] = median(timing[v].step_ms);
      steps_all[v].insert(steps_all[v].end(), timing[v].step_ms.begin(), timing[v].step_ms.end());
    }
    const double agree_median = median(timing[2].agree_ms);
    agree_all.insert(agree_all.end(), timing[2].agree_ms.begin(), timing[2].agree_ms.end());
    vs_none.push_back(100.0 * (step_median[2] - step_median[0]) / step_median[0]);
    vs_one.push_back(100.0 * (step_median[2] - step_median[1]) / step_median[1]);
    agree_share.push_back(100.0 * agree_median / step_median[2]);
    if (main) {
      fmt::print("| {} | {} | {:.3f} | {:.3f} | {:.3f} | {:+.2f} % | {:+.2f} % | {:.4f} |\n",
                 round + 1, order, step_median[0], step_median[1], step_median[2], vs_none.back(),
                 vs_one.back(), agree_median);
    }
  }
  // The allreduce alone with the ranks in step (a barrier before each), alternated: its latency
  // without the wait for a slower rank that the timings above include.
  std::vector<double> latency[3];
  for (int i = 0; i < 200; ++i) {
    for (const int v : {1, 2}) {
      ctx->barrier();
      const auto start = Clock::now();
      agree(kAgreements[v]);
      latency[v].push_back(ms(start, Clock::now()));
    }
  }
  if (main) {
    fmt::print(
        "the allreduce alone, ranks in step (200 each): 1 value {:.4f} ms, 3 values {:.4f} ms "
        "(median)\n",
        median(latency[1]), median(latency[2]));
    fmt::print(
        "\nmedian step: none {:.3f} ms, 1 flag {:.3f} ms, train's 3 {:.3f} ms\n"
        "median over rounds: 3 vs none {:+.2f} %, 3 vs 1 {:+.2f} %\n"
        "the agreement allreduce itself: median {:.4f} ms = {:.3f} % of train's median step\n",
        median(steps_all[0]), median(steps_all[1]), median(steps_all[2]), median(vs_none),
        median(vs_one), median(agree_all), 100.0 * median(agree_all) / median(steps_all[2]));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_stop_flag: %s\n", e.what());
    return 1;
  }
}
