// The preflight checks of `chexscale doctor`; see doctor.h.
#include "launch/doctor.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <torch/cuda.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>

#include "common/error.h"
#include "common/openblas_kernels.h"
#include "common/torch_compat.h"
#include "distributed/context.h"
#include "distributed/env.h"
#include "distributed/process_group.h"
#include "launch/network_interfaces.h"

namespace chexscale::launch {
namespace {

constexpr int kStandardMtu = 1500;

std::string format_bytes(std::uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

// Connects to addr:port within `timeout`; "" on success, else why not.
std::string try_connect(const addrinfo& target, std::chrono::milliseconds timeout) {
  const int fd = ::socket(target.ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  std::string error;
  if (::connect(fd, target.ai_addr, target.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      error = std::strerror(errno);
    } else {
      pollfd p{fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
      int so_error = 0;
      socklen_t len = sizeof(so_error);
      if (ready == 0) {
        error = "timed out after " + std::to_string(timeout.count()) + " ms";
      } else if (ready < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) {
        error = std::strerror(errno);
      } else if (so_error != 0) {
        error = std::strerror(so_error);
      }
    }
  }
  ::close(fd);
  return error;
}

// Rank variables through the same detection the workers use; returns the rendezvous address.
std::optional<distributed::RendezvousEnv> check_rank(const DoctorOptions& o,
                                                     const std::map<std::string, std::string>& env,
                                                     std::vector<DoctorCheck>& out) {
  distributed::DistOptions overrides;
  overrides.master_addr = o.master_addr;
  overrides.master_port = o.master_port;
  try {
    const auto r = distributed::detect_environment(env, overrides);
    out.push_back(
        {CheckStatus::kOk, "rank",
         fmt::format("rank {} of {} (local {} of {}) from {}: rank from {}, world size "
                     "from {}",
                     r.rank.value, r.world_size.value, r.local_rank.value, r.local_world_size.value,
                     r.convention, r.rank.source, r.world_size.source)});
    return r;
  } catch (const UsageError& e) {
    out.push_back({CheckStatus::kFail, "rank", e.what()});
    return std::nullopt;
  }
}

void check_master(const distributed::RendezvousEnv& r, std::chrono::milliseconds timeout,
                  std::vector<DoctorCheck>& out) {
  const std::string& addr = r.master_addr.value;
  const int port = r.master_port.value;
  if (r.master_addr.source.rfind("default", 0) == 0) {
    out.push_back({CheckStatus::kOk, "master",
                   fmt::format("{}:{} ({}): nothing to check before the job starts", addr, port,
                               r.master_addr.source)});
    return;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(addr.c_str(), service.c_str(), &hints, &result); rc != 0) {
    out.push_back({CheckStatus::kFail, "master",
                   "'" + addr + "' does not resolve (" + ::gai_strerror(rc) +
                       "); in Kubernetes check the headless Service and the pod's subdomain"});
    return;
  }
  std::array<char, NI_MAXHOST> host{};
  ::getnameinfo(result->ai_addr, result->ai_addrlen, host.data(), host.size(), nullptr, 0,
                NI_NUMERICHOST);
  out.push_back({CheckStatus::kOk, "master",
                 "'" + addr + "' (" + r.master_addr.source + ") resolves to " + host.data()});
  if (const std::string error = try_connect(*result, timeout); error.empty()) {
    out.push_back({CheckStatus::kOk, "store", addr + ":" + service + " accepts connections"});
  } else {
    out.push_back({CheckStatus::kWarn, "store",
                   addr + ":" + service + " is not reachable (" + error +
                       "); fine before rank 0 starts, a firewall or NetworkPolicy if it persists"});
  }
  ::freeaddrinfo(result);
}

std::string describe(const NetworkInterface& i) {
  std::string s = i.name + " (" + to_string(i.kind) + ": " + i.detail + ", MTU " +
                  std::to_string(i.mtu) + (i.up ? ", up" : ", down");
  for (const auto& a : i.addresses)
    s += ", " + a;
  return s + ")";
}

// Where chexscale's Gloo group will bind (distributed::choose_gloo_address), as an interface.
InterfaceChoice gloo_choice(const std::vector<NetworkInterface>& interfaces,
                            const distributed::RendezvousEnv& rendezvous,
                            const std::map<std::string, std::string>& env) {
  try {
    const auto g = distributed::choose_gloo_address(rendezvous, env);
    if (!g.interface.empty()) {
      const std::string first = g.interface.substr(0, g.interface.find(','));
      const NetworkInterface* i = find_interface(interfaces, first);
      if (i == nullptr) return {std::nullopt, g.reason + "=" + g.interface + " names no interface"};
      return {*i, g.reason + "=" + g.interface};
    }
    const NetworkInterface* i = find_interface_with_address(interfaces, g.address);
    if (i == nullptr) return {std::nullopt, g.address + " (" + g.reason + ") is on no interface"};
    return {*i, g.reason};
  } catch (const Error& e) {
    return {std::nullopt, e.what()};
  }
}

void check_interfaces(const DoctorOptions& o,
                      const std::optional<distributed::RendezvousEnv>& rendezvous,
                      const std::map<std::string, std::string>& env,
                      std::vector<DoctorCheck>& out) {
  const auto interfaces = list_interfaces(o.sys_class_net);
  for (const auto& i : interfaces) {
    CheckStatus status = CheckStatus::kOk;
    std::string note;
    if (i.kind == InterfaceKind::kOverlay) {
      status = CheckStatus::kWarn;
      note =
          ": overlay network, every packet is encapsulated in software (the article's "
          "Kubernetes gap); --host-network or RDMA avoids it";
    } else if (i.kind == InterfaceKind::kIPoIB) {
      note = ": InfiniBand; NCCL should use RDMA verbs on it, not sockets";
    } else if (i.up && i.kind != InterfaceKind::kLoopback && i.mtu > 0 && i.mtu < kStandardMtu) {
      status = CheckStatus::kWarn;
      note = ": MTU below 1500, typical of a tunnel or overlay path";
    }
    out.push_back({status, "interface", describe(i) + note});
  }
  const auto report = [&](const std::string& library, const InterfaceChoice& choice) {
    if (!choice.interface) {
      out.push_back({CheckStatus::kFail, library, "no interface: " + choice.reason});
      return;
    }
    const NetworkInterface& i = *choice.interface;
    CheckStatus status = CheckStatus::kOk;
    std::string note;
    if (i.kind == InterfaceKind::kOverlay) {
      status = CheckStatus::kWarn;
      note = "; traffic crosses an overlay";
    } else if (i.kind == InterfaceKind::kLoopback && !(rendezvous && rendezvous->single_node())) {
      status = CheckStatus::kWarn;
      note = "; other nodes cannot reach loopback (set " +
             std::string(library == "gloo" ? "GLOO" : "NCCL") + "_SOCKET_IFNAME for multi-node)";
    }
    out.push_back(
        {status, library, "would use " + describe(i) + " because " + choice.reason + note});
  };
  if (rendezvous) report("gloo", gloo_choice(interfaces, *rendezvous, env));
  report("nccl", nccl_interface(interfaces, env));
}

void check_shm(const DoctorOptions& o, std::vector<DoctorCheck>& out) {
  struct statvfs fs {};
  if (::statvfs(o.shm_path.c_str(), &fs) != 0) {
    out.push_back({CheckStatus::kWarn, "shm",
                   o.shm_path + " is missing (" + std::strerror(errno) +
                       "); NCCL's shared-memory transport needs it, and without it the ranks of "
                       "a one-node job allreduce over Gloo's loopback instead of shared memory"});
    return;
  }
  const std::uint64_t size = static_cast<std::uint64_t>(fs.f_blocks) * fs.f_frsize;
  if (size < o.min_shm_bytes) {
    out.push_back({CheckStatus::kWarn, "shm",
                   o.shm_path + " is " + format_bytes(size) + ", below " +
                       format_bytes(o.min_shm_bytes) +
                       ": NCCL keeps buffers there, and a one-node job its gradient buckets (the "
                       "model's gradients once per rank); give pods an emptyDir (medium: Memory) "
                       "at /dev/shm (k8s render --shm-size)"});
  } else {
    out.push_back({CheckStatus::kOk, "shm", o.shm_path + " is " + format_bytes(size)});
  }
}

void check_gpus_and_torch(const std::map<std::string, std::string>& env,
                          std::vector<DoctorCheck>& out) {
  const auto gpus = torch::cuda::device_count();
  if (gpus > 0) {
    out.push_back(
        {CheckStatus::kOk, "gpu", std::to_string(gpus) + " CUDA device(s): NCCL backend"});
  } else {
    out.push_back({CheckStatus::kOk, "gpu", "no CUDA device: the Gloo backend on CPU"});
  }
  std::string settings;
  for (const auto& [key, value] : env) {
    if (key.rfind("NCCL_", 0) == 0 || key.rfind("GLOO_", 0) == 0) {
      settings += (settings.empty() ? "" : " ") + key + "=" + value;
    }
  }
  out.push_back(
      {CheckStatus::kOk, "nccl-env", settings.empty() ? "no NCCL_*/GLOO_* settings" : settings});
  out.push_back({CheckStatus::kOk, "libtorch",
                 std::string("LibTorch ") + compat::torch_version() + ", backends: gloo" +
                     (torch::cuda::is_available() ? ", nccl" : "")});
}

// The OpenBLAS kernels in use: a WARN where they are OpenBLAS's SSE3 fallback on a CPU with
// better (chexscale replaces that fallback unless OPENBLAS_CORETYPE asks for it).
void check_blas(const std::map<std::string, std::string>& env, std::vector<DoctorCheck>& out) {
  const std::string kernels = openblas_kernels();
  if (kernels.empty()) {
    out.push_back({CheckStatus::kOk, "blas", "no OpenBLAS built for many CPUs is loaded"});
    return;
  }
  const auto forced = env.find("OPENBLAS_CORETYPE");
  const std::string setting =
      forced == env.end() ? "" : " (OPENBLAS_CORETYPE=" + forced->second + ")";
  if (const auto better = openblas_core_instead_of(kernels, cpu_vector_sets())) {
    out.push_back({CheckStatus::kWarn, "blas",
                   "OpenBLAS runs its " + kernels + " (SSE3) kernels" + setting +
                       " on a CPU that runs its " + *better +
                       " kernels: matrix products outside oneDNN run slower; unset "
                       "OPENBLAS_CORETYPE or set it to " +
                       *better});
    return;
  }
  out.push_back({CheckStatus::kOk, "blas", "OpenBLAS, its " + kernels + " kernels" + setting});
}

}  // namespace

const char* to_string(CheckStatus status) {
  switch (status) {
    case CheckStatus::kOk:
      return "OK";
    case CheckStatus::kWarn:
      return "WARN";
    case CheckStatus::kFail:
      return "FAIL";
  }
  return "?";
}

void DoctorOptions::validate() const {
  if (master_port != -1 && (master_port < 1 || master_port > 65535)) {
    throw UsageError(fmt::format("master_port {} must be in [1, 65535]", master_port));
  }
  if (connect_timeout.count() <= 0) {
    throw UsageError(
        fmt::format("connect_timeout {} ms must be positive", connect_timeout.count()));
  }
}

std::vector<DoctorCheck> run_doctor(const DoctorOptions& options,
                                    const std::map<std::string, std::string>& env) {
  options.validate();
  std::vector<DoctorCheck> checks;
  const auto rendezvous = check_rank(options, env, checks);
  if (rendezvous) check_master(*rendezvous, options.connect_timeout, checks);
  check_interfaces(options, rendezvous, env, checks);
  check_shm(options, checks);
  check_gpus_and_torch(env, checks);
  check_blas(env, checks);
  return checks;
}

bool any_failed(const std::vector<DoctorCheck>& checks) {
  for (const auto& c : checks) {
    if (c.status == CheckStatus::kFail) return true;
  }
  return false;
}

}  // namespace chexscale::launch
