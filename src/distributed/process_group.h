// Collective backends behind one interface: Gloo on CPU, NCCL on CUDA (its own file, compiled only
// against a CUDA LibTorch), chosen by DistOptions::backend (auto|gloo|nccl).
#pragma once

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <map>
#include <string>

#include "common/torch_compat.h"
#include "distributed/dist_options.h"
#include "distributed/env.h"

namespace chexscale::distributed {

// kGloo or kNccl for a requested backend on the rank's device (see device.h): auto = nccl for a
// CUDA device in a build with NCCL, else gloo. Throws UsageError for nccl on a CPU-only build or
// with a CPU device.
Backend resolve_backend(Backend requested, const torch::Device& device);

// Where Gloo binds its sockets, and why.
struct GlooAddress {
  std::string interface;  // GLOO_SOCKET_IFNAME entries ("" when binding by address)
  std::string address;    // the local address to bind ("" when binding by interface)
  std::string reason;
};

// GLOO_SOCKET_IFNAME when set; loopback for a single-node job; else the local address of the
// route to MASTER_ADDR (the interface that actually reaches rank 0).
GlooAddress choose_gloo_address(const RendezvousEnv& env,
                                const std::map<std::string, std::string>& process_env);

c10::intrusive_ptr<compat::CollectiveGroup> make_gloo_group(
    const c10::intrusive_ptr<c10d::Store>& store, const RendezvousEnv& env,
    const GlooAddress& address, std::chrono::milliseconds timeout);

// NCCL on cuda:LOCAL_RANK; throws UsageError on a CPU-only build.
c10::intrusive_ptr<compat::CollectiveGroup> make_nccl_group(
    const c10::intrusive_ptr<c10d::Store>& store, const RendezvousEnv& env,
    std::chrono::milliseconds timeout);

// True when this build can create NCCL groups.
bool nccl_compiled();
// Throws UsageError (with the way out) when it cannot.
void require_nccl();

}  // namespace chexscale::distributed
