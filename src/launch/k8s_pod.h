// The pod template shared by every job flavour: one container running the launcher, with the
// secure defaults (non-root, read-only root, no capabilities, no service-account token), the
// volumes (/tmp, /dev/shm, output, data, config, the job token when recovering in place), the
// network knobs (host network, RDMA, ifnames) and the scheduler (schedulerName volcano for gang
// scheduling); and the parts other pods and objects share with it (labels, metadata, security
// contexts, the launcher's tail of arguments).
#pragma once

#include <string>
#include <vector>

#include "launch/k8s_options.h"

namespace chexscale::launch {

// Labels every object of the job carries; the NetworkPolicy selects pods by them. `component` is
// app.kubernetes.io/component: the worker pods' "worker", the rendezvous server's its own.
K8sObject job_labels(const K8sRenderOptions& options, const std::string& component = "worker");

// A namespaced object's metadata: its name, the job's namespace and labels.
K8sObject object_metadata(const K8sRenderOptions& options, const std::string& name,
                          const std::string& component = "worker");

// Every pod's securityContext (uid/gid run_as_user, non-root, seccomp RuntimeDefault), and its
// container's (no privilege escalation, read-only root, every capability dropped; IPC_LOCK added
// back when `ipc_lock`).
K8sObject pod_security(const K8sRenderOptions& options);
K8sObject container_security(bool ipc_lock);

// In-place recovery: the job token's Secret as a volume, read-only for the pod's group, and its
// mount at kRdzvTokenDir; the file the launcher and the rendezvous server read.
K8sObject rdzv_token_volume(const K8sRenderOptions& options);
K8sObject rdzv_token_mount();
std::string rdzv_token_file();

// The launcher's last arguments, "--stop-grace S -- <command>": the workers' grace on a SIGTERM,
// and a `train` that resumes from the newest checkpoint (unless it names --resume) when the pod
// is recreated.
std::vector<std::string> stop_grace_and_command(const K8sRenderOptions& options);

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

// The pods' tolerations (options.tolerations parsed).
K8sObject toleration_list(const K8sRenderOptions& options);

// "KEY[=VALUE][:EFFECT]" -> a Toleration object; throws UsageError.
K8sObject parse_toleration(const std::string& spec);

// "KEY=VALUE" -> {KEY, VALUE}; throws UsageError naming `what`.
std::pair<std::string, std::string> parse_key_value(const std::string& spec,
                                                    const std::string& what);

}  // namespace chexscale::launch
