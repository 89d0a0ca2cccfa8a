// Device and backend selection: DeviceRequest auto|cpu|cuda and Backend auto|gloo|nccl|mpi on the
// machine the tests run on (CPU-only builds and hosts give the CPU answers and messages).
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include "common/error.h"
#include "distributed/device.h"
#include "distributed/process_group.h"
#include "test_util/error_message.h"

namespace chexscale::distributed {
namespace {

std::string usage_message(const std::function<void()>& f) {
  return test_util::message_of<UsageError>(f);
}

constexpr DeviceRequest kAuto = DeviceRequest::kAuto;
constexpr DeviceRequest kCuda = DeviceRequest::kCuda;

TEST(ResolveDevice, CpuIsAlwaysCpu) {
  EXPECT_EQ(resolve_device(DeviceRequest::kCpu, 3, 4), torch::Device(torch::kCPU));
}

TEST(ResolveDevice, AutoAndCudaFollowTheVisibleGpus) {
  const int gpus = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (gpus == 0) {
    EXPECT_EQ(resolve_device(kAuto, 0, 1), torch::Device(torch::kCPU));
    const std::string msg = usage_message([] { resolve_device(kCuda, 0, 1); });
    if (nccl_compiled()) {
      EXPECT_NE(msg.find("no CUDA device is visible"), std::string::npos) << msg;
    } else {
      EXPECT_NE(msg.find("this build is CPU-only"), std::string::npos) << msg;
    }
  } else {
    EXPECT_EQ(resolve_device(kAuto, gpus - 1, gpus), torch::Device(torch::kCUDA, gpus - 1));
    EXPECT_EQ(resolve_device(kAuto, 0, gpus + 1), torch::Device(torch::kCPU));
    EXPECT_EQ(resolve_device(kCuda, 0, 1), torch::Device(torch::kCUDA, 0));
    const std::string msg = usage_message([&] { resolve_device(kCuda, gpus, gpus + 1); });
    EXPECT_NE(msg.find(fmt::format("local rank {} needs cuda:{}", gpus, gpus)), std::string::npos)
        << msg;
  }
}

TEST(ResolveBackend, AutoIsNcclOnlyForGpuRanks) {
  const torch::Device cpu(torch::kCPU);
  EXPECT_EQ(resolve_backend(Backend::kAuto, cpu), Backend::kGloo);
  EXPECT_EQ(resolve_backend(Backend::kGloo, cpu), Backend::kGloo);
  EXPECT_EQ(resolve_backend(Backend::kAuto, torch::Device(torch::kCUDA, 0)),
            nccl_compiled() ? Backend::kNccl : Backend::kGloo);
}

TEST(ResolveBackend, NcclNeedsACudaBuildAndGpuRanks) {
  const std::string msg =
      usage_message([] { resolve_backend(Backend::kNccl, torch::Device(torch::kCPU)); });
  if (nccl_compiled()) {
    EXPECT_NE(msg.find("backend nccl needs the ranks on GPUs"), std::string::npos) << msg;
  } else {
    EXPECT_NE(msg.find("this build is CPU-only"), std::string::npos) << msg;
  }
}

TEST(ResolveBackend, MpiNeedsABuildWithMpiAndCpuRanks) {
  const torch::Device cpu(torch::kCPU);
  if (mpi_compiled()) {
    EXPECT_EQ(resolve_backend(Backend::kMpi, cpu), Backend::kMpi);
    const std::string msg =
        usage_message([] { resolve_backend(Backend::kMpi, torch::Device(torch::kCUDA, 0)); });
    EXPECT_NE(msg.find("backend mpi moves CPU tensors only"), std::string::npos) << msg;
  } else {
    const std::string msg = usage_message([&] { resolve_backend(Backend::kMpi, cpu); });
    EXPECT_NE(msg.find("needs chexscale built with MPI"), std::string::npos) << msg;
  }
}

TEST(ResolveBackend, MpiNeedsRanksStartedByAnMpiLauncher) {
  RendezvousEnv env;
  for (const char* convention : {"OpenMPI", "MPICH/PMI", "Slurm"}) {
    env.convention = convention;
    EXPECT_NO_THROW(require_mpi_launcher(env)) << convention;
  }
  for (const char* convention : {"torchrun", "Kubernetes Indexed Job", "none"}) {
    env.convention = convention;
    const std::string msg = usage_message([&] { require_mpi_launcher(env); });
    EXPECT_NE(msg.find("needs the ranks started by an MPI launcher (mpirun -np N"),
              std::string::npos)
        << convention << ": " << msg;
    EXPECT_NE(msg.find(std::string("under the ") + convention + " convention"), std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace chexscale::distributed
