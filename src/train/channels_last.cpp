// Channels-last conversion of modules and inputs (see channels_last.h).
#include "train/channels_last.h"

#include <fmt/format.h>

#include "common/error.h"

namespace chexscale::train {
namespace {

void convert(torch::Tensor& t) {
  if (!t.defined() || t.dim() != 4) return;
  t.set_data(t.detach().contiguous(torch::MemoryFormat::ChannelsLast));
}

}  // namespace

void convert_to_channels_last(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters()) {
    convert(p);
    if (p.grad().defined()) convert(p.mutable_grad());
  }
  for (auto& b : module.buffers())
    convert(b);
}

torch::Tensor to_channels_last(const torch::Tensor& images) {
  if (images.dim() != 4) {
    throw UsageError(fmt::format(
        "channels_last needs [N, C, H, W] images, got {} dimensions (ten-crop batches are "
        "5-D)",
        images.dim()));
  }
  return images.contiguous(torch::MemoryFormat::ChannelsLast);
}

}  // namespace chexscale::train
