// The shared distributed-job flags (see distributed_flags.h).
#include "cli/distributed_flags.h"

#include <fmt/format.h>

#include "distributed/env.h"

namespace chexscale::cli {

distributed::DistOptions DistributedFlags::resolved() const {
  distributed::DistOptions o = options;
  o.backend = distributed::parse_backend(backend);
  o.device = distributed::parse_device_request(device);
  o.mpi_allreduce = distributed::parse_mpi_allreduce(mpi_allreduce);
  o.hierarchical = distributed::parse_hierarchical(hierarchical);
  o.rdzv_timeout = std::chrono::seconds(rdzv_timeout_s);
  o.collective_timeout = std::chrono::seconds(collective_timeout_s);
  o.validate();
  return o;
}

void add_distributed_flags(CLI::App& cmd, DistributedFlags& f) {
  auto& o = f.options;
  cmd.add_option("--backend", f.backend,
                 "Collective backend: auto (nccl when the ranks are on GPUs, else gloo), gloo, "
                 "nccl, or mpi (CPU ranks started by mpirun or srun --mpi=pmix; needs a build "
                 "with MPI)")
      ->capture_default_str();
  cmd.add_option("--hierarchical", f.hierarchical,
                 "Allreduce node by node (gloo, mpi): reduce-scatter inside each node, each "
                 "rank's share allreduced with its peers on the other nodes, allgather back; every "
                 "gradient byte crosses the network once per node instead of once per rank. "
                 "Alone: on; off (the default): the flat ring; auto: the first 6 steps try both "
                 "and the job keeps the hierarchical path only when it was 10 % faster (see "
                 "docs/bare-metal.md)")
      ->expected(0, 1)
      ->default_str("on")
      ->option_text("[=off|on|auto]");
  cmd.add_option("--mpi-allreduce", f.mpi_allreduce,
                 "How backend mpi allreduces: auto (its own pipelined ring of point-to-point "
                 "messages in a group that spans nodes, MPI_Allreduce inside one node), ring, or "
                 "library (MPI_Allreduce everywhere; see docs/bare-metal.md)")
      ->capture_default_str();
  cmd.add_option("--device", f.device,
                 "Where each rank computes: auto (cuda:LOCAL_RANK when the node has a GPU per "
                 "local rank, else cpu), cpu, cuda")
      ->capture_default_str();
  cmd.add_option("--rdzv-timeout", f.rdzv_timeout_s,
                 "Seconds to wait for the rendezvous store and every rank to join")
      ->capture_default_str();
  cmd.add_option("--collective-timeout", f.collective_timeout_s,
                 "Seconds a collective may take before the watchdog ends the job, naming the "
                 "ranks that did not arrive")
      ->capture_default_str();
  cmd.add_option("--rank", o.rank,
                 "This process's rank; -1 = from the environment (RANK, "
                 "OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID, ...)")
      ->capture_default_str();
  cmd.add_option("--world-size", o.world_size, "Processes in the job; -1 = from the environment")
      ->capture_default_str();
  cmd.add_option("--local-rank", o.local_rank, "Rank on this host; -1 = from the environment")
      ->capture_default_str();
  cmd.add_option("--local-world-size", o.local_world_size,
                 "Processes on this host; -1 = from the environment")
      ->capture_default_str();
  cmd.add_option("--master-addr", o.master_addr,
                 "Host of rank 0's rendezvous store; empty = MASTER_ADDR, Slurm's first node, or "
                 "127.0.0.1 for a single-node job");
  cmd.add_option("--master-port", o.master_port,
                 fmt::format("Port of the rendezvous store; -1 = MASTER_PORT, else {}",
                             distributed::kDefaultMasterPort))
      ->capture_default_str();
}

distributed::ReducerOptions ReducerFlags::resolved() const {
  distributed::ReducerOptions o = options;
  distributed::set_compression(o, compression);
  o.overlap = !no_overlap;
  o.shared_memory = !no_shared_memory;
  o.validate();
  return o;
}

void add_reducer_flags(CLI::App& cmd, ReducerFlags& f) {
  cmd.add_option("--bucket-mb", f.options.bucket_mb,
                 "Gradient bucket size in MiB (one allreduce per bucket)")
      ->capture_default_str();
  cmd.add_option("--first-bucket-mb", f.options.first_bucket_mb,
                 "Size of the first (smallest) bucket in MiB, so communication starts early")
      ->capture_default_str();
  cmd.add_flag("--no-overlap", f.no_overlap,
               "Allreduce all gradients after backward instead of overlapping it (comparison)");
  cmd.add_flag("--no-shared-memory", f.no_shared_memory,
               "Allreduce gradients over the backend's sockets even when every rank runs on one "
               "node, instead of through node shared memory (comparison; see "
               "docs/bare-metal.md)");
  cmd.add_option("--grad-compression", f.compression,
                 fmt::format("What gradients send: none, fp16 or bf16 (halves the bytes; see "
                             "docs/bare-metal.md for accuracy), or powersgd[:RANK] (low-rank "
                             "factors with error feedback, rank {} by default; see "
                             "docs/bare-metal.md)",
                             distributed::kDefaultPowerSgdRank))
      ->capture_default_str();
  cmd.add_option("--powersgd-start-step", f.options.powersgd_start_step,
                 "PowerSGD: steps of plain allreduce before compressing")
      ->capture_default_str();
  cmd.add_option("--powersgd-min-rate", f.options.powersgd_min_rate,
                 "PowerSGD: a matrix is compressed only when its elements exceed this many times "
                 "(rows + cols) * RANK; 0 compresses every matrix")
      ->capture_default_str();
}

}  // namespace chexscale::cli
