// Collective backends behind one interface: Gloo on CPU, NCCL on CUDA (its own file, compiled only
// against a CUDA LibTorch), MPI on CPU (its own file, compiled only when CMake finds MPI), chosen
// by DistOptions::backend (auto|gloo|nccl|mpi).
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

// kGloo, kNccl or kMpi for a requested backend on the rank's device (see device.h): auto = nccl
// for a CUDA device in a build with NCCL, else gloo (never mpi). Throws UsageError for nccl on a
// CPU-only build or with a CPU device, and for mpi in a build without MPI or with a CUDA device.
Backend resolve_backend(Backend requested, const torch::Device& device);

// The mpi backend needs ranks that MPI itself started: throws UsageError (saying to start under
// mpirun or srun) unless `env` comes from the OpenMPI, MPICH/PMI or Slurm convention.
void require_mpi_launcher(const RendezvousEnv& env);

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

// MPI on MPI_COMM_WORLD (duplicated), initialised on first use (MPI_THREAD_SERIALIZED) and
// finalised at exit. Rank and size come from MPI and must equal env's (else UsageError); env must
// come from an MPI launcher (require_mpi_launcher). The rendezvous store is not used: mpirun or
// srun has already connected the ranks. `allreduce` picks the allreduce (dist_options.h). Throws
// UsageError in a build without MPI.
c10::intrusive_ptr<compat::CollectiveGroup> make_mpi_group(
    const RendezvousEnv& env, MpiAllreduce allreduce = MpiAllreduce::kAuto);

// A group of the MPI world's ranks that pass the same `color` (>= 0), ordered by `key`; nullptr for
// a rank that passes a negative color. Collective over MPI_COMM_WORLD: every rank calls it, in the
// same order. Throws UsageError in a build without MPI.
c10::intrusive_ptr<compat::CollectiveGroup> make_mpi_subgroup(
    int color, int key, MpiAllreduce allreduce = MpiAllreduce::kAuto);

// True when this build can create MPI groups.
bool mpi_compiled();
// Throws UsageError (with the way out) when it cannot.
void require_mpi();

}  // namespace chexscale::distributed
