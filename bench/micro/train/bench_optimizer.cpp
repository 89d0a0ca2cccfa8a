// The optimizer step on one core: LibTorch's torch::optim::Adam against chexscale's FusedAdam on
// a real model's parameters (DenseNet-121 and ResNet-50 at 14 classes), interleaved step by
// step so both see the same machine. Prints milliseconds per step (median) and the ratio.
//   bench_optimizer [ARCH...]   (default: densenet121 resnet50)
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "models/registry.h"
#include "train/fused_adam.h"
#include "training_state.h"

namespace {

std::vector<torch::Tensor> parameters_with_gradients(const std::string& arch) {
  chexscale::models::ModelOptions options;
  options.arch = arch;
  auto model = chexscale::models::make_model(options);
  std::vector<torch::Tensor> params;
  for (auto& p : model->parameters()) {
    params.push_back(p.detach().clone().requires_grad_());
    params.back().mutable_grad() = torch::randn_like(p) * 1e-3;
  }
  return params;
}

double time_step(torch::optim::Optimizer& optimizer) {
  const auto start = std::chrono::steady_clock::now();
  optimizer.step();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  std::vector<std::string> archs(argv + 1, argv + argc);
  if (archs.empty()) archs = {"densenet121", "resnet50"};
  fmt::print("{:<12} {:>10} {:>14} {:>14} {:>8}\n", "arch", "params", "Adam ms/step",
             "FusedAdam ms", "speedup");
  for (const auto& arch : archs) {
    auto reference_params = parameters_with_gradients(arch);
    auto fused_params = parameters_with_gradients(arch);
    const auto options = torch::optim::AdamOptions(1e-3);
    torch::optim::Adam reference(reference_params, options);
    chexscale::train::FusedAdam fused(fused_params, options);
    std::vector<double> reference_ms, fused_ms;
    for (int i = 0; i < 12; ++i) {  // the first two of each are warm-up (state allocation)
      const double r = time_step(reference);
      const double f = time_step(fused);
      if (i >= 2) {
        reference_ms.push_back(r);
        fused_ms.push_back(f);
      }
    }
    int64_t count = 0;
    for (const auto& p : fused_params)
      count += p.numel();
    fmt::print("{:<12} {:>10} {:>14.1f} {:>14.1f} {:>7.2f}x\n", arch, count,
               chexscale::bench::median(reference_ms), chexscale::bench::median(fused_ms),
               chexscale::bench::median(reference_ms) / chexscale::bench::median(fused_ms));
  }
  return 0;
}
