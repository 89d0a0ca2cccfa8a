// Preflight checks for a node or pod before a distributed job: rank variables, rendezvous
// address and port, network interfaces (overlays, IPoIB, MTU) and the ones Gloo/NCCL would use,
// /dev/shm, GPUs, NCCL settings, LibTorch and the OpenBLAS kernels it calls. Each check is OK, WARN
// or FAIL with one message; `chexscale doctor` prints them and exits non-zero when any check
// failed.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace chexscale::launch {

enum class CheckStatus { kOk, kWarn, kFail };

const char* to_string(CheckStatus status);  // "OK", "WARN", "FAIL"

struct DoctorCheck {
  CheckStatus status = CheckStatus::kOk;
  std::string topic;  // "rank", "master", "interface", "gloo", "nccl", "shm", "gpu", "libtorch",
                      // "blas"
  std::string message;
};

struct DoctorOptions {
  // Overrides of the rendezvous address; "" / -1 = from the environment (distributed/env.h).
  std::string master_addr;
  int master_port = -1;
  std::chrono::milliseconds connect_timeout{2000};
  std::string sys_class_net = "/sys/class/net";
  std::string shm_path = "/dev/shm";
  // NCCL keeps intra-node buffers in /dev/shm, and a one-node job's gradient reducer its buckets;
  // Docker's 64 MiB default makes NCCL fail and the reducer fall back to Gloo's loopback.
  std::uint64_t min_shm_bytes = std::uint64_t{512} << 20;

  // Throws UsageError naming the field: master_port neither -1 nor in [1, 65535], a
  // connect_timeout that is not positive.
  void validate() const;
};

// Runs every check against `env` (normally distributed::process_environment()); validates the
// options first.
std::vector<DoctorCheck> run_doctor(const DoctorOptions& options,
                                    const std::map<std::string, std::string>& env);

bool any_failed(const std::vector<DoctorCheck>& checks);

}  // namespace chexscale::launch
