// A small conv net and deterministic per-rank batches shared by the multi-process worker and the
// single-process references of the dist tests. No BatchNorm, so a rank's gradient does not depend
// on how the global batch is split. `aux` is used on rank 0 only and `unused` never, so every
// reduction also exercises parameters that get no gradient on some or all ranks.
#pragma once

#include <torch/torch.h>

namespace chexscale::test_util {

constexpr int64_t kTinyBatch = 4;
constexpr int64_t kTinyClasses = 5;
// Steps of the worker's PowerSGD error-feedback scenario.
constexpr int kPowerSgdSteps = 400;
constexpr int kPowerSgdEarlySteps = 40;  // the first sum it saves

struct TinyNetImpl : torch::nn::Module {
  TinyNetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 6, 3)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 8, 3)))),
        fc(register_module("fc", torch::nn::Linear(8, kTinyClasses))),
        aux(register_module("aux", torch::nn::Linear(8, 1))),
        unused(register_module("unused", torch::nn::Linear(4, 4))) {}

  torch::Tensor features(const torch::Tensor& x) {
    return torch::relu(conv2(torch::relu(conv1(x)))).mean({2, 3});
  }
  // Mean BCE of this batch, plus (with_aux) a term on a separate head over detached features.
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y, bool with_aux) {
    const torch::Tensor f = features(x);
    torch::Tensor l = torch::binary_cross_entropy_with_logits(fc(f), y);
    if (with_aux) l = l + aux(f.detach()).pow(2).mean();
    return l;
  }

  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc, aux, unused;
};
TORCH_MODULE(TinyNet);

// Rank `rank`'s batch for step `step`.
inline std::pair<torch::Tensor, torch::Tensor> tiny_batch(int rank, int step) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1000 + 97 * step + rank);
  torch::Tensor x = torch::randn({kTinyBatch, 3, 10, 10}, gen);
  torch::Tensor y = torch::randint(0, 2, {kTinyBatch, kTinyClasses}, gen).to(torch::kFloat);
  return {x, y};
}

}  // namespace chexscale::test_util
