// --amp modes and the autocast scope (see precision.h).
#include "train/precision.h"

#include <fmt/format.h>

#include "common/enum_parse.h"
#include "common/error.h"
#include "common/torch_compat.h"

namespace chexscale::train {

const char* to_string(AmpMode mode) {
  switch (mode) {
    case AmpMode::kBf16:
      return "bf16";
    case AmpMode::kFp16:
      return "fp16";
    case AmpMode::kOff:
      break;
  }
  return "off";
}

AmpMode parse_amp_mode(std::string_view name) {
  return parse_enum(name, "amp", {AmpMode::kOff, AmpMode::kBf16, AmpMode::kFp16});
}

void check_amp_supported(AmpMode mode, const torch::Device& device) {
  if (mode == AmpMode::kOff) return;
  if (!device.is_cpu() && !device.is_cuda()) {
    throw UsageError(fmt::format("amp {} is supported on cpu and cuda devices, not {}",
                                 to_string(mode), device.str()));
  }
  if (mode == AmpMode::kFp16 && device.is_cpu()) {
    throw UsageError(
        "amp fp16 needs a CUDA device (LibTorch 1.13's CPU autocast is bfloat16-only, and fp16 "
        "brings no speed on CPUs): use `amp` bf16 on CPU, or `device` cuda");
  }
}

namespace {

c10::ScalarType amp_dtype(AmpMode mode) {
  return mode == AmpMode::kFp16 ? c10::ScalarType::Half : c10::ScalarType::BFloat16;
}

}  // namespace

AutocastScope::AutocastScope(AmpMode mode, const torch::Device& device)
    : active_(mode != AmpMode::kOff), device_type_(device.type()) {
  if (!active_) return;
  check_amp_supported(mode, device);
  was_enabled_ = compat::autocast_enabled(device_type_);
  previous_dtype_ = compat::autocast_dtype(device_type_);
  compat::set_autocast_enabled(device_type_, true);
  compat::set_autocast_dtype(device_type_, amp_dtype(mode));
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  compat::set_autocast_enabled(device_type_, was_enabled_);
  compat::set_autocast_dtype(device_type_, previous_dtype_);
}

}  // namespace chexscale::train
