// The Kubernetes options' enum names and derived names; see k8s_options.h. The options' checks,
// K8sRenderOptions::validate(), are the renderer's (k8s_render.cpp).
#include "launch/k8s_options.h"

#include "common/enum_parse.h"
#include "common/error.h"

namespace chexscale::launch {

const char* to_string(K8sFlavor flavor) {
  switch (flavor) {
    case K8sFlavor::kIndexedJob:
      return "indexed-job";
    case K8sFlavor::kPyTorchJob:
      return "pytorchjob";
    case K8sFlavor::kElasticPyTorchJob:
      return "pytorchjob-elastic";
    case K8sFlavor::kTrainJob:
      return "trainjob";
  }
  throw Error("unknown K8sFlavor value");
}

K8sFlavor parse_k8s_flavor(std::string_view text) {
  return parse_enum(text, "flavor",
                    {K8sFlavor::kIndexedJob, K8sFlavor::kPyTorchJob, K8sFlavor::kElasticPyTorchJob,
                     K8sFlavor::kTrainJob});
}

const char* to_string(K8sScheduler scheduler) {
  switch (scheduler) {
    case K8sScheduler::kDefault:
      return "default";
    case K8sScheduler::kVolcano:
      return "volcano";
  }
  throw Error("unknown K8sScheduler value");
}

K8sScheduler parse_k8s_scheduler(std::string_view text) {
  return parse_enum(text, "scheduler", {K8sScheduler::kDefault, K8sScheduler::kVolcano});
}

const char* to_string(ImagePullPolicy policy) {
  switch (policy) {
    case ImagePullPolicy::kAlways:
      return "Always";
    case ImagePullPolicy::kIfNotPresent:
      return "IfNotPresent";
    case ImagePullPolicy::kNever:
      return "Never";
  }
  throw Error("unknown ImagePullPolicy value");
}

ImagePullPolicy parse_image_pull_policy(std::string_view text) {
  return parse_enum(
      text, "image_pull_policy",
      {ImagePullPolicy::kAlways, ImagePullPolicy::kIfNotPresent, ImagePullPolicy::kNever});
}

std::string training_runtime_name(const K8sRenderOptions& o) {
  return "chexscale-" + o.namespace_name + "-" + o.job_name;
}

std::string master_address(const K8sRenderOptions& o) {
  return o.master_addr.empty() ? o.job_name + "-0." + o.job_name : o.master_addr;
}

}  // namespace chexscale::launch
