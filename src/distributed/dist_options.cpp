// Names and checks of the options of joining a job (see dist_options.h).
#include "distributed/dist_options.h"

#include <fmt/format.h>

#include "common/enum_parse.h"
#include "common/error.h"

namespace chexscale::distributed {

const char* to_string(Backend backend) {
  switch (backend) {
    case Backend::kAuto:
      return "auto";
    case Backend::kGloo:
      return "gloo";
    case Backend::kNccl:
      return "nccl";
    case Backend::kMpi:
      return "mpi";
  }
  throw Error("unknown Backend value");
}

Backend parse_backend(std::string_view text) {
  return parse_enum(text, "backend",
                    {Backend::kAuto, Backend::kGloo, Backend::kNccl, Backend::kMpi});
}

const char* to_string(MpiAllreduce algorithm) {
  switch (algorithm) {
    case MpiAllreduce::kAuto:
      return "auto";
    case MpiAllreduce::kRing:
      return "ring";
    case MpiAllreduce::kLibrary:
      return "library";
  }
  throw Error("unknown MpiAllreduce value");
}

MpiAllreduce parse_mpi_allreduce(std::string_view text) {
  return parse_enum(text, "mpi_allreduce",
                    {MpiAllreduce::kAuto, MpiAllreduce::kRing, MpiAllreduce::kLibrary});
}

const char* to_string(Hierarchical mode) {
  switch (mode) {
    case Hierarchical::kOff:
      return "off";
    case Hierarchical::kOn:
      return "on";
    case Hierarchical::kAuto:
      return "auto";
  }
  throw Error("unknown Hierarchical value");
}

Hierarchical parse_hierarchical(std::string_view text) {
  return parse_enum(text, "hierarchical",
                    {Hierarchical::kOff, Hierarchical::kOn, Hierarchical::kAuto});
}

const char* to_string(DeviceRequest device) {
  switch (device) {
    case DeviceRequest::kAuto:
      return "auto";
    case DeviceRequest::kCpu:
      return "cpu";
    case DeviceRequest::kCuda:
      return "cuda";
  }
  throw Error("unknown DeviceRequest value");
}

DeviceRequest parse_device_request(std::string_view text) {
  return parse_enum(text, "device",
                    {DeviceRequest::kAuto, DeviceRequest::kCpu, DeviceRequest::kCuda});
}

void DistOptions::validate() const {
  for (const auto& [name, value] : {std::pair{"rank", rank},
                                    {"world_size", world_size},
                                    {"local_rank", local_rank},
                                    {"local_world_size", local_world_size},
                                    {"master_port", master_port}}) {
    if (value < -1) {
      throw UsageError(fmt::format("{} {} must be -1 (from the environment) or >= 0", name, value));
    }
  }
  for (const auto& [name, timeout] :
       {std::pair{"rdzv_timeout", rdzv_timeout}, {"collective_timeout", collective_timeout}}) {
    if (timeout.count() < 1) {
      throw UsageError(fmt::format("{} {} s must be at least 1 s", name, timeout.count()));
    }
  }
}

}  // namespace chexscale::distributed
