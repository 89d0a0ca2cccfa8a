// Device and backend selection: --device auto|cpu|cuda and --backend auto|gloo|nccl on the
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

TEST(ResolveDevice, CpuIsAlwaysCpu) {
  EXPECT_EQ(resolve_device("cpu", 3, 4), torch::Device(torch::kCPU));
}

TEST(ResolveDevice, RejectsUnknownNames) {
  EXPECT_EQ(usage_message([] { resolve_device("tpu", 0, 1); }),
            "--device 'tpu': choose auto, cpu or cuda");
}

TEST(ResolveDevice, AutoAndCudaFollowTheVisibleGpus) {
  const int gpus = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (gpus == 0) {
    EXPECT_EQ(resolve_device("auto", 0, 1), torch::Device(torch::kCPU));
    const std::string msg = usage_message([] { resolve_device("cuda", 0, 1); });
    if (nccl_compiled()) {
      EXPECT_NE(msg.find("no CUDA device is visible"), std::string::npos) << msg;
    } else {
      EXPECT_NE(msg.find("this build is CPU-only"), std::string::npos) << msg;
    }
  } else {
    EXPECT_EQ(resolve_device("auto", gpus - 1, gpus), torch::Device(torch::kCUDA, gpus - 1));
    EXPECT_EQ(resolve_device("auto", 0, gpus + 1), torch::Device(torch::kCPU));
    EXPECT_EQ(resolve_device("cuda", 0, 1), torch::Device(torch::kCUDA, 0));
    const std::string msg = usage_message([&] { resolve_device("cuda", gpus, gpus + 1); });
    EXPECT_NE(msg.find(fmt::format("local rank {} needs cuda:{}", gpus, gpus)), std::string::npos)
        << msg;
  }
}

TEST(ResolveBackend, AutoIsNcclOnlyForGpuRanks) {
  const torch::Device cpu(torch::kCPU);
  EXPECT_EQ(resolve_backend("auto", cpu), "gloo");
  EXPECT_EQ(resolve_backend("gloo", cpu), "gloo");
  EXPECT_EQ(resolve_backend("auto", torch::Device(torch::kCUDA, 0)),
            nccl_compiled() ? "nccl" : "gloo");
  EXPECT_EQ(usage_message([&] { resolve_backend("mpi", cpu); }),
            "--backend 'mpi': choose auto, gloo or nccl");
}

TEST(ResolveBackend, NcclNeedsACudaBuildAndGpuRanks) {
  const std::string msg =
      usage_message([] { resolve_backend("nccl", torch::Device(torch::kCPU)); });
  if (nccl_compiled()) {
    EXPECT_NE(msg.find("--backend nccl needs the ranks on GPUs"), std::string::npos) << msg;
  } else {
    EXPECT_NE(msg.find("this build is CPU-only"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace chexscale::distributed
