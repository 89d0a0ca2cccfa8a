// The one place where LibTorch version differences (1.13 vs 2.x) are bridged.
#pragma once

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/optim/optimizer.h>
#include <torch/version.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#define CHEXSCALE_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||            \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// c10d's collective interface: in 1.13 the Gloo and NCCL groups derive from c10d::ProcessGroup;
// from 2.0 they derive from c10d::Backend (ProcessGroup became a dispatching wrapper). Both have
// the same collective methods (allreduce, broadcast, allgather, barrier) returning c10d::Work.
namespace c10d {
#if CHEXSCALE_TORCH_AT_LEAST(2, 0)
class Backend;
#else
class ProcessGroup;
#endif
}  // namespace c10d

namespace chexscale::compat {

#if CHEXSCALE_TORCH_AT_LEAST(2, 0)
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif

// The key of a parameter's entry in torch::optim::Optimizer::state(). LibTorch 1.13 keys it by the
// text of the parameter's TensorImpl address (c10::guts::to_string, printed through an
// ostream); 2.x keys it by the address itself (void*) and dropped c10::guts::to_string. The
// key type is read from the header rather than guessed from the version.
using OptimizerStateKey =
    std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

template <typename Key = OptimizerStateKey>
Key optimizer_state_key(const at::Tensor& param) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream address;
    address << param.unsafeGetTensorImpl();
    return address.str();
  } else {
    return param.unsafeGetTensorImpl();
  }
}

// "1.13.1" style version of the LibTorch we were compiled against.
inline const char* torch_version() {
  return TORCH_VERSION;
}

// Autocast state of one device type (thread-local in LibTorch). 1.13 has one function per device
// (set_enabled = CUDA, set_cpu_enabled, set_autocast_gpu_dtype, set_autocast_cpu_dtype); 2.4
// added functions taking the device type and deprecated the per-device ones. Only CPU and CUDA
// are bridged: they are the devices chexscale runs on.
#if CHEXSCALE_TORCH_AT_LEAST(2, 4)
inline bool autocast_enabled(c10::DeviceType device) {
  return at::autocast::is_autocast_enabled(device);
}
inline void set_autocast_enabled(c10::DeviceType device, bool enabled) {
  at::autocast::set_autocast_enabled(device, enabled);
}
inline c10::ScalarType autocast_dtype(c10::DeviceType device) {
  return at::autocast::get_autocast_dtype(device);
}
inline void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
  at::autocast::set_autocast_dtype(device, dtype);
}
#else
namespace detail {
inline void require_cpu_or_cuda(c10::DeviceType device) {
  if (device != c10::DeviceType::CPU && device != c10::DeviceType::CUDA) {
    throw std::invalid_argument("autocast is bridged for CPU and CUDA only, not " +
                                c10::DeviceTypeName(device));
  }
}
}  // namespace detail
inline bool autocast_enabled(c10::DeviceType device) {
  detail::require_cpu_or_cuda(device);
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled()
                                         : at::autocast::is_cpu_enabled();
}
inline void set_autocast_enabled(c10::DeviceType device, bool enabled) {
  detail::require_cpu_or_cuda(device);
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
}
inline c10::ScalarType autocast_dtype(c10::DeviceType device) {
  detail::require_cpu_or_cuda(device);
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
}
inline void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
  detail::require_cpu_or_cuda(device);
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
}
#endif

}  // namespace chexscale::compat
