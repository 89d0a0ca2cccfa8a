// The options of joining a job: every Backend, DeviceRequest, MpiAllreduce and Hierarchical name
// reads back as itself, a bad name is refused listing the valid ones, and DistOptions::validate()
// names the field it refuses.
#include <gtest/gtest.h>

#include "common/error.h"
#include "distributed/dist_options.h"
#include "test_util/error_message.h"

namespace chexscale::distributed {
namespace {

std::string usage_message(const std::function<void()>& f) {
  return test_util::message_of<UsageError>(f);
}

TEST(DistOptionNames, BackendRoundTrips) {
  for (Backend b : {Backend::kAuto, Backend::kGloo, Backend::kNccl, Backend::kMpi}) {
    EXPECT_EQ(parse_backend(to_string(b)), b) << to_string(b);
  }
  EXPECT_STREQ(to_string(Backend::kNccl), "nccl");
  EXPECT_STREQ(to_string(Backend::kMpi), "mpi");
  EXPECT_EQ(usage_message([] { parse_backend("ucc"); }),
            "backend 'ucc': choose auto, gloo, nccl or mpi");
}

TEST(DistOptionNames, DeviceRequestRoundTrips) {
  for (DeviceRequest d : {DeviceRequest::kAuto, DeviceRequest::kCpu, DeviceRequest::kCuda}) {
    EXPECT_EQ(parse_device_request(to_string(d)), d) << to_string(d);
  }
  EXPECT_STREQ(to_string(DeviceRequest::kCpu), "cpu");
  EXPECT_EQ(usage_message([] { parse_device_request("tpu"); }),
            "device 'tpu': choose auto, cpu or cuda");
  EXPECT_EQ(usage_message([] { parse_device_request("CUDA"); }),
            "device 'CUDA': choose auto, cpu or cuda");
}

TEST(DistOptionNames, MpiAllreduceRoundTrips) {
  for (MpiAllreduce a : {MpiAllreduce::kAuto, MpiAllreduce::kRing, MpiAllreduce::kLibrary}) {
    EXPECT_EQ(parse_mpi_allreduce(to_string(a)), a) << to_string(a);
  }
  EXPECT_EQ(DistOptions{}.mpi_allreduce, MpiAllreduce::kAuto);
  EXPECT_EQ(usage_message([] { parse_mpi_allreduce("tree"); }),
            "mpi_allreduce 'tree': choose auto, ring or library");
}

TEST(DistOptionNames, HierarchicalRoundTrips) {
  for (Hierarchical h : {Hierarchical::kOff, Hierarchical::kOn, Hierarchical::kAuto}) {
    EXPECT_EQ(parse_hierarchical(to_string(h)), h) << to_string(h);
  }
  EXPECT_EQ(DistOptions{}.hierarchical, Hierarchical::kOff);
  EXPECT_STREQ(to_string(Hierarchical::kAuto), "auto");
  EXPECT_EQ(usage_message([] { parse_hierarchical("yes"); }),
            "hierarchical 'yes': choose off, on or auto");
}

TEST(DistOptionsValidate, DefaultsAreValid) {
  EXPECT_NO_THROW(DistOptions{}.validate());
  EXPECT_EQ(DistOptions{}.rdzv_timeout, kDefaultRdzvTimeout);
  EXPECT_EQ(DistOptions{}.collective_timeout, kDefaultCollectiveTimeout);
}

TEST(DistOptionsValidate, TimeoutsUnderOneSecondNameTheirField) {
  DistOptions o;
  o.rdzv_timeout = std::chrono::seconds(0);
  EXPECT_EQ(usage_message([&] { o.validate(); }), "rdzv_timeout 0 s must be at least 1 s");
  o = DistOptions{};
  o.collective_timeout = std::chrono::seconds(-1);
  EXPECT_EQ(usage_message([&] { o.validate(); }), "collective_timeout -1 s must be at least 1 s");
}

TEST(DistOptionsValidate, OverridesBelowMinusOneNameTheirField) {
  DistOptions o;
  o.rank = 0;
  o.master_port = 0;
  EXPECT_NO_THROW(o.validate());  // in range here; detect_environment checks them against the job
  o.local_world_size = -2;
  EXPECT_EQ(usage_message([&] { o.validate(); }),
            "local_world_size -2 must be -1 (from the environment) or >= 0");
}

}  // namespace
}  // namespace chexscale::distributed
