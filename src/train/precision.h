// Mixed precision for the training step: the --amp modes, which device can run which, and the
// autocast scope around the forward pass (LibTorch's autocast, as torch.autocast in Python).
#pragma once

#include <torch/torch.h>

#include <string_view>

namespace chexscale::train {

enum class AmpMode {
  kOff,   // fp32 everywhere
  kBf16,  // autocast to bfloat16 (CPU and CUDA); no loss scaling needed
  kFp16   // autocast to float16 (CUDA only) with a dynamic loss scaler
};

const char* to_string(AmpMode mode);
// "off" | "bf16" | "fp16"; UsageError naming `amp` for anything else.
AmpMode parse_amp_mode(std::string_view name);

// Throws UsageError naming `amp`, with the way out, when `mode` cannot run on `device`: fp16 on a
// CPU (LibTorch 1.13 refuses it: "AutocastCPU only support Bfloat16"), or a device that is neither
// a CPU nor a CUDA GPU.
void check_amp_supported(AmpMode mode, const torch::Device& device);

// Autocast on for `device`'s type in `mode`'s dtype while the scope lives (nothing for kOff).
// Restores the previous state on exit and, when the outermost scope closes, clears the cache of
// weights cast to the low precision (they must be recast after the optimizer updates them).
class AutocastScope {
 public:
  AutocastScope(AmpMode mode, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_type_ = c10::DeviceType::CPU;
  bool was_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Undefined;
};

}  // namespace chexscale::train
