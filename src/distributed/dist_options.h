// How a process joins a distributed job: the collective backend, the device each rank computes
// on, the rendezvous and collective timeouts, and explicit overrides of the environment contract.
// Each enumeration has one to_string / parse_X pair; parse_X throws UsageError naming the values.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace chexscale::distributed {

// The collective backend: auto = nccl for ranks on GPUs in a build with NCCL, else gloo; mpi only
// when asked for (ranks started by mpirun or srun, CPU tensors).
enum class Backend { kAuto, kGloo, kNccl, kMpi };

const char* to_string(Backend backend);  // "auto", "gloo", "nccl", "mpi"
Backend parse_backend(std::string_view text);

// How the mpi backend allreduces: auto = its own pipelined ring of point-to-point messages
// (mpi_ring.h) in a group whose ranks span several nodes, MPI_Allreduce inside one node (shared
// memory); ring or library (MPI_Allreduce, the MPI library's own algorithm) everywhere.
enum class MpiAllreduce { kAuto, kRing, kLibrary };

const char* to_string(MpiAllreduce algorithm);  // "auto", "ring", "library"
MpiAllreduce parse_mpi_allreduce(std::string_view text);

// Whether allreduce goes node by node (hierarchical_group.h): off (the flat ring), on, or auto (the
// first steps try both and the job keeps one: hierarchical_trial.h).
enum class Hierarchical { kOff, kOn, kAuto };

const char* to_string(Hierarchical mode);  // "off", "on", "auto"
Hierarchical parse_hierarchical(std::string_view text);

// Where a rank computes: cpu, cuda (cuda:LOCAL_RANK), or auto (cuda when the node has a GPU for
// every local rank, else cpu).
enum class DeviceRequest { kAuto, kCpu, kCuda };

const char* to_string(DeviceRequest device);  // "auto", "cpu", "cuda"
DeviceRequest parse_device_request(std::string_view text);

inline constexpr std::chrono::seconds kDefaultRdzvTimeout{300};
inline constexpr std::chrono::seconds kDefaultCollectiveTimeout{300};

struct DistOptions {
  Backend backend = Backend::kAuto;
  DeviceRequest device = DeviceRequest::kAuto;
  std::chrono::seconds rdzv_timeout = kDefaultRdzvTimeout;  // wait for store/peers at start
  std::chrono::seconds collective_timeout =
      kDefaultCollectiveTimeout;  // watchdog, every collective
  // Allreduce node by node (hierarchical_group.h): reduce-scatter inside each node, each rank's
  // share allreduced across the nodes, allgather back; or try both first (auto). gloo and mpi only.
  Hierarchical hierarchical = Hierarchical::kOff;
  // The mpi backend's allreduce; anything but auto is for backend mpi only.
  MpiAllreduce mpi_allreduce = MpiAllreduce::kAuto;
  // Explicit overrides of the environment contract (-1 / "" = take from the environment).
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  int local_world_size = -1;
  std::string master_addr;
  int master_port = -1;

  // Throws UsageError naming the field for an override below -1 or a timeout under one second.
  void validate() const;
};

}  // namespace chexscale::distributed
