// The choice of the collective backend for a rank's device and launcher (see process_group.h).
#include <fmt/format.h>

#include <array>
#include <string>

#include "common/error.h"
#include "distributed/process_group.h"

namespace chexscale::distributed {

Backend resolve_backend(Backend requested, const torch::Device& device) {
  if (requested == Backend::kGloo) return Backend::kGloo;
  if (requested == Backend::kNccl) {
    require_nccl();
    if (!device.is_cuda()) {
      throw UsageError(
          "backend nccl needs the ranks on GPUs: use `device` cuda (or auto on a node with a "
          "GPU per local rank), or `backend` gloo");
    }
    return Backend::kNccl;
  }
  if (requested == Backend::kMpi) {
    require_mpi();
    if (device.is_cuda()) {
      throw UsageError("backend mpi moves CPU tensors only: use `device` cpu, or `backend` nccl");
    }
    return Backend::kMpi;
  }
  return device.is_cuda() && nccl_compiled() ? Backend::kNccl : Backend::kGloo;
}

void require_mpi_launcher(const RendezvousEnv& env) {
  constexpr std::array<const char*, 3> kMpiConventions = {"OpenMPI", "MPICH/PMI", "Slurm"};
  for (const char* convention : kMpiConventions) {
    if (env.convention == convention) return;
  }
  throw UsageError(fmt::format(
      "backend mpi needs the ranks started by an MPI launcher (mpirun -np N chexscale ..., or "
      "srun --mpi=pmix chexscale ...), but this process was started under the {} convention{}; "
      "use `backend` gloo with this launcher",
      env.convention,
      env.convention == "torchrun" ? " (torchrun or `chexscale launch`)"
      : env.convention == "none"   ? " (no launcher)"
                                   : ""));
}

}  // namespace chexscale::distributed
