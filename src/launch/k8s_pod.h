// The pod template shared by every job flavour: one container running the launcher, with the
// secure defaults (non-root, read-only root, no capabilities, no service-account token), the
// volumes (/tmp, /dev/shm, output, data, config), the network knobs (host network, RDMA,
// ifnames) and the scheduler (schedulerName volcano for gang scheduling).
#pragma once

#include <string>
#include <vector>

#include "launch/k8s_options.h"

namespace chexscale::launch {

// Labels every object of the job carries; the NetworkPolicy selects pods by them.
K8sObject job_labels(const K8sRenderOptions& options);

// What differs between the flavours: container name, the launcher's arguments, extra env.
struct PodContainerSpec {
  std::string container_name;
  std::string port_name;          // name of the rendezvous container port
  std::vector<std::string> args;  // after the "chexscale" entrypoint
  K8sObject env = K8sObject::array();
};

K8sObject pod_template(const K8sRenderOptions& options, const PodContainerSpec& container);

// "NAME=COUNT" -> {NAME, COUNT}; throws UsageError.
std::pair<std::string, int> parse_rdma_resource(const std::string& spec);

// "KEY[=VALUE][:EFFECT]" -> a Toleration object; throws UsageError.
K8sObject parse_toleration(const std::string& spec);

// "KEY=VALUE" -> {KEY, VALUE}; throws UsageError naming `what`.
std::pair<std::string, std::string> parse_key_value(const std::string& spec,
                                                    const std::string& what);

}  // namespace chexscale::launch
