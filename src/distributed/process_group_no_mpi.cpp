// Builds without MPI (CMake found no libopenmpi-dev): asking for the mpi backend is a usage error
// with the way out.
#include "common/error.h"
#include "distributed/process_group.h"

namespace chexscale::distributed {

bool mpi_compiled() {
  return false;
}

void require_mpi() {
  throw UsageError(
      "backend mpi needs chexscale built with MPI (libopenmpi-dev, scripts/install-deps.sh); "
      "this build has none (use `backend` gloo)");
}

c10::intrusive_ptr<compat::CollectiveGroup> make_mpi_group(const RendezvousEnv&, MpiAllreduce) {
  require_mpi();
  return {};
}

c10::intrusive_ptr<compat::CollectiveGroup> make_mpi_subgroup(int, int, MpiAllreduce) {
  require_mpi();
  return {};
}

}  // namespace chexscale::distributed
