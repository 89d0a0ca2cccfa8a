// The Kubernetes options' enum names and derived names; see k8s_options.h. The options' checks,
// K8sRenderOptions::validate(), are in k8s_checks.cpp.
#include "launch/k8s_options.h"

#include <algorithm>

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

const char* to_string(K8sElastic elastic) {
  switch (elastic) {
    case K8sElastic::kAuto:
      return "auto";
    case K8sElastic::kInPlace:
      return "in-place";
    case K8sElastic::kRestart:
      return "restart";
  }
  throw Error("unknown K8sElastic value");
}

K8sElastic parse_k8s_elastic(std::string_view text) {
  return parse_enum(text, "elastic",
                    {K8sElastic::kAuto, K8sElastic::kInPlace, K8sElastic::kRestart});
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

bool command_has_flag(const std::vector<std::string>& command, const std::string& flag) {
  return std::any_of(command.begin(), command.end(), [&](const std::string& word) {
    return word == flag || word.rfind(flag + "=", 0) == 0;
  });
}

bool elastic_flavor(const K8sRenderOptions& o) {
  return o.flavor == K8sFlavor::kElasticPyTorchJob || o.flavor == K8sFlavor::kTrainJob;
}

bool names_gloo(const std::vector<std::string>& command) {
  for (size_t i = 0; i < command.size(); ++i) {
    if (command[i] == "--backend=gloo") return true;
    if (command[i] == "--backend" && i + 1 < command.size() && command[i + 1] == "gloo")
      return true;
  }
  return false;
}

bool in_place(const K8sRenderOptions& o) {
  if (!elastic_flavor(o)) return false;
  if (o.elastic != K8sElastic::kAuto) return o.elastic == K8sElastic::kInPlace;
  const bool trains = !o.command.empty() && o.command.front() == "train";
  return o.nnodes >= 2 && trains && (!o.gpus || names_gloo(o.command));
}

int min_pods(const K8sRenderOptions& o) {
  return o.min_nnodes > 0 ? o.min_nnodes : 1;
}

std::string rendezvous_server_name(const K8sRenderOptions& o) {
  return o.job_name + "-rdzv";
}

std::string rdzv_token_secret_name(const K8sRenderOptions& o) {
  return o.rdzv_token_secret.empty() ? o.job_name + "-rdzv-token" : o.rdzv_token_secret;
}

}  // namespace chexscale::launch
